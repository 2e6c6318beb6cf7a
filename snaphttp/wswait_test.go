package snaphttp_test

import (
	"bytes"
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// pingCounter dials e's WebSocket with a client that answers every ping
// and reads in the background: pinged(n) is closed once n pings came,
// and frames carries the messages read, until the connection ends (its
// error on closed).
type pingCounter struct {
	c      *websocket.Conn
	frames chan []byte
	closed chan error
	pings  atomic.Int32
	after  int32
	pinged chan struct{}
}

func dialCountingPings(t *testing.T, e *env, n int32) *pingCounter {
	t.Helper()
	p := &pingCounter{c: dial(t, e), frames: make(chan []byte, 64), closed: make(chan error, 1), after: n, pinged: make(chan struct{})}
	p.c.SetPingHandler(func(data string) error {
		if p.pings.Add(1) == p.after {
			close(p.pinged)
		}
		return p.c.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	go func() {
		for {
			_, b, err := p.c.ReadMessage()
			if err != nil {
				p.closed <- err
				return
			}
			p.frames <- b
		}
	}()
	return p
}

// next returns the next message read, failing t when the connection
// ended first.
func (p *pingCounter) next(t *testing.T, what string) []byte {
	t.Helper()
	select {
	case b := <-p.frames:
		return b
	case err := <-p.closed:
		t.Fatalf("%s: the connection ended without an answer: %v", what, err)
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: no answer in 10 s", what)
	}
	return nil
}

// A WebSocket message that waits for its share of BodyMemory (the
// bodies held at once are all another request's) longer than
// IdleTimeout and twice PingInterval is answered once the memory is
// free. Before, the wait was counted as the peer's silence: the
// connection was closed "idle" (or for a read deadline that passed while
// nothing was read), and the message, read by no one, never answered.
func TestWebSocketMessageWaitingForMemoryIsAnswered(t *testing.T) {
	release := make(chan struct{})
	entered := make(chan struct{}, 2)
	var calls atomic.Int32
	h := &hooks{send: func(ctx context.Context) {
		entered <- struct{}{}
		if calls.Add(1) > 1 {
			return // the WebSocket message
		}
		select {
		case <-release:
		case <-ctx.Done():
		}
	}}
	e := start(t, h, func(c *snaphttp.Config) {
		c.MaxBody, c.BodyMemory = 128<<10, 128<<10
		c.PingInterval, c.IdleTimeout = 50*time.Millisecond, 150*time.Millisecond
	})
	posted := make(chan int, 1)
	go func() {
		resp, err := http.Post(e.base+"/snap", "application/json", bytes.NewReader(signedOfSize(t, 64<<10)))
		if err != nil {
			posted <- -1
			return
		}
		resp.Body.Close()
		posted <- resp.StatusCode
	}()
	<-entered // the posted body holds all the memory
	p := dialCountingPings(t, e, 6)
	if err := p.c.WriteMessage(websocket.TextMessage, raw(t, request(t, "message/send", sendPayload))); err != nil {
		t.Fatal(err)
	}
	// Six pings: past IdleTimeout (three) and the read deadline (two)
	// while the message waits.
	select {
	case <-p.pinged:
	case err := <-p.closed:
		t.Fatalf("closed while its message waited for memory: %v", err)
	case b := <-p.frames:
		t.Fatalf("answered while the memory was held: %s", b)
	}
	close(release)
	if st := <-posted; st != http.StatusOK {
		t.Errorf("the posted body: %d", st)
	}
	verify(t, p.next(t, "the message that waited"))
}

// Requests read ahead on a WebSocket (MaxPending) while a stream runs
// longer than twice PingInterval are answered after it, the peer
// answering every ping meanwhile. Before, the read deadline was set
// before the reader waited for room in the queue, where it read nothing
// (the peer's pongs included): once the stream ended it found the
// deadline passed, took the peer for silent and closed the connection,
// and the requests it had read ahead were never answered.
func TestWebSocketReadAheadBehindALongStream(t *testing.T) {
	var p *pingCounter
	ready := make(chan struct{})
	h := &hooks{stream: func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
		<-ready
		select {
		case <-p.pinged:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		return map[string]any{"task": map[string]any{"id": "t-s", "status": map[string]any{"state": "completed", "timestamp": "2026-01-01T00:00:00Z"}}}, nil
	}}
	e := start(t, h, func(c *snaphttp.Config) {
		c.MaxPending = 1
		c.PingInterval, c.IdleTimeout = 50*time.Millisecond, time.Hour
	})
	p = dialCountingPings(t, e, 5)
	close(ready)
	msgs := [][]byte{raw(t, request(t, "message/stream", `{}`))}
	for range 3 {
		msgs = append(msgs, raw(t, request(t, "tasks/get", `{"taskId":"t-1"}`)))
	}
	for _, m := range msgs {
		if err := p.c.WriteMessage(websocket.TextMessage, m); err != nil {
			t.Fatal(err)
		}
	}
	if v := verify(t, p.next(t, "the stream")); v.Method != snap.MethodMessageStream || errCode(v.Payload) != 0 {
		t.Fatalf("the stream's answer: %s %s", v.Method, v.Payload)
	}
	for i := range 3 {
		if v := verify(t, p.next(t, "a request read ahead")); errCode(v.Payload) != 0 {
			t.Fatalf("request %d read ahead: %s", i+1, v.Payload)
		}
	}
}
