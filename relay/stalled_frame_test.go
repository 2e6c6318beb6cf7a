package relay

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// TestRelayStalledMessageDropsConnection: a relay that begins a message
// (fragments of 64 KiB, the last never sent) and never ends it, sending
// pongs meanwhile, has its connection dropped once the message has taken
// longer than a silent relay may: each pong moved the read deadline on,
// and the connection looked connected for ever, the relay's part of the
// message held, while nothing came from it.
func TestRelayStalledMessageDropsConnection(t *testing.T) {
	const pongWait = 200 * time.Millisecond
	stop := make(chan struct{})
	defer close(stop)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := (&websocket.Upgrader{WriteBufferSize: 1024}).Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		mw, err := ws.NextWriter(websocket.TextMessage)
		if err != nil {
			return
		}
		// Frames go out as the writer's buffer fills; the last, and the
		// end of the message, never do.
		if _, err := mw.Write([]byte(`["NOTICE","` + strings.Repeat("a", 64<<10))); err != nil {
			return
		}
		tick := time.NewTicker(pongWait / 4)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if ws.WriteControl(websocket.PongMessage, nil, time.Now().Add(time.Second)) != nil {
					return
				}
			}
		}
	}))
	defer srv.Close()
	c, err := dialWebsocket(t.Context(), "ws"+strings.TrimPrefix(srv.URL, "http"), pongWait)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	limit := time.NewTimer(20 * pongWait)
	defer limit.Stop()
	select {
	case _, ok := <-c.Messages():
		if ok {
			t.Fatal("a message came")
		}
		if err := c.Err(); err == nil || !strings.Contains(err.Error(), "timeout") {
			t.Fatalf("connection ended with %v, want a read time-out", err)
		}
	case <-limit.C:
		t.Fatalf("a relay's message begun %s ago, the relay sending pongs, still holds the connection", 20*pongWait)
	}
}
