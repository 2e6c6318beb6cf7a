package relay

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// gatedOKRelay is a relay that answers OK true to every EVENT, whose
// upgrades wait until open is closed.
func gatedOKRelay(t *testing.T, open <-chan struct{}) string {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []*websocket.Conn
	)
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-open:
		case <-done:
			return
		}
		ws, err := (&websocket.Upgrader{}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		mu.Lock()
		conns = append(conns, ws)
		wg.Add(1)
		mu.Unlock()
		defer wg.Done()
		defer ws.Close()
		for {
			_, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			if env, ok := nostr.ParseMessage(msg).(*nostr.EventEnvelope); ok {
				b, _ := nostr.OKEnvelope{EventID: env.Event.ID, OK: true}.MarshalJSON()
				if ws.WriteMessage(websocket.TextMessage, b) != nil {
					return
				}
			}
		}
	}))
	t.Cleanup(func() {
		close(done)
		mu.Lock()
		for _, ws := range conns {
			ws.Close()
		}
		mu.Unlock()
		srv.Close()
		wg.Wait()
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// A relay that connects while a publication waits for the only relay that
// was connected, which never answers, is given the event too, and the
// publication succeeds once it accepts. Before, the event went only to
// the relays connected when Publish began: it waited out its whole bound
// for the silent relay and failed, the relay that came meanwhile never
// having been sent the event.
func TestPublishReachesARelayThatConnectsMeanwhile(t *testing.T) {
	var (
		got  = make(chan struct{})
		once sync.Once
	)
	bad := newHostileRelay(t, func(frame []byte, _ func([]byte) error) {
		if _, ok := nostr.ParseMessage(frame).(*nostr.EventEnvelope); ok {
			once.Do(func() { close(got) }) // and never answers
		}
	})
	open := make(chan struct{})
	good := gatedOKRelay(t, open)
	const bound = 20 * time.Second
	p := NewPool(PoolConfig{URLs: []string{bad.url, good}, Logger: ptLogger(), PublishTimeout: bound})
	p.Start(t.Context())
	defer p.Close()
	itWaitFor(t, "the silent relay connected", func() bool { return itState(p, bad.url) == StateConnected })

	type result struct {
		res PublishResult
		err error
	}
	done := make(chan result, 1)
	go func() {
		res, err := p.Publish(context.Background(), *ptEvent(t, ptNow(), "reply"))
		done <- result{res, err}
	}()
	<-got // the silent relay has the event: Publish is waiting for it
	close(open)
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("publish: %v (%+v)", r.err, r.res.Relays)
		}
		if o := r.res.Relays; r.res.Accepted() != 1 || !o[1].OK {
			t.Fatalf("outcomes %+v", o)
		}
	case <-time.After(bound - 5*time.Second):
		t.Fatal("Publish still waits for the silent relay, another relay having connected")
	}
}
