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
