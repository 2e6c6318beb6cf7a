package node_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/testdb"
)

// A follow-up message that ends the task holding an action (its own
// proposal fails, or completes) withdraws the held action at once: no
// list offers a decision the node would refuse. Before, the action
// stayed listed by held (and the console, with its Approve button) until
// the next reconcile pass, a minute later, withdrew it.
func TestFollowUpEndingTaskWithdrawsHeld(t *testing.T) {
	for _, c := range []struct {
		name, action, want string
		args               map[string]any
	}{
		{"failed", "READ_FILE", "failed", map[string]any{"path": "/sandbox/none.txt"}},
		{"completed", "WRITE_FILE", "completed", map[string]any{"path": "/sandbox/b.txt", "content": "b\n"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newHeldRig(t, testdb.SQLite(t))
			follow := proposal(c.action, c.args)
			follow["taskId"] = r.held.ID
			if got := taskOf(t, postSNAP(t, r.n, r.send(t, r.proposer, follow))); got.Status.State != c.want {
				t.Fatalf("the follow-up left the task %s %q, want %s", got.Status.State, got.Status.Message, c.want)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			res, err := admin.Call(ctx, admin.Path(r.dataDir), admin.Request{Op: "held"})
			if err != nil {
				t.Fatal(err)
			}
			var page struct {
				Actions []json.RawMessage `json:"actions"`
				Total   int               `json:"total"`
			}
			if err := json.Unmarshal(res, &page); err != nil || len(page.Actions) != 0 || page.Total != 0 {
				t.Fatalf("held once the task %s: %s (%v); want none", c.want, res, err)
			}
		})
	}
}
