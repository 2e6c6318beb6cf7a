package main

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/relay/embedded"
)

// TestPersistWhileOffline: `send --persist` to an agent that is offline
// times out (exit 3) but says how to find the task later: the request
// waits on the relay, and the same request sent again with the key it
// printed, once the agent is back, answers with the task the stored one
// made — one task, not two.
func TestPersistWhileOffline(t *testing.T) {
	noEnvKey(t)
	dir := t.TempDir()
	key := keyFile(t, dir, testSecret)
	rel, err := embedded.New(embedded.Config{DBPath: filepath.Join(dir, "relay.db"), Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rctx, rcancel := context.WithCancel(context.Background())
	go rel.Serve(rctx, ln)
	t.Cleanup(func() { rcancel(); rel.Close() })
	url := "ws://" + ln.Addr().String()

	cfg := config.Default()
	cfg.DataDir, cfg.Relays, cfg.RelayListen, cfg.HTTPListen = filepath.Join(dir, "node"), []string{url}, "", ""
	start := func() (*node.Node, func()) {
		ctx, cancel := context.WithCancel(context.Background())
		n, err := node.Start(ctx, cfg, slog.New(slog.DiscardHandler))
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		return n, func() { cancel(); n.Wait() }
	}
	n, stop := start()
	addr := n.Address()
	stop() // offline; its card stays on the relay

	r := runCLI(t, "", "send", "--key", key, "--to", addr, "--relay", url, "--persist", "--timeout", "2s", "hello while you sleep")
	if r.code != exitTimeout {
		t.Fatalf("send to an offline agent: %s", r)
	}
	_, after, ok := strings.Cut(r.stderr, "--idempotency-key ")
	if !ok || !strings.Contains(r.stderr, "stored on the relays") {
		t.Fatalf("no way to find the task later: %s", r)
	}
	idem := strings.Fields(after)[0]

	_, stop = start()
	t.Cleanup(stop)
	r = runCLI(t, "", "send", "--key", key, "--to", addr, "--relay", url, "--idempotency-key", idem, "--timeout", "20s", "hello while you sleep")
	if r.code != exitOK {
		t.Fatalf("the same request again: %s", r)
	}
	var resp struct {
		Payload struct {
			Task struct {
				ID      string `json:"id"`
				History []struct {
					MessageID string `json:"messageId"`
				} `json:"history"`
			} `json:"task"`
		} `json:"payload"`
	}
	if err := json.Unmarshal([]byte(r.stdout), &resp); err != nil || resp.Payload.Task.ID == "" {
		t.Fatalf("no task in %s: %v", r.stdout, err)
	}
	if h := resp.Payload.Task.History; len(h) != 1 {
		t.Fatalf("the task holds %d messages: the repeat made a second one, or the stored one was lost", len(h))
	}
	list := runCLI(t, "", "task", "list", "--data-dir", cfg.DataDir)
	if strings.Count(list.stdout, "\n") != 1 || !strings.Contains(list.stdout, resp.Payload.Task.ID) {
		t.Fatalf("the node holds other tasks than %s:\n%s", resp.Payload.Task.ID, list.stdout)
	}
}
