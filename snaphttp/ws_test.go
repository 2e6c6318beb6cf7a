package snaphttp_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

func dial(t *testing.T, e *env) *websocket.Conn {
	t.Helper()
	c, resp, err := websocket.DefaultDialer.Dial(e.ws, nil)
	if err != nil {
		t.Fatalf("dial: %v %v", err, resp)
	}
	if resp.Header.Get("SNAP-Version") != "0.1" {
		t.Errorf("upgrade without SNAP-Version: %v", resp.Header)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func readFrame(t *testing.T, c *websocket.Conn) []byte {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	typ, b, err := c.ReadMessage()
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	if typ != websocket.TextMessage {
		t.Fatalf("frame type %d, want text", typ)
	}
	return b
}

// One connection carries several requests, answered in order: exactly one
// frame for a non-streaming method (the frame after it answers the next
// request), events then the response for a streaming one, and an answer
// for every error.
func TestWebSocketFrames(t *testing.T) {
	e := start(t, nil, nil)
	c := dial(t, e)
	tampered := strings.Replace(string(raw(t, request(t, "tasks/get", `{"taskId":"t-1"}`))), `"t-1"`, `"t-9"`, 1)
	steps := []struct {
		name   string
		frame  []byte
		events int
		method string
		code   snap.Code
	}{
		{"message/send", raw(t, request(t, "message/send", sendPayload)), 0, "message/send", 0},
		{"tasks/get", raw(t, request(t, "tasks/get", `{"taskId":"t-1"}`)), 0, "tasks/get", 0},
		{"stream", raw(t, request(t, "message/stream", `{"steps":4}`)), 4, "message/stream", 0},
		{"handler error", raw(t, request(t, "tasks/get", `{"taskId":"nope"}`)), 0, "tasks/get", snap.CodeTaskNotFound},
		{"bad signature", []byte(tampered), 0, "tasks/get", snap.CodeSignatureInvalid},
		{"unknown method", raw(t, request(t, "tasks/nothing", `{}`)), 0, "tasks/nothing", snap.CodeMethodNotFound},
		{"stream again", raw(t, request(t, "message/stream", `{"steps":1}`)), 1, "message/stream", 0},
		{"last", raw(t, request(t, "message/send", sendPayload)), 0, "message/send", 0},
	}
	for _, st := range steps {
		if err := c.WriteMessage(websocket.TextMessage, st.frame); err != nil {
			t.Fatal(err)
		}
		for i := 0; i <= st.events; i++ {
			v := verify(t, readFrame(t, c))
			want := snap.TypeEvent
			if i == st.events {
				want = snap.TypeResponse
			}
			if v.Type != want || v.Method != st.method {
				t.Fatalf("%s: frame %d is a %s of %s, want a %s of %s", st.name, i, v.Type, v.Method, want, st.method)
			}
			if want == snap.TypeResponse && errCode(v.Payload) != st.code {
				t.Errorf("%s: error %d, want %d: %s", st.name, errCode(v.Payload), st.code, v.Payload)
			}
		}
	}
}

// Frames that are not SNAP messages are answered too, with a signed 1003.
func TestWebSocketAnswersGarbage(t *testing.T) {
	e := start(t, nil, nil)
	c := dial(t, e)
	for _, f := range []string{`not json`, `[]`, `{}`} {
		c.WriteMessage(websocket.TextMessage, []byte(f))
		b := readFrame(t, c)
		v, err := snap.NewValidator(snap.Config{}).Validate(context.Background(), b)
		if err != nil || !v.Signed || v.Type != snap.TypeResponse || errCode(v.Payload) == 0 {
			t.Errorf("%s: answer %s (%v)", f, b, err)
		}
	}
}

// SNAP messages are JSON text frames. A binary frame, even one carrying a
// signed request, is not handled: after the requests before it are
// answered, in order, it gets a signed 1005 whose data names what was
// sent and what is taken, then the close 1003 (unsupported data); other
// connections are not touched.
func TestWebSocketRefusesBinaryFrames(t *testing.T) {
	e := start(t, nil, nil)
	other := dial(t, e)
	c := dial(t, e)
	if err := c.WriteMessage(websocket.TextMessage, raw(t, request(t, "message/send", sendPayload))); err != nil {
		t.Fatal(err)
	}
	if err := c.WriteMessage(websocket.BinaryMessage, raw(t, request(t, "message/send", sendPayload))); err != nil {
		t.Fatal(err)
	}
	if v := verify(t, readFrame(t, c)); v.Method != "message/send" || errCode(v.Payload) != 0 {
		t.Fatalf("the text frame before the binary one: %s %s", v.Method, v.Payload)
	}
	b := readFrame(t, c)
	v, err := snap.NewValidator(snap.Config{}).Validate(context.Background(), b)
	if err != nil || !v.Signed || v.Type != snap.TypeResponse {
		t.Fatalf("answer to a binary frame: %s (%v), want a signed response", b, err)
	}
	se := snap.ResponseError(v.Payload)
	if se == nil || se.Code != snap.CodeContentTypeNotSupported || se.Data["provided"] != "binary" ||
		fmt.Sprint(se.Data["supported"]) != "[text]" {
		t.Fatalf("answer to a binary frame: %s, want 1005 with data {provided: binary, supported: [text]}", v.Payload)
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err = c.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseUnsupportedData {
		t.Fatalf("after the refusal: %v, want close 1003", err)
	}
	other.WriteMessage(websocket.TextMessage, raw(t, request(t, "message/send", sendPayload)))
	if v := verify(t, readFrame(t, other)); errCode(v.Payload) != 0 {
		t.Errorf("another connection after the refusal: %s", v.Payload)
	}
}

// A message over MaxBody, whether one frame or several whose sizes add
// up past it, is not handled: after the requests before it are answered,
// in order, it gets a signed 1004 whose data names the limit, as a POST
// over it gets with its 413, then the close 1009 (message too big). The
// rest of the message is read and dropped, up to MaxBody more, so that
// the peer, which is still sending it, gets the answer and the close
// rather than a reset.
func TestWebSocketReadLimit(t *testing.T) {
	const limit = 16 << 10
	e := start(t, nil, func(c *snaphttp.Config) { c.MaxBody = limit })
	for _, tc := range []struct {
		name string
		size int // the message's
		// buffer is the client's write buffer: the message goes in
		// frames of about that size.
		buffer int
	}{
		{"one frame", limit + 1024, 64 << 10},
		{"frames", 20 << 10, 4 << 10},      // past the limit at the fifth
		{"many frames", 30 << 10, 1 << 10}, // its rest, 14 KiB, is read and dropped
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := websocket.Dialer{WriteBufferSize: tc.buffer}
			c, _, err := d.Dial(e.ws, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			if err := c.WriteMessage(websocket.TextMessage, raw(t, request(t, "message/send", sendPayload))); err != nil {
				t.Fatal(err)
			}
			sent := make(chan error, 1)
			go func() {
				// Sent while the answers are read: the server does
				// not read the rest until it has answered the request
				// before.
				sent <- c.WriteMessage(websocket.TextMessage, []byte(strings.Repeat("x", tc.size)))
			}()
			if v := verify(t, readFrame(t, c)); v.Method != "message/send" || errCode(v.Payload) != 0 {
				t.Fatalf("the request before the oversized message: %s %s", v.Method, v.Payload)
			}
			b := readFrame(t, c)
			v, err := snap.NewValidator(snap.Config{}).Validate(context.Background(), b)
			if err != nil || !v.Signed || v.Type != snap.TypeResponse {
				t.Fatalf("answer to an oversized message: %s (%v), want a signed response", b, err)
			}
			se := snap.ResponseError(v.Payload)
			if se == nil || se.Code != snap.CodeInvalidPayload || se.Data["limit"] != float64(limit) ||
				se.Data["field"] != "message" || se.Data["constraint"] != "maxSize" {
				t.Fatalf("answer to an oversized message: %s, want 1004 with data {field: message, constraint: maxSize, limit: %d}", v.Payload, limit)
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, _, err = c.ReadMessage()
			if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
				t.Fatalf("after the refusal: %v, want close 1009", err)
			}
			if err := <-sent; err != nil {
				t.Errorf("sending the oversized message: %v; want it read to its end", err)
			}
		})
	}
}

// A message over MaxBody whose rest is more than MaxBody is read no
// further than that: the connection closes, and the server read at most
// twice MaxBody of it (and little more: a read buffer's worth, frame
// headers).
func TestWebSocketReadLimitBoundsTheDiscard(t *testing.T) {
	const limit = 16 << 10
	counter := &readCounter{}
	e := start(t, &hooks{socketRead: counter.add}, func(c *snaphttp.Config) { c.MaxBody = limit })
	d := websocket.Dialer{WriteBufferSize: 4 << 10}
	c, _, err := d.Dial(e.ws, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go c.WriteMessage(websocket.TextMessage, []byte(strings.Repeat("x", 1<<20)))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		if _, _, err := c.ReadMessage(); err != nil {
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				t.Fatalf("the connection did not close: %v", err)
			}
			break
		}
	}
	counter.mu.Lock()
	defer counter.mu.Unlock()
	if max := int64(2*limit + 2<<10); counter.n > max {
		t.Errorf("the server read %d bytes of a 1 MiB message; want at most %d", counter.n, max)
	}
}

// The server pings; a client that answers stays connected through many
// pings, one that does not is closed after two intervals.
func TestWebSocketPingPong(t *testing.T) {
	// The interval bounds the round trip of each ping and its pong (two
	// intervals from the last pong): 20 ms closed the answering client
	// about 1 run in 40 under -race on 2 loaded cores.
	e := start(t, nil, func(c *snaphttp.Config) { c.PingInterval = 200 * time.Millisecond; c.IdleTimeout = time.Hour })

	good := dial(t, e)
	var pings atomic.Int32
	enough := make(chan struct{})
	good.SetPingHandler(func(data string) error {
		if pings.Add(1) == 5 {
			close(enough)
		}
		return good.WriteControl(websocket.PongMessage, []byte(data), time.Now().Add(time.Second))
	})
	readErr := make(chan error, 1)
	frames := make(chan []byte, 1)
	go func() {
		for {
			_, b, err := good.ReadMessage()
			if err != nil {
				readErr <- err
				return
			}
			frames <- b
		}
	}()
	select {
	case <-enough:
	case err := <-readErr:
		t.Fatalf("a client that pongs was closed: %v", err)
	}
	good.WriteMessage(websocket.TextMessage, raw(t, request(t, "message/send", sendPayload)))
	select {
	case b := <-frames:
		verify(t, b)
	case err := <-readErr:
		t.Fatalf("after 5 pings: %v", err)
	}

	mute := dial(t, e)
	mute.SetPingHandler(func(string) error { return nil }) // never pongs
	mute.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err := mute.ReadMessage()
	var ne interface{ Timeout() bool }
	if err == nil || (errors.As(err, &ne) && ne.Timeout()) {
		t.Errorf("a client that never pongs: %v, want the server to close it", err)
	}
}

// A connection with no request for IdleTimeout is closed normally.
func TestWebSocketIdleTimeout(t *testing.T) {
	// The time-out runs from the upgrade until the request comes: 50 ms
	// was too short under -race on 2 loaded cores (closed idle before
	// the request was read); the request is signed before the upgrade
	// for the same reason.
	e := start(t, nil, func(c *snaphttp.Config) { c.IdleTimeout = 300 * time.Millisecond })
	req := raw(t, request(t, "message/send", sendPayload))
	c := dial(t, e)
	c.WriteMessage(websocket.TextMessage, req)
	verify(t, readFrame(t, c))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err := c.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseNormalClosure || ce.Text != "idle" {
		t.Errorf("idle connection: %v, want close 1000 idle", err)
	}
}

// Beyond MaxConnsPerPeer an upgrade gets 429 (the count going down is
// tested in TestConnCounter).
func TestWebSocketPerPeerCap(t *testing.T) {
	e := start(t, nil, func(c *snaphttp.Config) { c.MaxConnsPerPeer = 2 })
	a, b := dial(t, e), dial(t, e)
	_, resp, err := websocket.DefaultDialer.Dial(e.ws, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("third connection: %v %v", err, resp)
	}
	_, err = e.client.SendWS(context.Background(), e.ws, request(t, "message/send", sendPayload))
	var se *client.StatusError
	if !errors.As(err, &se) || se.StatusCode != 429 {
		t.Errorf("client over the cap: %v", err)
	}
	// The two admitted connections still work.
	for _, c := range []*websocket.Conn{a, b} {
		c.WriteMessage(websocket.TextMessage, raw(t, request(t, "message/send", sendPayload)))
		verify(t, readFrame(t, c))
	}
}

// An upgrade over a WebSocket cap is refused as every other cap is: with
// Retry-After and the SNAP error shape, 5002 over the peer's cap and 5003
// over the node's, so that a client learns the code and when to retry.
func TestWebSocketCapRefusalsAreSNAPErrors(t *testing.T) {
	for _, c := range []struct {
		name   string
		mutate func(*snaphttp.Config)
		status int
		code   snap.Code
	}{
		{"peer", func(c *snaphttp.Config) { c.MaxConnsPerPeer = 1 }, http.StatusTooManyRequests, snap.CodeRateLimitExceeded},
		{"node", func(c *snaphttp.Config) { c.MaxConns = 1 }, http.StatusServiceUnavailable, snap.CodeServiceUnavailable},
	} {
		t.Run(c.name, func(t *testing.T) {
			e := start(t, nil, c.mutate)
			defer dial(t, e).Close()
			_, err := e.client.SendWS(context.Background(), e.ws, request(t, "message/send", sendPayload))
			var se *client.StatusError
			if !errors.As(err, &se) || se.StatusCode != c.status {
				t.Fatalf("second connection: %v, want HTTP %d", err, c.status)
			}
			if se.RetryAfter <= 0 || se.Err == nil || se.Err.Code != c.code {
				t.Fatalf("second connection: %v (Retry-After %v, SNAP error %+v), want Retry-After and code %d", err, se.RetryAfter, se.Err, c.code)
			}
		})
	}
}
