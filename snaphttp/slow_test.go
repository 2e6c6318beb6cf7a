package snaphttp_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/time/rate"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// smallBuffers makes the server's sockets buffer little, so that a peer
// that stops reading fills them after a few events.
type smallBuffers struct{ net.Listener }

func (l smallBuffers) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(4096)
	}
	return c, err
}

func dialSmall(ctx context.Context, network, address string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, address)
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetReadBuffer(4096)
	}
	return c, err
}

// hub feeds the same events to every stream that joined it, as a task's
// event broker does: publish never waits, each subscriber has its own
// queue, and each stream's handler goroutine takes its events from it and
// calls its emit, which may wait for its peer (up to WriteTimeout).
type hub struct {
	joined chan *subscriber
	done   chan struct{}
}

// subscriber is one stream joined to the hub: events queued for it, and
// the error its emit ended with (nil when the hub ended it).
type subscriber struct {
	events chan any
	ended  chan error
}

func newHub() *hub { return &hub{joined: make(chan *subscriber, 2), done: make(chan struct{})} }

func (h *hub) hooks() *hooks {
	return &hooks{stream: func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
		// Room for every event the test publishes: here it is the
		// transport, not the hub, that cuts a stalled peer off.
		sub := &subscriber{events: make(chan any, 100_000), ended: make(chan error, 1)}
		h.joined <- sub
		final := map[string]any{"task": map[string]any{"id": "t-hub", "status": map[string]any{"state": "completed", "timestamp": "2026-01-01T00:00:00Z"}}}
		for {
			select {
			case ev := <-sub.events:
				if err := emit(ev); err != nil {
					sub.ended <- err
					return nil, err
				}
			case <-h.done:
				sub.ended <- nil
				return final, nil
			case <-ctx.Done():
				sub.ended <- ctx.Err()
				return final, nil
			}
		}
	}}
}

// publish queues ev for every subscriber without waiting.
func (h *hub) publish(ev any, subs ...*subscriber) {
	for _, s := range subs {
		select {
		case s.events <- ev:
		default:
			panic("hub: a subscriber's queue is full")
		}
	}
}

// stalledPeer is a subscriber that sends its request and never reads.
type stalledPeer func(t *testing.T, e *env, req []byte) net.Conn

// A peer that stops reading does not hold up the others: the publisher
// feeds a fast subscriber and a stalled one, each stream from its own
// goroutine, at the fast one's pace. The stalled one's emit waits for
// room in its bounded queue, then fails with ErrSlowReader once its peer
// took nothing for WriteTimeout, and the server closes its connection;
// meanwhile the fast one gets every event in order, each before the next
// is published, then its final response.
func TestStalledReaderDoesNotDelayOthers(t *testing.T) {
	stallSSE := func(t *testing.T, e *env, req []byte) net.Conn {
		c, err := dialSmall(context.Background(), "tcp", strings.TrimPrefix(e.base, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "POST /snap HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(req), req)
		return c
	}
	stallWS := func(t *testing.T, e *env, req []byte) net.Conn {
		d := websocket.Dialer{NetDialContext: dialSmall}
		c, _, err := d.Dial(e.ws, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.WriteMessage(websocket.TextMessage, req)
		return c.NetConn()
	}
	type fastStream func(c *client.HTTP, e *env, req *snap.Message, fn func(*snap.Message) error) (*snap.Message, error)
	cases := []struct {
		name  string
		stall stalledPeer
		fast  fastStream
	}{
		{"SSE", stallSSE, func(c *client.HTTP, e *env, req *snap.Message, fn func(*snap.Message) error) (*snap.Message, error) {
			return c.Stream(context.Background(), e.base+"/snap", req, fn)
		}},
		{"WebSocket", stallWS, func(c *client.HTTP, e *env, req *snap.Message, fn func(*snap.Message) error) (*snap.Message, error) {
			return c.StreamWS(context.Background(), e.ws, req, fn)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := newHub()
			e := start(t, h.hooks(), func(c *snaphttp.Config) {
				c.StreamBuffer, c.WriteTimeout = 4, 500*time.Millisecond
			}, func(l net.Listener) net.Listener { return smallBuffers{l} })

			// The fast subscriber acknowledges each event it gets.
			acks := make(chan float64)
			type result struct {
				m   *snap.Message
				err error
			}
			fastDone := make(chan result, 1)
			go func() {
				m, err := tc.fast(e.client, e, request(t, "message/stream", `{}`), func(ev *snap.Message) error {
					var p struct {
						Progress float64 `json:"progress"`
					}
					if err := json.Unmarshal(ev.Payload, &p); err != nil {
						return err
					}
					acks <- p.Progress
					return nil
				})
				fastDone <- result{m, err}
			}()
			fast := <-h.joined
			slow := tc.stall(t, e, raw(t, request(t, "message/stream", `{}`)))
			defer slow.Close()
			stalled := <-h.joined

			pad := strings.Repeat("x", 1000)
			var slowErr error
			slowEnded := false
			published, afterFailure := 0, 0
			for i := 1; i <= 100_000 && afterFailure < 20; i++ {
				ev := map[string]any{"taskId": "t-hub", "progress": float64(i), "message": pad}
				if slowEnded {
					h.publish(ev, fast)
					afterFailure++
				} else {
					h.publish(ev, fast, stalled)
				}
				published = i
				// A generous bound, not a measure: the fast peer's event
				// must not wait for the stalled peer's WriteTimeout.
				select {
				case got := <-acks:
					if got != float64(i) {
						t.Fatalf("fast subscriber got event %v, want %d", got, i)
					}
				case r := <-fastDone:
					t.Fatalf("fast stream ended early: %v", r.err)
				case err := <-fast.ended:
					t.Fatalf("event %d to the fast subscriber: %v", i, err)
				case <-time.After(10 * time.Second):
					t.Fatalf("event %d never reached the fast subscriber", i)
				}
				if !slowEnded {
					select {
					case slowErr = <-stalled.ended:
						slowEnded = true
					default:
					}
				}
			}
			close(h.done)
			if !slowEnded {
				t.Fatalf("the stalled subscriber's stream still runs after %d events", published)
			}
			if !errors.Is(slowErr, snaphttp.ErrSlowReader) {
				t.Fatalf("the stalled subscriber's emit: %v, want ErrSlowReader", slowErr)
			}
			r := <-fastDone
			if r.err != nil || r.m.Type != snap.TypeResponse || !strings.Contains(string(r.m.Payload), "t-hub") {
				t.Fatalf("fast subscriber's final response: %v %v", r.m, r.err)
			}
			t.Logf("%d events published; the stalled peer failed after %d", published, published-afterFailure)

			// The server let the stalled connection go: reading it now
			// ends (EOF or reset) instead of waiting.
			slow.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err := io.Copy(io.Discard, slow)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Errorf("the stalled connection is still open")
			}
		})
	}
}

// A peer that pipelines requests on one connection and never reads the
// answers cannot hold the connection for ever: an answer that is not a
// SNAP exchange (a body that is not JSON, a rate-limit refusal, a GET of
// /snap without the upgrade) is written within WriteTimeout too, after
// which the server closes the connection and uncounts it.
func TestNeverReadErrorsAreTimedOut(t *testing.T) {
	for _, tc := range []struct {
		name, request string
		mutate        func(*snaphttp.Config)
	}{
		{"body not JSON", "POST /snap HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n", nil},
		{"rate limited", "POST /snap HTTP/1.1\r\nHost: localhost\r\nContent-Length: 0\r\n\r\n",
			func(c *snaphttp.Config) { c.Rate, c.Burst = 0.001, 1 }},
		{"GET without upgrade", "GET /snap HTTP/1.1\r\nHost: localhost\r\n\r\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := start(t, nil, func(c *snaphttp.Config) {
				c.WriteTimeout, c.Rate, c.MonitorRate = 100*time.Millisecond, rate.Inf, rate.Inf
				if tc.mutate != nil {
					tc.mutate(c)
				}
			}, func(l net.Listener) net.Listener { return smallBuffers{l} })
			c, err := dialSmall(context.Background(), "tcp", strings.TrimPrefix(e.base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// Far more answers than the sockets buffer; the writes stop
			// once the server stops reading.
			go func() {
				for range 20_000 {
					if _, err := io.WriteString(c, tc.request); err != nil {
						return
					}
				}
			}()
			monitor := clientFrom("127.0.0.2") // apart from the stalled peer's rate
			for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				h := healthFrom(t, monitor, e)
				if h.Connections == 1 { // the monitor's own
					break
				}
				if time.Now().After(end) {
					t.Fatalf("the server still holds the stalled connection: %+v", h)
				}
			}
		})
	}
}

// A stalled peer holds a bounded number of bytes of queued events, not
// StreamBuffer events of up to MaxResponse each: a stream's events of
// 128 KiB, to a peer that reads nothing, are taken until about 1 MiB
// waits for it (the default StreamBufferBytes), then emit waits and fails
// with ErrSlowReader. Before, 64 of them (8 MiB) were queued, and each
// stream of events of up to MaxResponse could hold 256 MiB. WriteTimeout
// is long enough for the 64 to be signed, so that the queue, not the
// writer's deadline, stops the handler.
func TestStalledReaderHoldsBoundedBytes(t *testing.T) {
	const size = 128 << 10
	pad := strings.Repeat("x", size)
	for _, tc := range []struct {
		name  string
		stall stalledPeer
	}{
		{"SSE", func(t *testing.T, e *env, req []byte) net.Conn {
			c, err := dialSmall(context.Background(), "tcp", strings.TrimPrefix(e.base, "http://"))
			if err != nil {
				t.Fatal(err)
			}
			fmt.Fprintf(c, "POST /snap HTTP/1.1\r\nHost: localhost\r\nAccept: text/event-stream\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", len(req), req)
			return c
		}},
		{"WebSocket", func(t *testing.T, e *env, req []byte) net.Conn {
			d := websocket.Dialer{NetDialContext: dialSmall}
			c, _, err := d.Dial(e.ws, nil)
			if err != nil {
				t.Fatal(err)
			}
			c.WriteMessage(websocket.TextMessage, req)
			return c.NetConn()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			type result struct {
				taken int
				err   error
			}
			ended := make(chan result, 1)
			e := start(t, &hooks{stream: func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
				for i := 1; ; i++ {
					if err := emit(map[string]any{"taskId": "t-big", "progress": float64(i), "message": pad}); err != nil {
						ended <- result{i - 1, err}
						return nil, err
					}
				}
			}}, func(c *snaphttp.Config) {
				c.WriteTimeout = 5 * time.Second
			}, func(l net.Listener) net.Listener { return smallBuffers{l} })
			slow := tc.stall(t, e, raw(t, request(t, "message/stream", `{}`)))
			defer slow.Close()
			r := <-ended
			if !errors.Is(r.err, snaphttp.ErrSlowReader) {
				t.Fatalf("emit: %v, want ErrSlowReader", r.err)
			}
			// The queue's bytes, and the frame being written.
			if held := r.taken * size; held > snaphttp.DefaultStreamBufferBytes+size {
				t.Errorf("%d events of %d bytes (%d MiB) taken for a peer that reads nothing, want at most %d bytes and one frame",
					r.taken, size, held>>20, snaphttp.DefaultStreamBufferBytes)
			}
			t.Logf("%d events of %d KiB taken", r.taken, size>>10)
		})
	}
}
