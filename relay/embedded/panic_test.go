package embedded

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// A panic while a client's message is handled closes that client (1011)
// and ends its connection as any other end does: it leaves the relay's
// list of clients, so that shutting down, which waits for every client
// on that list, does not wait for it for ever.
func TestPanicServingClientEndsIt(t *testing.T) {
	clock := newClock()
	var boom atomic.Bool
	r := startRelay(t, Config{Now: func() time.Time {
		if boom.CompareAndSwap(true, false) {
			panic("test: a panic handling a client's message")
		}
		return clock.Now()
	}})
	c := dial(t, r.url)
	ev := newKey(t).event(t, 1, clock.Unix(), "hello")
	boom.Store(true) // the EVENT's handling asks the time
	c.send("EVENT", ev)
	if _, err := c.readErr(5 * time.Second); !websocket.IsCloseError(err, websocket.CloseInternalServerErr) {
		t.Errorf("the client whose message panicked: %v, want closed with 1011", err)
	}

	stopped := make(chan struct{})
	go func() {
		defer close(stopped)
		r.stop()
	}()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return in 10 s after a client's panic: it waits for the client for ever")
	}
	r.mu.Lock()
	n := len(r.conns)
	r.mu.Unlock()
	if n != 0 {
		t.Errorf("%d clients left after Serve returned", n)
	}
}
