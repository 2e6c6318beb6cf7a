package node_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/relay"
)

// The node is killed with SIGKILL while its agent waits for the model's
// second answer, after the first (a write) was carried out. Restarted on
// the same data folder, it takes the job up again once the lease lapses,
// tells the model what was already done, and completes the task once:
// the write ran exactly one time. The lease is a minute, longer than the
// test waits: the restarted node takes its own jobs up at once (its lease
// holder is its host and data folder), it does not wait for them to lapse.
func TestAgentJobSurvivesSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node processes")
	}
	var killed atomic.Bool
	srv := llmtest.New(t)
	srv.SetHandler(func(r llmtest.Request) llmtest.Reply {
		switch {
		case killed.Load():
			return finish("written once")
		case len(r.Messages) <= 2: // the first call: system prompt and task
			return llmtest.Text(prop("WRITE_FILE", map[string]any{"path": "/sandbox/once.md", "content": "once\n"}))
		default: // the second call hangs until the node dies
			return llmtest.Reply{Content: finish("never").Content, Delay: time.Minute}
		}
	})
	dir := t.TempDir()
	dataDir := filepath.Join(dir, "data")
	conf := filepath.Join(dir, "snapnode.toml")
	if err := os.WriteFile(conf, []byte("[agent]\nlease = \"1m\"\nretry_backoff = \"10ms\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--config", conf, "--llm-url", srv.URL(), "--llm-model", llmtest.DefaultModel}
	n := startNodeProcess(t, dataDir, args...)

	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	request := func(n *nodeProcess, method string, payload any) map[string]any {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		p := relay.NewPool(relay.PoolConfig{URLs: []string{n.ws}, Logger: slog.New(slog.DiscardHandler)})
		p.Start(ctx)
		defer p.Close()
		c := client.NewNostr(client.NostrConfig{Key: k, Relays: p, Logger: slog.New(slog.DiscardHandler)})
		body, _ := json.Marshal(payload)
		resp, err := c.Request(ctx, client.Target{Address: n.addr, PubKey: n.pub}, client.NostrRequest{Method: method, Payload: body})
		if err != nil {
			t.Fatalf("%s: %v", method, err)
		}
		var out map[string]any
		json.Unmarshal(resp.Payload, &out)
		return out
	}
	msg := text("x")
	msg["message"].(map[string]any)["messageId"] = uuid.NewString()
	msg["message"].(map[string]any)["parts"] = []any{map[string]any{"text": "write once.md"}}
	id := taskOf(t, request(n, "message/send", msg)).ID

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := srv.WaitCalls(ctx, 2); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dataDir, "sandbox", "once.md")); err != nil || string(b) != "once\n" {
		t.Fatalf("before the kill: once.md = %q, %v", b, err)
	}
	killed.Store(true)
	n.cmd.Process.Signal(syscall.SIGKILL)
	n.cmd.Wait()

	n2 := startNodeProcess(t, dataDir, args...)
	var state string
	for state != "completed" {
		v := taskOf(t, request(n2, "tasks/get", map[string]any{"taskId": id}))
		if state = v.Status.State; state == "failed" || state == "input_required" || state == "canceled" {
			t.Fatalf("after the restart: %s %q", state, v.Status.Message)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the job was not taken up again: %s", state)
		case <-time.After(50 * time.Millisecond):
		}
	}
	last := srv.Requests()[len(srv.Requests())-1]
	if !strings.Contains(requestText(last), `"action":"WRITE_FILE"`) || !strings.Contains(requestText(last), `"outcome":"completed"`) {
		t.Fatalf("after the restart the model was not told of the write: %s", requestText(last))
	}

	// The executor's records: one promoted write for the task, never two.
	db, err := sqldb.Open(context.Background(), "sqlite:"+filepath.Join(dataDir, "tasks.db"), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var writes int
	if err := db.R.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM executor_actions WHERE task = ? AND action = 'WRITE_FILE'`, id).Scan(&writes); err != nil && err != sql.ErrNoRows {
		t.Fatal(err)
	}
	var audited int
	if err := db.R.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM audit_log WHERE task = ? AND step = 'promoted'`, id).Scan(&audited); err != nil {
		t.Fatal(err)
	}
	if writes != 1 || audited != 1 {
		t.Fatalf("%d WRITE_FILE actions recorded and %d promotions audited for the task, want 1 and 1", writes, audited)
	}
	t.Logf("job %s completed after SIGKILL and restart; %d model calls; audit 'promoted' entries: %d", id, srv.Calls(), audited)
}
