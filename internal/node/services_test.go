package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/servicecall"
	"github.com/snapnode/snapnode/snap"
)

// A node's services over HTTP and Nostr: a caller on service_callers
// reaches a service registered in Go and the built-in status, with or
// without to over HTTP (the reply object itself) and over Nostr (the
// payload of a signed response); a stranger is refused with 403 and
// 2003.
func TestNodeServices(t *testing.T) {
	aliceKey, _ := identity.Generate()
	alice := aliceKey.Address(identity.Mainnet)
	n := startNodeWith(t, func(c *config.Config) {
		c.HTTPListen = "127.0.0.1:0"
		c.ServiceCallers = []string{alice}
	}, node.WithService("echo", func(ctx context.Context, c *servicecall.Call) (any, error) {
		var args struct {
			Say string `json:"say"`
		}
		if err := c.Bind(&args); err != nil {
			return nil, err
		}
		return map[string]any{"said": args.Say, "by": c.From}, nil
	}))
	ctx := context.Background()
	endpoint := n.HTTPURL() + "/snap"
	overHTTP := newHTTPClientWith(t, aliceKey)
	for _, to := range []string{"", n.Address()} {
		reply, err := overHTTP.Call(ctx, endpoint, to, "echo", map[string]string{"say": "hi"})
		if err != nil {
			t.Fatalf("echo over HTTP (to %q): %v", to, err)
		}
		if want := `{"by":"` + alice + `","said":"hi"}`; string(reply) != want {
			t.Errorf("echo over HTTP: %s, want %s", reply, want)
		}
	}
	// A task, so that status has something to count: free text, failed
	// at once (the node has no agent).
	overNostr := newRequesterWith(t, n.RelayURLs(), aliceKey)
	noAgent(t, "message/send", taskOf(t, overNostr.call(t, n, "message/send", text("counted"), false)))

	p := overNostr.call(t, n, servicecall.Method, map[string]any{"name": "status"}, false)
	if p["address"] != n.Address() || p["http"] != endpoint || p["protocolVersion"] != snap.ProtocolVersion {
		t.Errorf("status over Nostr: %v", p)
	}
	if tasks, _ := p["tasks"].(map[string]any); tasks["failed"] != 1.0 || tasks["submitted"] != 0.0 || tasks["completed"] != 0.0 {
		t.Errorf("status tasks: %v", p["tasks"])
	}
	if relays, _ := p["relays"].([]any); len(relays) != 1 || !strings.Contains(string(mustJSON(t, relays[0])), `"state":"connected"`) {
		t.Errorf("status relays: %v", p["relays"])
	}
	if p := overNostr.call(t, n, servicecall.Method, map[string]any{"name": "echo", "arguments": map[string]any{"shout": 1}}, false); errCode(p) != int(snap.CodeInvalidPayload) {
		t.Errorf("a bad argument over Nostr: %v", p)
	}

	strangerKey, _ := identity.Generate()
	_, err := newHTTPClientWith(t, strangerKey).Call(ctx, endpoint, "", "status", nil)
	var se *client.StatusError
	if !errors.As(err, &se) || se.StatusCode != http.StatusForbidden || se.Err == nil || se.Err.Code != snap.CodeIdentityMismatch {
		t.Errorf("a stranger over HTTP: %v", err)
	}
	if p := newRequesterWith(t, n.RelayURLs(), strangerKey).call(t, n, servicecall.Method, map[string]any{"name": "status"}, false); errCode(p) != int(snap.CodeIdentityMismatch) {
		t.Errorf("a stranger over Nostr: %v", p)
	}
}

// A service named twice, or under the built-in's name, stops the node
// from starting, with the name in the error.
func TestNodeServiceMistakes(t *testing.T) {
	h := func(context.Context, *servicecall.Call) (any, error) { return map[string]any{}, nil }
	for _, tc := range []struct {
		opts []node.Option
		want string
	}{
		{[]node.Option{node.WithService("status", h)}, `"status" offered twice`},
		{[]node.Option{node.WithService("x", h), node.WithService("x", h)}, `"x" offered twice`},
		{[]node.Option{node.WithService("Bad Name", h)}, "Bad Name"},
	} {
		cfg := config.Default()
		cfg.DataDir = filepath.Join(t.TempDir(), "data")
		cfg.RelayListen, cfg.HTTPListen = "127.0.0.1:0", ""
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		n, err := node.Start(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), tc.opts...)
		if err == nil {
			cancel()
			n.Wait()
			t.Errorf("started with %s", tc.want)
			continue
		}
		cancel()
		if !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want %q", err, tc.want)
		}
	}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A service/call's id is spent before its service runs (the service may
// act outside the node's database), so a service that fails is answered
// 2006 — the id spent, the call may have acted, a new request needs a
// new id — never 5001 or 5003 asking for the same message again, which
// would be refused 2006: over Nostr, HTTP (500, the node's failure) and
// WebSocket alike, the same message sent again gets 2006, and the
// service ran once. A service is bounded by service_timeout, or the
// bound it declares (WithServiceTimeout), not by request_timeout: it may
// take long; one still running when its bound passes is answered 2006
// naming it.
func TestNodeServiceFailureSpendsItsID(t *testing.T) {
	kinds := []struct {
		name  string
		dial  func(*testing.T, *node.Node, *identity.Key) transport
		alice *identity.Key
	}{{"nostr", dialNostr, newKey(t)}, {"http", dialHTTP, newKey(t)}, {"ws", dialWS, newKey(t)}}
	var calls atomic.Int64
	n := startNodeWith(t, func(c *config.Config) {
		c.HTTPListen = "127.0.0.1:0"
		c.HTTPRate = 0
		for _, k := range kinds {
			c.ServiceCallers = append(c.ServiceCallers, k.alice.Address(identity.Mainnet))
		}
	}, node.WithService("flaky", func(ctx context.Context, c *servicecall.Call) (any, error) {
		calls.Add(1)
		return nil, errors.New("the upstream is down")
	}), node.WithServiceTimeout("stuck", 50*time.Millisecond, func(ctx context.Context, c *servicecall.Call) (any, error) {
		<-ctx.Done()
		return nil, ctx.Err()
	}), node.WithService("deadline", func(ctx context.Context, c *servicecall.Call) (any, error) {
		d, ok := ctx.Deadline()
		return map[string]any{"bounded": ok, "left": time.Until(d).Seconds()}, nil
	}))
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			e := &transportEnv{kind: k.name, n: n, alice: k.alice, tr: k.dial(t, n, k.alice)}
			before := calls.Load()
			raw := signed(t, e.request(t, k.alice, servicecall.Method, map[string]any{"name": "flaky"}), k.alice)
			for i, what := range []string{"the call", "the same message again"} {
				x := e.exchange(t, raw, rawOptions{})
				var p map[string]any
				if k.name == "http" {
					if want := []int{http.StatusInternalServerError, http.StatusUnauthorized}[i]; x.status != want {
						t.Fatalf("%s: HTTP %d %s; want %d", what, x.status, x.body, want)
					}
					if err := json.Unmarshal(x.body, &p); err != nil {
						t.Fatal(err)
					}
				} else {
					_, p = only(t, x)
				}
				if errCode(p) != int(snap.CodeDuplicateMessage) {
					t.Fatalf("%s answered %v; want 2006, the id spent", what, p)
				}
				if msg, _ := p["error"].(map[string]any)["message"].(string); i == 0 && (!strings.Contains(msg, "may have acted") || !strings.Contains(msg, "new id")) {
					t.Fatalf("%s answered %q; want the call may have acted, a new id", what, msg)
				}
			}
			if got := calls.Load() - before; got != 1 {
				t.Fatalf("the service ran %d times; want 1", got)
			}
			x := e.exchange(t, signed(t, e.request(t, k.alice, servicecall.Method, map[string]any{"name": "stuck"}), k.alice), rawOptions{})
			var p map[string]any
			if k.name == "http" {
				if x.status != http.StatusInternalServerError || json.Unmarshal(x.body, &p) != nil {
					t.Fatalf("a call past its service's time-out: HTTP %d %s; want 500", x.status, x.body)
				}
			} else {
				_, p = only(t, x)
			}
			if msg, _ := p["error"].(map[string]any)["message"].(string); errCode(p) != int(snap.CodeDuplicateMessage) || !strings.Contains(msg, "time-out (50ms)") {
				t.Fatalf("a call past its service's time-out answered %v; want 2006 naming the time-out", p)
			}
			reply, code := e.serviceCall(t, e.tr, "deadline", nil)
			if left, _ := reply["left"].(float64); code != 0 || reply["bounded"] != true ||
				left <= config.DefaultRequestTimeout.Seconds() || left > config.DefaultServiceTimeout.Seconds() {
				t.Fatalf("a service's deadline: %v (error %d); want service_timeout's, past request_timeout's", reply, code)
			}
		})
	}
}
