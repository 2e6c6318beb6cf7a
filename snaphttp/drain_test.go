package snaphttp_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/internal/nettest"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// readCounter wraps a listener, or is given a WebSocket's reads
// (snaphttp.SetSocketRead, add): it counts the bytes the server read from
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

// shutdownSignal returns hooks whose message/stream waits for shutdown,
// and starts such a stream over SSE: began is closed once shutdown
// began (the stream's context ended), and streamed carries the stream's
// final response.
func shutdownSignal() (h *hooks, began chan struct{}) {
	began = make(chan struct{})
	h = &hooks{stream: func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
		if err := emit(map[string]any{"taskId": "t-sd", "progress": 0.5, "message": "half"}); err != nil {
			return nil, err
		}
		<-ctx.Done()
		close(began)
		return map[string]any{"task": map[string]any{"id": "t-sd", "status": map[string]any{"state": "working", "timestamp": "2026-01-01T00:00:00Z"}}}, nil
	}}
	return h, began
}

// postCut writes a POST of m's bytes to /snap on c, the body cut after
// the first cut bytes (all of it when cut is -1), and returns the rest.
func postCut(t *testing.T, c net.Conn, m []byte, cut int) (rest []byte) {
	t.Helper()
	if cut < 0 {
		cut = len(m)
	}
	head := fmt.Sprintf("POST /snap HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(m))
	if _, err := c.Write(append([]byte(head), m[:cut]...)); err != nil {
		t.Fatal(err)
	}
	return m[cut:]
}

// SSE streams in progress when shutdown begins end with their signed
// final response, and a POST whose body is still coming is answered:
// the connection is active, and http.Server.Shutdown waits for its
// handler, which handles it (it began before shutdown) or refuses it
// (503, the shutdown's 5003) when it began after.
func TestShutdownAnswersPostInFlight(t *testing.T) {
	h, began := shutdownSignal()
	counter := &readCounter{}
	e := start(t, h, nil, func(l net.Listener) net.Listener { counter.Listener = l; return counter })
	streamed := make(chan error, 1)
	entered := make(chan struct{})
	go func() {
		m, err := e.client.Stream(context.Background(), e.base+"/snap", request(t, "message/stream", `{}`), func(*snap.Message) error {
			close(entered)
			return nil
		})
		if err == nil && !strings.Contains(string(m.Payload), "t-sd") {
			err = fmt.Errorf("final response %s", m.Payload)
		}
		streamed <- err
	}()
	<-entered
	c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	counter.mu.Lock()
	base := counter.n
	counter.mu.Unlock()
	m := raw(t, request(t, "tasks/get", `{"taskId":"t-1"}`))
	rest := postCut(t, c, m, len(m)/2)
	select {
	case <-counter.reached(base + int64(len(m)/2)):
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not read the request's start")
	}
	stopped := make(chan error, 1)
	go func() { stopped <- e.stop() }()
	<-began
	if _, err := c.Write(rest); err != nil {
		t.Fatal(err)
	}
	// Answered: handled, when its handler ran before shutdown began
	// (the body was being read), else refused as not yet handled.
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("a POST whose body came during shutdown: no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		if v := verify(t, b); errCode(v.Payload) != 0 {
			t.Errorf("a POST whose body came during shutdown: %s", v.Payload)
		}
	case http.StatusServiceUnavailable:
		if !strings.Contains(string(b), `"reason":"shutdown"`) {
			t.Errorf("a POST whose body came during shutdown: %s", b)
		}
	default:
		t.Errorf("a POST whose body came during shutdown: %d %s", resp.StatusCode, b)
	}
	if err := <-streamed; err != nil {
		t.Errorf("the SSE stream at shutdown: %v", err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// A request that comes on a connection accepted before shutdown began,
// once it began, is answered: 503 with Retry-After and the shutdown's
// 5003, and the connection closed. Before, net/http read the request,
// found the server shutting down and closed the connection: the peer was
// told nothing.
func TestShutdownAnswersRequestOnNewConnection(t *testing.T) {
	h, began := shutdownSignal()
	e := start(t, h, nil)
	entered := make(chan struct{})
	go e.client.Stream(context.Background(), e.base+"/snap", request(t, "message/stream", `{}`), func(*snap.Message) error {
		close(entered)
		return nil
	})
	<-entered
	c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	health(t, e) // c was accepted: the server accepted the later one
	stopped := make(chan error, 1)
	go func() { stopped <- e.stop() }()
	<-began
	// Accepting stopped: http.Server.Shutdown began.
	for {
		d, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
		if err != nil {
			break
		}
		d.Close()
		runtime.Gosched()
	}
	postCut(t, c, raw(t, request(t, "tasks/get", `{"taskId":"t-1"}`)), -1)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("a request on a connection accepted before shutdown: no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), `"reason":"shutdown"`) {
		t.Errorf("a request during shutdown: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// halfFrameAtShutdown opens a WebSocket by hand and sends on it a
// message/stream that waits for shutdown, a tasks/get read ahead behind
// it, and the first half of a third request's frame; once the server read
// the third frame's header, shutdown begins. It returns the socket and the rest of the
// third frame, and stopped carries Serve's error. The client reads the
// stream's response and the refusal of the request read ahead: by then
// the server stopped reading.
func halfFrameAtShutdown(t *testing.T, mutate func(*snaphttp.Config)) (c net.Conn, rest []byte, stopped chan error) {
	t.Helper()
	return halfMessageAtShutdown(t, mutate, func(t *testing.T) []byte { return raw(t, request(t, "tasks/get", `{"taskId":"t-3"}`)) })
}

// halfMessageAtShutdown is halfFrameAtShutdown whose third message is
// third's.
func halfMessageAtShutdown(t *testing.T, mutate func(*snaphttp.Config), third func(*testing.T) []byte) (c net.Conn, rest []byte, stopped chan error) {
	t.Helper()
	entered := make(chan struct{})
	h := &hooks{stream: func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
		close(entered)
		<-ctx.Done() // shutdown began
		return map[string]any{"task": map[string]any{"id": "t-sd", "status": map[string]any{"state": "working", "timestamp": "2026-01-01T00:00:00Z"}}}, nil
	}}
	// Counted as the WebSocket counts its reads: a read the listener's
	// counter saw could be one the WebSocket had not counted yet when
	// shutdown began, and the third frame, whose header that read
	// brought, would be taken for one that came after (about 1 run in
	// 100 under load).
	counter := &readCounter{}
	h.socketRead = counter.add
	e := start(t, h, mutate)
	c, err := nettest.DialWebSocket(strings.TrimPrefix(e.base, "http://"), "/snap")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	counter.mu.Lock()
	base := counter.n
	counter.mu.Unlock()

	m := third(t)
	frame := clientFrame(true, 0x1, m)
	wire := clientFrame(true, 0x1, raw(t, request(t, "message/stream", `{}`)))
	wire = append(wire, clientFrame(true, 0x1, raw(t, request(t, "tasks/get", `{"taskId":"t-2"}`)))...)
	// The third frame's header, at least, is read: the server is in its
	// message (reading it, or waiting for memory to read it).
	begun := len(wire) + len(frame) - len(m)
	wire = append(wire, frame[:len(frame)/2]...)
	rest = frame[len(frame)/2:]
	if _, err := c.Write(wire); err != nil {
		t.Fatal(err)
	}
	select {
	case <-counter.reached(base + int64(begun)):
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not read the requests")
	}
	// The stream is being handled: before, shutdown would refuse it.
	<-entered
	stopped = make(chan error, 1)
	go func() { stopped <- e.stop() }()

	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	op, p, err := nettest.ReadAnswer(c)
	if err != nil || op != 0x1 {
		t.Fatalf("the stream in flight: op %#x %q %v", op, p, err)
	}
	if v := verify(t, p); v.Method != snap.MethodMessageStream || errCode(v.Payload) != 0 {
		t.Fatalf("the stream in flight: %s %s", v.Method, v.Payload)
	}
	op, p, err = nettest.ReadAnswer(c)
	if err != nil || op != 0x1 {
		t.Fatalf("the request read ahead: op %#x %q %v", op, p, err)
	}
	shutdownRefusal(t, p)
	return c, rest, stopped
}

// readGoingAway reads the server's next frame and fails t unless it is
// the close 1001.
func readGoingAway(t *testing.T, c net.Conn) {
	t.Helper()
	op, p, err := nettest.ReadAnswer(c)
	if err != nil || op != 0x8 || len(p) < 2 || binary.BigEndian.Uint16(p) != websocket.CloseGoingAway {
		t.Fatalf("op %#x %q %v, want the close 1001", op, p, err)
	}
}

// A request whose frame is half received when shutdown begins is read
// whole once its rest comes, and answered by the signed shutdown refusal
// (5003) before the close 1001. Before, the server stopped reading at
// once: the request got only the close 1001, its peer no answer.
func TestWebSocketShutdownFinishesFrameBegun(t *testing.T) {
	c, rest, stopped := halfFrameAtShutdown(t, func(c *snaphttp.Config) { c.ShutdownReadTimeout = time.Minute })
	restRefused(t, c, rest, stopped)
}

// The same, the half-received request waiting for its share of
// BodyMemory (held by the requests before it) when shutdown begins: its
// rest is read and dropped, and it is refused.
func TestWebSocketShutdownFinishesFrameWaitingForMemory(t *testing.T) {
	c, rest, stopped := halfFrameAtShutdown(t, func(c *snaphttp.Config) {
		c.ShutdownReadTimeout = time.Minute
		// A peer's share (a sixteenth) holds the stream's request
		// (about 420 bytes) and room for MaxBody, not the request read
		// ahead besides.
		c.MaxBody = 16 << 10
		c.BodyMemory = 16 * (c.MaxBody + 600)
	})
	restRefused(t, c, rest, stopped)
}

// restRefused writes the rest of a request left half sent at shutdown
// (and whatever the test sends behind it), and checks that the request
// is answered by the signed shutdown refusal, then the close 1001, and
// that Serve returns.
func restRefused(t *testing.T, c net.Conn, rest []byte, stopped <-chan error) {
	t.Helper()
	if _, err := c.Write(rest); err != nil {
		t.Fatal(err)
	}
	op, p, err := nettest.ReadAnswer(c)
	if err != nil || op != 0x1 {
		t.Fatalf("the request half received at shutdown: op %#x %q %v, want its refusal", op, p, err)
	}
	shutdownRefusal(t, p)
	readGoingAway(t, c)
	if err := <-stopped; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// A request whose frame does not come whole within ShutdownReadTimeout of
// shutdown gets the close 1001, and shutdown does not wait for it longer.
// A message over MaxBody half received when shutdown begins is read to
// its end once its rest comes, as a request is, and answered, as it is
// when no shutdown runs, by the signed 1004 naming the limit, before the
// close 1001. Before, it got the close alone: the reader, stopped, did
// not say the message was too large.
func TestWebSocketShutdownAnswersAMessageOverTheLimit(t *testing.T) {
	const limit = 16 << 10
	c, rest, stopped := halfMessageAtShutdown(t, func(c *snaphttp.Config) {
		c.ShutdownReadTimeout = time.Minute
		c.MaxBody = limit
	}, func(*testing.T) []byte { return bytes.Repeat([]byte("x"), limit+4<<10) })
	if _, err := c.Write(rest); err != nil {
		t.Fatal(err)
	}
	op, p, err := nettest.ReadAnswer(c)
	if err != nil || op != 0x1 {
		t.Fatalf("the message over the limit half received at shutdown: op %#x %q %v, want its refusal", op, p, err)
	}
	v, err := snap.NewValidator(snap.Config{}).Validate(context.Background(), p)
	if err != nil || !v.Signed || v.Type != snap.TypeResponse {
		t.Fatalf("the message over the limit half received at shutdown: %s (%v), want a signed response", p, err)
	}
	if se := snap.ResponseError(v.Payload); se == nil || se.Code != snap.CodeInvalidPayload || se.Data["limit"] != float64(limit) {
		t.Fatalf("the message over the limit half received at shutdown: %s, want 1004 with limit %d", v.Payload, limit)
	}
	readGoingAway(t, c)
	if err := <-stopped; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

func TestWebSocketShutdownFrameNotFinished(t *testing.T) {
	c, _, stopped := halfFrameAtShutdown(t, func(c *snaphttp.Config) { c.ShutdownReadTimeout = 50 * time.Millisecond })
	readGoingAway(t, c)
	if err := <-stopped; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// pipelined starts a server whose message/stream waits for shutdown and
// whose message/send waits for shutdown to begin, then sends on one
// connection first (a POST /snap of it) and, pipelined behind it, a
// tasks/get. Once the server read both and handles first, shutdown
// begins. It returns the connection's reader, and stopped carries
// Serve's error.
func pipelined(t *testing.T, first *snap.Message, sse bool) (br *bufio.Reader, stopped chan error) {
	t.Helper()
	h, began := shutdownSignal()
	stream := h.stream
	entered := make(chan struct{}, 2)
	h.stream = func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
		entered <- struct{}{}
		return stream(ctx, req, emit)
	}
	h.send = func(context.Context) {
		entered <- struct{}{}
		<-began
	}
	counter := &readCounter{}
	e := start(t, h, nil, func(l net.Listener) net.Listener { counter.Listener = l; return counter })
	// The stream that tells shutdown began (began), over SSE.
	go e.client.Stream(context.Background(), e.base+"/snap", request(t, "message/stream", `{}`), func(*snap.Message) error { return nil })
	<-entered
	c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	counter.mu.Lock()
	base := counter.n
	counter.mu.Unlock()
	var wire []byte
	for i, m := range [][]byte{raw(t, first), raw(t, request(t, "tasks/get", `{"taskId":"t-1"}`))} {
		accept := ""
		if sse && i == 0 {
			accept = "Accept: text/event-stream\r\n"
		}
		wire = fmt.Appendf(wire, "POST /snap HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n%s", accept, len(m), m)
	}
	if _, err := c.Write(wire); err != nil {
		t.Fatal(err)
	}
	select {
	case <-counter.reached(base + int64(len(wire))):
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not read the requests")
	}
	<-entered
	stopped = make(chan error, 1)
	go func() { stopped <- e.stop() }()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	return bufio.NewReader(c), stopped
}

// A request pipelined behind one in flight when shutdown begins (HTTP/1.1
// pipelining, which SDK clients, Go's and browsers' do not use) is not
// answered: net/http, shutting down, closes the connection once the
// answer in flight is written, without handling what follows, though it
// read it (docs/operator.md tells this limit). The answer in flight, written once
// shutdown began, says Connection: close: its peer knows the requests it
// pipelined behind it were not handled (RFC 9112 §9.3.2).
func TestShutdownPipelinedRequestAfterPost(t *testing.T) {
	br, stopped := pipelined(t, request(t, "message/send", sendPayload), false)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the request in flight: no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !resp.Close {
		t.Errorf("the request in flight: %d %v %s, want 200 and Connection: close", resp.StatusCode, resp.Header, b)
	}
	if _, err := br.Peek(1); !errors.Is(err, io.EOF) {
		rest, _ := io.ReadAll(br)
		t.Errorf("after the answer in flight: %q %v, want the connection closed; if net/http now answers the request pipelined behind it, docs/operator.md says otherwise", rest, err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// The same behind an SSE stream, whose response began before shutdown
// did and so says nothing of Connection: close: it ends with its final
// response, then the connection closes; the request pipelined behind it
// is not answered.
func TestShutdownPipelinedRequestAfterStream(t *testing.T) {
	br, stopped := pipelined(t, request(t, "message/stream", `{}`), true)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("the stream in flight: no answer: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusOK || !strings.Contains(string(b), "t-sd") {
		t.Errorf("the stream in flight: %d %v %s", resp.StatusCode, err, b)
	}
	if _, err := br.Peek(1); !errors.Is(err, io.EOF) {
		rest, _ := io.ReadAll(br)
		t.Errorf("after the stream in flight: %q %v, want the connection closed; if net/http now answers the request pipelined behind it, docs/operator.md says otherwise", rest, err)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// Once the message begun at shutdown is read, nothing more is read from
// the socket: messages the peer sends after it (here right behind its
// rest, each larger than the reader's buffer, so none is held whole
// there) are neither read nor answered; the close 1001 follows the
// begun message's refusal. Before, each message whose header came into
// the reader's buffer while it finished the one before was finished in
// turn, until ShutdownReadTimeout ran out: a peer that kept sending had
// every message read and a signed refusal written for each.
func TestWebSocketShutdownReadsNothingAfterFrameBegun(t *testing.T) {
	c, rest, stopped := halfFrameAtShutdown(t, func(c *snaphttp.Config) { c.ShutdownReadTimeout = time.Minute })
	wire := rest
	for range 16 {
		wire = append(wire, clientFrame(true, 0x1, []byte(strings.Repeat("x", 2048)))...)
	}
	restRefused(t, c, wire, stopped)
}

// An answer written once shutdown began says Connection: close, as the
// operator's guide says of every answer from then on: its client sends
// its next request on a new connection, not on this one, which the
// shutdown closes once idle (a POST lost on it is not retried). Here a
// keep-alive POST's handler answers as soon as the streams ended, while
// Serve is held right after shutdown began. Before, keep-alives were
// turned off only after the streams ended and WebSocket connections
// were told: an answer written in between kept its connection open.
func TestShutdownAnswerInFlightSaysClose(t *testing.T) {
	h, began := shutdownSignal()
	entered := make(chan struct{}, 1)
	h.send = func(context.Context) {
		entered <- struct{}{}
		<-began
	}
	e := start(t, h, nil)
	answered := make(chan struct{})
	snaphttp.SetDrained(e.srv, func() {
		select {
		case <-answered:
		case <-time.After(10 * time.Second):
		}
	})
	streaming := make(chan struct{}, 1)
	go e.client.Stream(context.Background(), e.base+"/snap", request(t, "message/stream", `{}`), func(*snap.Message) error {
		select {
		case streaming <- struct{}{}:
		default:
		}
		return nil
	})
	<-streaming
	c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	postCut(t, c, raw(t, request(t, "message/send", sendPayload)), -1)
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- e.stop() }()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	close(answered)
	if err != nil {
		t.Fatalf("the request in flight: no answer: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !resp.Close {
		t.Errorf("the request in flight: %d %v %s, want 200 and Connection: close", resp.StatusCode, resp.Header, b)
	}
	if err := <-stopped; err != nil {
		t.Errorf("Serve: %v", err)
	}
}

// A message whose header the reader had received (in its buffer) before
// shutdown began is finished, though the reader, held by a full queue of
// requests read ahead, took a whole message from its buffer before it
// after the stop: here a stream in flight, a request read ahead (the
// queue, MaxPending 1, full), one the reader holds, a small message and
// half of a last request's frame, which came together with that small
// one. Each is refused in order once the last one's rest comes; then the
// close 1001.
func TestWebSocketShutdownFinishesFrameBehindWholeOne(t *testing.T) {
	entered := make(chan struct{})
	h := &hooks{stream: func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
		close(entered)
		<-ctx.Done() // shutdown began
		return map[string]any{"task": map[string]any{"id": "t-sd", "status": map[string]any{"state": "working", "timestamp": "2026-01-01T00:00:00Z"}}}, nil
	}}
	counter := &readCounter{}
	h.socketRead = counter.add // as in halfFrameAtShutdown
	e := start(t, h, func(c *snaphttp.Config) {
		c.MaxPending = 1
		c.ShutdownReadTimeout = time.Minute
	})
	c, err := nettest.DialWebSocket(strings.TrimPrefix(e.base, "http://"), "/snap")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	counter.mu.Lock()
	base := counter.n
	counter.mu.Unlock()

	held := raw(t, request(t, "tasks/get", `{"taskId":"t-3"}`))
	last := clientFrame(true, 0x1, raw(t, request(t, "tasks/get", `{"taskId":"t-5"}`)))
	wire := clientFrame(true, 0x1, raw(t, request(t, "message/stream", `{}`)))
	wire = append(wire, clientFrame(true, 0x1, raw(t, request(t, "tasks/get", `{"taskId":"t-2"}`)))...)
	// The held request's last fragment is small: the read of it from the
	// socket brings the small message and the last frame's half into
	// the reader's buffer.
	wire = append(wire, clientFrame(false, 0x1, held[:len(held)-10])...)
	wire = append(wire, clientFrame(true, 0x0, held[len(held)-10:])...)
	wire = append(wire, clientFrame(true, 0x1, []byte(`{}`))...)
	wire = append(wire, last[:len(last)/2]...)
	rest := last[len(last)/2:]
	if _, err := c.Write(wire); err != nil {
		t.Fatal(err)
	}
	select {
	case <-counter.reached(base + int64(len(wire))):
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not read the requests")
	}
	<-entered
	stopped := make(chan error, 1)
	go func() { stopped <- e.stop() }()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	op, p, err := nettest.ReadAnswer(c)
	if err != nil || op != 0x1 {
		t.Fatalf("the stream in flight: op %#x %q %v", op, p, err)
	}
	if v := verify(t, p); v.Method != snap.MethodMessageStream || errCode(v.Payload) != 0 {
		t.Fatalf("the stream in flight: %s %s", v.Method, v.Payload)
	}
	for _, what := range []string{"the request read ahead", "the request held", "the small message"} {
		op, p, err = nettest.ReadAnswer(c)
		if err != nil || op != 0x1 {
			t.Fatalf("%s: op %#x %q %v, want its refusal", what, op, p, err)
		}
		shutdownRefusal(t, p)
	}
	restRefused(t, c, rest, stopped)
}
