package node_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/relay"
)

// Each transport bounds its own answers: a 200 KiB READ_FILE result
// comes back whole over HTTP and WebSocket (http_max_response, 4 MiB by
// default), while over Nostr, whose NIP-44 carries 65,535 bytes, the
// requester gets 5001 naming the limit, the transport and the task, and
// reads the result with tasks/get over HTTP.
func TestLargeResultPerTransport(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	n, _ := startNode(t, func(c *config.Config) {
		c.DataDir = dataDir
		c.HTTPListen = "127.0.0.1:0"
		c.HTTPRate = 0
	})
	content := strings.Repeat("0123456789abcdef", 200<<10/16) // 200 KiB
	if err := os.MkdirAll(filepath.Join(dataDir, "sandbox"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "sandbox", "big.txt"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	read := proposal("READ_FILE", map[string]any{"path": "/sandbox/big.txt"})
	hasContent := func(t *testing.T, v taskView) {
		t.Helper()
		for _, a := range v.Artifacts {
			for _, p := range a.Parts {
				if strings.Contains(string(p.Data), content) {
					return
				}
			}
		}
		t.Fatalf("task %s (%s: %q) has no artifact with the file's %d bytes", v.ID, v.Status.State, v.Status.Message, len(content))
	}
	alice := newKey(t)
	for _, k := range []struct {
		name string
		dial func(*testing.T, *node.Node, *identity.Key) transport
	}{{"http", dialHTTP}, {"ws", dialWS}} {
		t.Run(k.name, func(t *testing.T) {
			e := &transportEnv{kind: k.name, n: n, alice: alice, tr: k.dial(t, n, alice)}
			p := e.call(t, "message/send", read)
			if p["error"] != nil {
				t.Fatalf("a 200 KiB result over %s: %.300v", k.name, p["error"])
			}
			hasContent(t, taskOf(t, p))
		})
	}
	t.Run("nostr", func(t *testing.T) {
		e := &transportEnv{kind: "nostr", n: n, alice: alice, tr: dialNostr(t, n, alice)}
		p := e.call(t, "message/send", read)
		errObj, _ := p["error"].(map[string]any)
		data, _ := errObj["data"].(map[string]any)
		if errObj["code"] != float64(5001) || data["limit"] != float64(relay.MaxNIP44Plain) || data["transport"] != "nostr" {
			t.Fatalf("a 200 KiB result over Nostr answered %.300v, want 5001 naming the limit %d and the transport", p, relay.MaxNIP44Plain)
		}
		id, _ := data["taskId"].(string)
		if id == "" {
			t.Fatalf("the error names no task: %v", data)
		}
		h := &transportEnv{kind: "http", n: n, alice: alice, tr: dialHTTP(t, n, alice)}
		hasContent(t, taskOf(t, h.call(t, "tasks/get", map[string]any{"taskId": id})))
	})
}
