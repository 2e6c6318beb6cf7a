package snaphttp_test

import (
	"bytes"
	"context"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// panicOnce is a Handler whose first Serve panics.
type panicOnce struct {
	snap.Handler
	calls atomic.Int32
}

func (p *panicOnce) Serve(ctx context.Context, in snap.Inbound, send func(*snap.Message) error) *snap.Message {
	if p.calls.Add(1) == 1 {
		panic("test: a handler panics")
	}
	return p.Handler.Serve(ctx, in, send)
}

// A panic while a WebSocket's request is answered closes that connection
// (1011) and gives back all it held: its message's share of BodyMemory (here the
// whole of it: one message of MaxBody), so that the next connection is
// read, and its writer goroutine, gone once Serve returns.
func TestWebSocketPanicReleasesWhatItHeld(t *testing.T) {
	e := start(t, nil, func(c *snaphttp.Config) {
		c.Handler = &panicOnce{Handler: c.Handler}
		c.MaxBody, c.BodyMemory = 64<<10, 64<<10
	})
	first := dial(t, e)
	if err := first.WriteMessage(websocket.TextMessage, raw(t, request(t, "message/send", sendPayload))); err != nil {
		t.Fatal(err)
	}
	first.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := first.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseInternalServerErr) {
		t.Fatalf("the connection whose request panicked: %v, want closed with 1011", err)
	}

	second := dial(t, e)
	if err := second.WriteMessage(websocket.TextMessage, raw(t, request(t, "message/send", sendPayload))); err != nil {
		t.Fatal(err)
	}
	second.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, b, err := second.ReadMessage(); err != nil {
		t.Errorf("the next connection is not answered (its message waits for body memory the panic kept?): %v", err)
	} else {
		verify(t, b)
	}
	second.Close()

	if err := e.stop(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	if stacks := buf[:runtime.Stack(buf, true)]; bytes.Contains(stacks, []byte("snaphttp.(*wsConn).write(")) {
		t.Errorf("a WebSocket's writer outlives Serve:\n%s", stacks)
	}
}
