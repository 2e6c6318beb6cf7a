package snaphttp_test

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// When Serve's context ends, streams end with their final response, a
// request in flight finishes and is answered, an idle WebSocket is closed
// with 1001, new connections are refused, and Serve returns nil.
func TestGracefulShutdown(t *testing.T) {
	sendEntered, release := make(chan struct{}), make(chan struct{})
	streamEntered := make(chan struct{})
	h := &hooks{
		send: func(ctx context.Context) {
			close(sendEntered)
			<-release
		},
		stream: func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
			if err := emit(map[string]any{"taskId": "t-sd", "progress": 0.5, "message": "half"}); err != nil {
				return nil, err
			}
			close(streamEntered)
			<-ctx.Done() // shutdown began: the stream ends
			close(release)
			return map[string]any{"task": map[string]any{"id": "t-sd", "status": map[string]any{"state": "working", "timestamp": "2026-01-01T00:00:00Z"}}}, nil
		},
	}
	e := start(t, h, nil)
	idle := dial(t, e)

	type result struct {
		m   *snap.Message
		err error
	}
	sent, streamed := make(chan result, 1), make(chan result, 1)
	events := 0
	go func() {
		m, err := e.client.Send(context.Background(), e.base+"/snap", request(t, "message/send", sendPayload))
		sent <- result{m, err}
	}()
	go func() {
		m, err := e.client.Stream(context.Background(), e.base+"/snap", request(t, "message/stream", `{}`), func(*snap.Message) error {
			events++
			return nil
		})
		streamed <- result{m, err}
	}()
	<-sendEntered
	<-streamEntered

	if err := e.stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if r := <-sent; r.err != nil || errCode(r.m.Payload) != 0 {
		t.Errorf("request in flight: %v %v", r.m, r.err)
	}
	if r := <-streamed; r.err != nil || events != 1 || !strings.Contains(string(r.m.Payload), "t-sd") {
		t.Errorf("stream: %d events, %v %v", events, r.m, r.err)
	}
	idle.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, _, err := idle.ReadMessage()
	if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Errorf("idle WebSocket at shutdown: %v, want 1001", err)
	}
	if c, err := net.Dial("tcp", strings.TrimPrefix(e.base, "http://")); err == nil {
		c.Close()
		t.Error("a connection was accepted after Serve returned")
	}
}

// A request that outlasts ShutdownTimeout is cancelled and its connection
// closed; Serve still returns.
func TestForcedShutdown(t *testing.T) {
	entered, cancelled := make(chan struct{}), make(chan struct{})
	h := &hooks{send: func(ctx context.Context) {
		close(entered)
		<-ctx.Done()
		close(cancelled)
	}}
	e := start(t, h, func(c *snaphttp.Config) { c.ShutdownTimeout = 50 * time.Millisecond })
	errc := make(chan error, 1)
	go func() {
		_, err := e.client.SendWS(context.Background(), e.ws, request(t, "message/send", sendPayload))
		errc <- err
	}()
	<-entered
	if err := e.stop(); err != nil {
		t.Fatalf("Serve: %v", err)
	}
	<-cancelled
	if err := <-errc; err == nil {
		t.Error("a request cut by the forced shutdown got an answer")
	}
}

// Serve serves once.
func TestServeTwice(t *testing.T) {
	e := start(t, nil, nil)
	health(t, e) // the first Serve runs
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	if err := e.srv.Serve(context.Background(), ln); !errors.Is(err, snaphttp.ErrServing) {
		t.Errorf("second Serve: %v", err)
	}
}
