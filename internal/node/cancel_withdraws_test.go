package node_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/snap"
)

// A tasks/cancel of a task holding an action withdraws the action before
// it is answered: held lists none, on SQLite and on PostgreSQL. The task
// service's Ended does it (as for any task this process ends), where a
// wrapper of the tasks/cancel handler did it a second time.
func TestCancelWithdrawsHeld(t *testing.T) {
	for _, db := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"sqlite", testdb.SQLite}, {"postgres", testdb.Postgres}} {
		t.Run(db.name, func(t *testing.T) {
			r := newHeldRig(t, db.dsn(t))
			b, err := json.Marshal(map[string]any{"taskId": r.held.ID})
			if err != nil {
				t.Fatal(err)
			}
			req := signed(t, &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, From: r.proposer.Address(identity.Mainnet), To: r.n.Address(),
				Type: snap.TypeRequest, Method: "tasks/cancel", Payload: b, Timestamp: time.Now().Unix()}, r.proposer)
			if got := taskOf(t, postSNAP(t, r.n, req)); got.Status.State != "canceled" {
				t.Fatalf("tasks/cancel left the task %s %q", got.Status.State, got.Status.Message)
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
				t.Fatalf("held once the task was canceled: %s (%v); want none", res, err)
			}
		})
	}
}
