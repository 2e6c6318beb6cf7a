package node_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/llmtest"
)

// A second node started on the data folder of a running one (by mistake:
// the service runs, and an operator starts `snapnode run` with public
// relays, so no port clashes) stops before it opens anything there, naming
// the folder; the running node's tasks are left alone. Before, it opened
// the task database, took the running node's working task for one a crash
// interrupted and failed it (no agent here), and only then found the
// admin socket taken.
func TestSecondNodeOnOneDataFolderRefused(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "data")
	a := startAgentNode(t, "", func(c *config.Config) { c.DataDir = dataDir })
	slow := llmtest.Text(prop("WRITE_FILE", map[string]any{"path": "/sandbox/late.md", "content": "late"}))
	slow.Delay = time.Minute
	a.llm.Push(slow)
	id := a.send(t, "", "take your time")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := a.llm.WaitCalls(ctx, 1); err != nil {
		t.Fatal(err)
	}

	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = dataDir, "127.0.0.1:0", ""
	startRefused(t, cfg, "on the data folder of a running one", "another node", dataDir)
	p := a.alice.call(t, a.Node, "tasks/get", map[string]any{"taskId": id}, false)
	if got := taskOf(t, p); got.Status.State != "working" {
		t.Fatalf("the running node's task after the second start: %s %q", got.Status.State, got.Status.Message)
	}
}
