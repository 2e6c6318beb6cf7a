package snaphttp_test

import (
	"context"
	"encoding/json"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/snap"
)

// readCounter wraps a listener: it counts the bytes the server read from
// its connections, and reached(n) is closed once they are n or more.
type readCounter struct {
	net.Listener
	mu      sync.Mutex
	n       int64
	waiters []readWaiter
}

type readWaiter struct {
	n    int64
	done chan struct{}
}

func (l *readCounter) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, l: l}, nil
}

func (l *readCounter) add(n int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.n += int64(n)
	kept := l.waiters[:0]
	for _, w := range l.waiters {
		if l.n >= w.n {
			close(w.done)
		} else {
			kept = append(kept, w)
		}
	}
	l.waiters = kept
}

// reached returns a channel closed once the server read n bytes.
func (l *readCounter) reached(n int64) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	done := make(chan struct{})
	if l.n >= n {
		close(done)
		return done
	}
	l.waiters = append(l.waiters, readWaiter{n, done})
	return done
}

type countedConn struct {
	net.Conn
	l *readCounter
}

func (c *countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.l.add(n)
	return n, err
}

// sentCounter is a client connection counting the bytes it wrote.
type sentCounter struct {
	net.Conn
	mu sync.Mutex
	n  int64
}

func (c *sentCounter) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.mu.Lock()
	c.n += int64(n)
	c.mu.Unlock()
	return n, err
}

func (c *sentCounter) sent() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// shutdownRefusal checks that b is a 5003 refusal signed by the server
// (Handler.Refuse: addressed to no one) naming the shutdown, with a
// retryAfter.
func shutdownRefusal(t *testing.T, b []byte) {
	t.Helper()
	v, err := snap.NewValidator(snap.Config{}).Validate(context.Background(), b)
	if err != nil || !v.Signed || v.Type != snap.TypeResponse || v.From != addr(serverKey) {
		t.Fatalf("a request read ahead at shutdown: %s (%v), want a response signed by the server", b, err)
	}
	e := snap.ResponseError(v.Payload)
	if e == nil || e.Code != snap.CodeServiceUnavailable {
		t.Fatalf("a request read ahead at shutdown: %s, want 5003", v.Payload)
	}
	var d struct {
		RetryAfter *int   `json:"retryAfter"`
		Reason     string `json:"reason"`
	}
	raw, _ := json.Marshal(e.Data)
	if err := json.Unmarshal(raw, &d); err != nil || d.RetryAfter == nil || *d.RetryAfter < 1 || d.Reason != "shutdown" {
		t.Fatalf("the shutdown refusal's data: %s, want {retryAfter, reason: shutdown}", raw)
	}
}

// The requests a WebSocket read ahead when shutdown begins, behind the
// one being answered, are each answered by a signed 5003 refusal naming
// the shutdown, in order, after the answer in flight; then the
// connection closes with 1001. Before, the connection closed with 1001
// once the request in flight was answered, and the requests read ahead
// were never answered.
func TestWebSocketShutdownRefusesReadAhead(t *testing.T) {
	h := &hooks{stream: func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
		<-ctx.Done() // shutdown began
		return map[string]any{"task": map[string]any{"id": "t-sd", "status": map[string]any{"state": "working", "timestamp": "2026-01-01T00:00:00Z"}}}, nil
	}}
	counter := &readCounter{}
	e := start(t, h, nil, func(l net.Listener) net.Listener { counter.Listener = l; return counter })
	var cc *sentCounter
	d := websocket.Dialer{NetDialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cc = &sentCounter{Conn: c}
		return cc, nil
	}}
	c, _, err := d.Dial(e.ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	msgs := [][]byte{raw(t, request(t, "message/stream", `{}`))}
	for range 3 {
		msgs = append(msgs, raw(t, request(t, "tasks/get", `{"taskId":"t-1"}`)))
	}
	for _, m := range msgs {
		if err := c.WriteMessage(websocket.TextMessage, m); err != nil {
			t.Fatal(err)
		}
	}
	// Every byte sent was read by the server: the requests behind the
	// stream are read ahead (MaxPending is 8), waiting for it.
	select {
	case <-counter.reached(cc.sent()):
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not read the requests")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- e.stop() }()

	if v := verify(t, readFrame(t, c)); v.Method != snap.MethodMessageStream || errCode(v.Payload) != 0 {
		t.Fatalf("the stream in flight: %s %s", v.Method, v.Payload)
	}
	for range 3 {
		shutdownRefusal(t, readFrame(t, c))
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, b, err := c.ReadMessage(); !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Fatalf("after the refusals: %q %v, want close 1001", b, err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Serve: %v", err)
	}
}
