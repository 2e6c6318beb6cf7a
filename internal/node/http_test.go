package node_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/snap"
)

// httpCall sends one request with send (an HTTP or WebSocket call of the
// client) and returns the verified response's payload.
func httpCall(t *testing.T, send func(context.Context, string, *snap.Message) (*snap.Message, error), url string, n *node.Node, method string, payload any) map[string]any {
	t.Helper()
	body, _ := json.Marshal(payload)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	resp, err := send(ctx, url, &snap.Message{To: n.Address(), Method: method, Payload: body})
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	if resp.Type != snap.TypeResponse || resp.Method != method {
		t.Fatalf("%s answered by a %s of %s", method, resp.Type, resp.Method)
	}
	var p map[string]any
	if err := json.Unmarshal(resp.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// httpStream sends a streaming request and collects its events.
func httpStream(t *testing.T, stream func(context.Context, string, *snap.Message, func(*snap.Message) error) (*snap.Message, error),
	url string, n *node.Node, method string, payload any) streamed {
	t.Helper()
	body, _ := json.Marshal(payload)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var s streamed
	final, err := stream(ctx, url, &snap.Message{To: n.Address(), Method: method, Payload: body}, func(ev *snap.Message) error {
		var e streamEvent
		if ev.Method != method {
			t.Errorf("event of %s in a %s stream", ev.Method, method)
		}
		if err := json.Unmarshal(ev.Payload, &e); err != nil {
			return err
		}
		s.events = append(s.events, e)
		return nil
	})
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	if err := json.Unmarshal(final.Payload, &s.final); err != nil {
		t.Fatal(err)
	}
	return s
}

// A real node over HTTP and WebSocket: its well-known card verifies and is
// the card it publishes; message/send over HTTP and tasks/get over
// WebSocket reach the same task (free text, failed at once: the node has
// no agent); errors come back as responses; a
// proposal streamed over SSE and over WebSocket gives its events in
// version order then the completed task; another identity cannot read the
// task.
func TestHTTPTransport(t *testing.T) {
	n, _ := startNode(t, func(c *config.Config) { c.HTTPListen = "127.0.0.1:0" })
	base := n.HTTPURL()
	if !strings.HasPrefix(base, "http://127.0.0.1:") {
		t.Fatalf("HTTPURL %q", base)
	}
	endpoint, ws := base+"/snap", "ws"+strings.TrimPrefix(base, "http")+"/snap"
	alice := newHTTPClient(t)
	ctx := context.Background()

	card, signed, err := alice.Discover(ctx, base)
	if err != nil {
		t.Fatalf("well-known card: %v", err)
	}
	q := n.Card()
	if card.Identity != n.Address() || card.Name != q.Name || signed.Timestamp == 0 {
		t.Errorf("card %+v, want the node's %+v", card, q)
	}

	sent := httpCall(t, alice.Send, endpoint, n, "message/send", text("over-http"))
	task := taskOf(t, sent)
	noAgent(t, "message/send over HTTP", task) // free text, and no agent on this node
	got := httpCall(t, alice.SendWS, ws, n, "tasks/get", map[string]any{"taskId": task.ID})
	if v := taskOf(t, got); v.ID != task.ID {
		t.Errorf("tasks/get over WebSocket: %v", got)
	} else {
		noAgent(t, "tasks/get over WebSocket", v)
	}
	if p := httpCall(t, alice.SendWS, ws, n, "tasks/get", map[string]any{"taskId": "no-such-task"}); errCode(p) != int(snap.CodeTaskNotFound) {
		t.Errorf("unknown task over WebSocket: %v", p)
	}
	bob := newHTTPClient(t)
	if p := httpCall(t, bob.Send, endpoint, n, "tasks/get", map[string]any{"taskId": task.ID}); errCode(p) != int(snap.CodeTaskNotFound) {
		t.Errorf("another identity read the task: %v", p)
	}

	streams := map[string]struct {
		fn  func(context.Context, string, *snap.Message, func(*snap.Message) error) (*snap.Message, error)
		url string
	}{"SSE": {alice.Stream, endpoint}, "WebSocket": {alice.StreamWS, ws}}
	for name, st := range streams {
		s := httpStream(t, st.fn, st.url, n, "message/stream",
			proposal("WRITE_FILE", map[string]any{"path": "/sandbox/" + name + ".txt", "content": "streamed over " + name + "\n"}))
		if got := s.summary(); got != "1:submitted 2:working 3:result 4:diff 5:completed" {
			t.Errorf("%s events: %s", name, got)
		}
		s.versions(t)
		if ft := taskOf(t, s.final); ft.Status.State != "completed" || len(ft.Artifacts) != 2 || ft.ID != s.events[0].TaskID {
			t.Errorf("%s final task %+v", name, ft)
		}
	}
}

func newHTTPClient(t *testing.T) *client.HTTP {
	t.Helper()
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return newHTTPClientWith(t, k)
}

// newHTTPClientWith is newHTTPClient with the identity k.
func newHTTPClientWith(t *testing.T, k *identity.Key) *client.HTTP {
	return client.NewHTTP(client.HTTPConfig{Key: k})
}

// HTTP is off with an empty address; an address set on purpose that is
// taken stops the node from starting.
func TestHTTPListenSettings(t *testing.T) {
	off, _ := startNode(t, func(c *config.Config) { c.HTTPListen = "" })
	if off.HTTPURL() != "" {
		t.Errorf("HTTP off, yet HTTPURL %q", off.HTTPURL())
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.RelayListen = "127.0.0.1:0"
	cfg.HTTPListen = taken.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if n, err := node.Start(ctx, cfg, slog.New(slog.DiscardHandler)); err == nil {
		cancel()
		n.Wait()
		t.Fatal("the node started on a taken HTTP address")
	} else if !strings.Contains(err.Error(), "http") {
		t.Errorf("error %v, want one naming http", err)
	}
}
