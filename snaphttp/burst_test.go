package snaphttp_test

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/snap"
)

// A stream whose handler emits a burst of events at once, as a
// tasks/resubscribe emits a task's stored events (up to a hundred
// artifacts and the status changes), reaches a peer that reads steadily
// whole: every event, then the final response. The burst is longer than
// StreamBuffer and than the sockets hold, so the handler's emit must wait
// for the peer (as net/http's Write does) rather than take an honest
// peer, on a link slower than the handler's loop, for a stalled one.
func TestBurstReachesSteadyReader(t *testing.T) {
	const burst = 300
	h := &hooks{stream: func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
		pad := strings.Repeat("x", 1000)
		for i := 1; i <= burst; i++ {
			if err := emit(map[string]any{"taskId": "t-b", "progress": float64(i), "message": pad}); err != nil {
				return nil, err
			}
		}
		return map[string]any{"task": map[string]any{"id": "t-b", "status": map[string]any{"state": "completed", "timestamp": "2026-01-01T00:00:00Z"}}}, nil
	}}
	for _, tr := range []string{"SSE", "WebSocket"} {
		t.Run(tr, func(t *testing.T) {
			// The server's sockets buffer little, so that the writer
			// keeps up with the handler only as fast as the peer reads;
			// the peer's are as usual (a small receive window slows
			// loopback to a crawl: a delayed ACK per few frames).
			e := start(t, h, nil, func(l net.Listener) net.Listener { return smallBuffers{l} })
			c := e.client
			got := 0
			onEvent := func(ev *snap.Message) error {
				var p struct {
					Progress float64 `json:"progress"`
				}
				if err := json.Unmarshal(ev.Payload, &p); err != nil {
					return err
				}
				got++
				if p.Progress != float64(got) {
					t.Errorf("event %d has progress %v", got, p.Progress)
				}
				return nil
			}
			var (
				m   *snap.Message
				err error
			)
			if tr == "SSE" {
				m, err = c.Stream(context.Background(), e.base+"/snap", request(t, "message/stream", `{}`), onEvent)
			} else {
				m, err = c.StreamWS(context.Background(), e.ws, request(t, "message/stream", `{}`), onEvent)
			}
			if err != nil || m == nil || m.Type != snap.TypeResponse {
				t.Fatalf("after %d of %d events: final response %v, %v", got, burst, m, err)
			}
			if got != burst {
				t.Errorf("%d events, want %d", got, burst)
			}
		})
	}
}
