package sqlstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// A message/send whose task and replay record were committed by
// PostgreSQL, but whose connection was cut before the result came back,
// is answered with the result kept in its record, not left unanswered as
// a second delivery of its Nostr event would be; that second delivery
// gets no answer, and one task exists.
func TestClaimCommittedResultLost(t *testing.T) {
	dsn := postgresSchemaDSN(t)
	const marker = "cut-after-this-commits"
	p := newCutProxy(t, dsn, []byte(marker))
	s := open(t, p.dsn, Options{})
	node, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	peer, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	self, from := node.Address(identity.Mainnet), peer.Address(identity.Mainnet)
	v := snap.NewValidator(snap.Config{Self: self, Replay: s.ReplayStoreNoSync(), ClaimMethods: []string{"message/send"}})
	svc := tasks.NewService(s, tasks.ServiceOptions{KeepResults: v.Retention(), Logger: slog.New(slog.DiscardHandler)})
	router := snap.NewRouter()
	svc.Register(router, nil)
	srv := snap.NewServer(snap.ServerConfig{Key: node, Router: router, Validator: v,
		Results: s.ReplayStore(), Logger: slog.New(slog.DiscardHandler)})

	m := &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, Type: snap.TypeRequest, Method: "message/send",
		From: from, To: self, Timestamp: time.Now().Unix(),
		Payload: []byte(`{"message":{"messageId":"m1","role":"user","parts":[{"text":"` + marker + `"}]}}`)}
	if err := m.Sign(peer); err != nil {
		t.Fatal(err)
	}
	raw, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	resp := srv.Respond(ctx, snap.Inbound{Raw: raw, Via: "ev-1"})
	if !p.cut.Load() {
		t.Fatal("the proxy cut no connection")
	}
	all, err := s.List(ctx, tasks.Filter{Owner: from})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 {
		t.Fatalf("%d tasks; want the one committed", len(all))
	}
	if resp == nil {
		t.Fatal("a request whose write committed without its result got no answer")
	}
	if !strings.Contains(string(resp.Payload), all[0].ID) {
		t.Errorf("answered %s; want the kept result, task %s", resp.Payload, all[0].ID)
	}
	if resp := srv.Respond(ctx, snap.Inbound{Raw: raw, Via: "ev-1"}); resp != nil {
		t.Errorf("a second delivery of the same event answered %s; want none", resp.Payload)
	}
}

// cutProxy forwards TCP connections to a PostgreSQL server. The first
// client message carrying its marker is forwarded; the server's answers
// on that connection are then dropped, and the connection is closed once
// the server reports itself ready again (ReadyForQuery): the statement
// ran, its client never learns the outcome.
type cutProxy struct {
	dsn string
	cut atomic.Bool
}

func newCutProxy(t *testing.T, dsn string, marker []byte) *cutProxy {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	target := u.Host
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	u.Host = ln.Addr().String()
	p := &cutProxy{dsn: u.String()}
	var conns sync.Map
	t.Cleanup(func() {
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			d, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			conns.Store(c, nil)
			conns.Store(d, nil)
			var dropping atomic.Bool
			wg.Go(func() { // client to server
				defer d.Close()
				buf := make([]byte, 64<<10)
				for {
					n, err := c.Read(buf)
					if n > 0 {
						if bytes.Contains(buf[:n], marker) && p.cut.CompareAndSwap(false, true) {
							dropping.Store(true)
						}
						if _, werr := d.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						return
					}
				}
			})
			wg.Go(func() { // server to client
				defer c.Close()
				buf := make([]byte, 64<<10)
				var held []byte
				ready := []byte{'Z', 0, 0, 0, 5}
				for {
					n, err := d.Read(buf)
					if n > 0 {
						if dropping.Load() {
							held = append(held[max(0, len(held)-len(ready)):], buf[:n]...)
							if bytes.Contains(held, ready) {
								d.Close()
								return
							}
						} else if _, werr := c.Write(buf[:n]); werr != nil {
							return
						}
					}
					if err != nil {
						if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
							t.Logf("proxy: %v", err)
						}
						return
					}
				}
			})
		}
	})
	return p
}
