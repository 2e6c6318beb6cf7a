package snaphttp_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strings"
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

// Every way a WebSocket upgrade ends gives its place among MaxConns
// back: refused by the upgrader (a version it does not speak, a page's
// origin not allowed), a Handler's panic, a close by the peer.
func TestWebSocketSlotsComeBack(t *testing.T) {
	e := start(t, nil, func(c *snaphttp.Config) {
		c.Handler = &panicOnce{Handler: c.Handler}
		c.MaxConns, c.MaxConnsPerPeer = 1, 1
	})
	upgrade := func(h http.Header) int {
		t.Helper()
		_, resp, err := websocket.DefaultDialer.Dial(e.ws, h)
		if resp == nil {
			t.Fatalf("dial: %v", err)
		}
		return resp.StatusCode
	}
	for range 3 {
		if st := upgrade(http.Header{"Origin": {"https://elsewhere.example"}}); st != http.StatusForbidden {
			t.Fatalf("an upgrade from a page of another origin: %d, want 403", st)
		}
	}
	// The library checks the version after the origin: sent by hand.
	for range 3 {
		c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /snap HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 8\r\n\r\n", c.RemoteAddr())
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		c.Close()
		if err != nil || resp.StatusCode != http.StatusBadRequest {
			t.Fatalf("an upgrade of version 8: %v %v, want 400", resp, err)
		}
	}
	// A panic, then a close by the peer: each place comes back once the
	// server has seen the connection end.
	redial := func() *websocket.Conn {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			c, resp, err := websocket.DefaultDialer.Dial(e.ws, nil)
			if err == nil {
				return c
			}
			if resp == nil || resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusTooManyRequests || time.Now().After(deadline) {
				t.Fatalf("dial: %v %v", resp, err)
			}
			runtime.Gosched()
		}
	}
	c := redial()
	if err := c.WriteMessage(websocket.TextMessage, raw(t, request(t, "message/send", sendPayload))); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, _, err := c.ReadMessage(); err == nil {
		t.Fatal("answered; want the panic to close the connection")
	}
	c.Close()
	redial().Close()
	redial().Close()
}
