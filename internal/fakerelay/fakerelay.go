package fakerelay

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// A Script plays a relay: it is called, in the connection's reader, with
// each frame a client sends; write sends one text frame back.
type Script func(frame []byte, write func([]byte) error)

// Serve starts a WebSocket server on loopback that hands every frame it
// reads to script, and returns its ws:// URL. When tb ends, its
// connections are closed, later ones refused, and Serve waits for its
// handlers to return.
func Serve(tb testing.TB, script Script) string {
	tb.Helper()
	return Gated(tb, nil, script)
}

// Gated is Serve whose upgrades wait until open is closed (a nil open
// waits for nothing): a relay that comes up late.
func Gated(tb testing.TB, open <-chan struct{}, script Script) string {
	tb.Helper()
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		closed bool
		conns  []*websocket.Conn
	)
	done := make(chan struct{})
	upgrader := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if closed {
			mu.Unlock()
			return
		}
		wg.Add(1)
		mu.Unlock()
		defer wg.Done()
		if open != nil {
			select {
			case <-open:
			case <-done:
				return
			}
		}
		ws, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		mu.Lock()
		conns = append(conns, ws)
		mu.Unlock()
		defer ws.Close()
		write := func(b []byte) error {
			_ = ws.SetWriteDeadline(time.Now().Add(10 * time.Second))
			return ws.WriteMessage(websocket.TextMessage, b)
		}
		for {
			_, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			script(msg, write)
		}
	}))
	tb.Cleanup(func() {
		mu.Lock()
		closed = true
		close(done)
		for _, ws := range conns {
			ws.Close()
		}
		mu.Unlock()
		srv.Close()
		wg.Wait()
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// AcceptEvents answers OK true to every EVENT, and nothing else.
func AcceptEvents(frame []byte, write func([]byte) error) {
	if env, ok := nostr.ParseMessage(frame).(*nostr.EventEnvelope); ok {
		b, _ := nostr.OKEnvelope{EventID: env.Event.ID, OK: true}.MarshalJSON()
		write(b)
	}
}

// AnswerREQ answers every REQ with the events answer gives for it, under
// the REQ's subscription id, then EOSE; it ignores other frames.
func AnswerREQ(answer func(req *nostr.ReqEnvelope) []nostr.Event) Script {
	return func(frame []byte, write func([]byte) error) {
		req, ok := nostr.ParseMessage(frame).(*nostr.ReqEnvelope)
		if !ok {
			return
		}
		for _, ev := range answer(req) {
			b, _ := nostr.EventEnvelope{SubscriptionID: &req.SubscriptionID, Event: ev}.MarshalJSON()
			if write(b) != nil {
				return
			}
		}
		b, _ := nostr.EOSEEnvelope(req.SubscriptionID).MarshalJSON()
		write(b)
	}
}
