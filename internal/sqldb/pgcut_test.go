package sqldb_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// pgProxy forwards connections to a PostgreSQL server until cut: then it
// closes the connections it carries and holds every new one open without
// a byte either way, as an address does whose server is gone (a failover
// not yet done, a balancer whose backend died); mend forwards again.
type pgProxy struct {
	target string
	ln     net.Listener

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
}

func newPGProxy(t *testing.T, target string) *pgProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &pgProxy{target: target, ln: ln, conns: make(map[net.Conn]struct{})}
	var wg sync.WaitGroup
	t.Cleanup(func() {
		ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			p.conns[c] = struct{}{}
			held := p.cut
			p.mu.Unlock()
			if held {
				continue // closed at cleanup
			}
			wg.Go(func() { p.forward(c) })
		}
	})
	return p
}

func (p *pgProxy) forward(c net.Conn) {
	u, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.mu.Lock()
	p.conns[u] = struct{}{}
	p.mu.Unlock()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(u, c)
		u.Close()
		close(done)
	}()
	_, _ = io.Copy(c, u)
	c.Close()
	<-done
}

// setCut cuts (true) or mends (false) the path to the server.
func (p *pgProxy) setCut(cut bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = cut
	if cut {
		for c := range p.conns {
			c.Close()
		}
		clear(p.conns)
	}
}

// A PostgreSQL server that goes away behind an address that takes
// connections but never answers (or drops them unanswered) fails the
// statements waiting for a connection within the connect time-out, instead
// of holding them, and those of the callers that set no deadline of their
// own (a Nostr request, the audit sealer) for ever; and the pool connects
// again by itself once the server is back.
func TestPostgresServerGoneAndBack(t *testing.T) {
	dsn := testdb.Postgres(t)
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	p := newPGProxy(t, u.Host)
	u.Host = p.ln.Addr().String()
	proxied := u.String()
	db, err := sqldb.Open(context.Background(), proxied, sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background() // no deadline: as a Nostr request's
	if _, err := db.W.ExecContext(ctx, "SELECT 1"); err != nil {
		t.Fatal(err)
	}

	p.setCut(true)
	failed := make(chan error, 1)
	go func() {
		_, err := db.W.ExecContext(ctx, "SELECT 1")
		failed <- err
	}()
	select {
	case err := <-failed:
		if err == nil {
			t.Fatal("a statement succeeded with the server gone")
		}
		t.Logf("with the server gone: %v", err)
	case <-time.After(sqldb.DefaultConnectTimeout + 10*time.Second):
		t.Fatal("a statement waits for ever for a server that is gone")
	}

	p.setCut(false)
	var one int
	if err := db.W.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		t.Fatalf("the server back, the statement failed: %v", err)
	}
}
