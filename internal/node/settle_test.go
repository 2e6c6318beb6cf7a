package node_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/snap"
)

// An operator's decision and the task's outcome are one commit: a node
// killed the moment the executor returned its approval has already
// recorded the task completed, with its diff and its events. No restart
// is needed to settle it; there is no window in which the action ran and
// the task still waits.
func TestDecisionCommittedWithTask(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node processes")
	}
	dataDir := filepath.Join(t.TempDir(), "data")
	if err := os.MkdirAll(filepath.Join(dataDir, "sandbox"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dataDir, "sandbox", "gone.md"), []byte("bye\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	node := startChildNode(t, dataDir, "decided")
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	body, _ := json.Marshal(proposal("DELETE_FILE", map[string]any{"path": "/sandbox/gone.md"}))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := newHTTPClientWith(t, k).Send(ctx, node.url, &snap.Message{To: node.addr, Method: "message/send", Payload: body})
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(resp.Payload, &p); err != nil {
		t.Fatal(err)
	}
	held := taskOf(t, p)
	if held.Status.State != "input_required" {
		t.Fatalf("the delete is %s %q; want it held", held.Status.State, held.Status.Message)
	}
	approved := make(chan error, 1)
	go func() {
		_, err := admin.Call(ctx, admin.Path(dataDir), admin.Request{Op: "approve", Task: held.ID})
		approved <- err
	}()
	node.kill(t, "decided", approved)

	db, err := sqldb.Open(context.Background(), "sqlite:"+filepath.Join(dataDir, "tasks.db"), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var state, action string
	var events int
	if err := db.R.QueryRowContext(ctx, `SELECT state FROM tasks WHERE id = ?`, held.ID).Scan(&state); err != nil {
		t.Fatal(err)
	}
	if err := db.R.QueryRowContext(ctx, `SELECT state FROM executor_actions WHERE task = ?`, held.ID).Scan(&action); err != nil {
		t.Fatal(err)
	}
	if err := db.R.QueryRowContext(ctx, `SELECT COUNT(*) FROM task_events WHERE task_id = ? AND kind = 'status' AND body LIKE '%"completed"%'`, held.ID).Scan(&events); err != nil {
		t.Fatal(err)
	}
	if state != "completed" || action != "promoted" || events != 1 {
		t.Fatalf("killed after the approval's commit: task %s (event recorded: %d), action %s; want completed, 1, promoted", state, events, action)
	}
}
