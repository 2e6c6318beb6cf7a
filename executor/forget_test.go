package executor_test

import (
	"context"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
)

// Forget deletes the records of actions that ended before its cut and can
// change nothing more (their rollback snapshot pruned), and keeps the
// others: a younger action's, and an old one's whose snapshot still allows
// a rollback. The audit log keeps its entries. Before, every promoted
// action's record, its content and diff included, stayed forever.
func TestForgetEndedActions(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		v.snapAge = 24 * time.Hour
		v.reopen()
		ctx := context.Background()
		write := func(name string) string {
			res := v.run(agent, prop("WRITE_FILE", map[string]string{"path": "/sandbox/" + name, "content": "secret of " + name + "\n"}))
			wantOutcome(t, res, executor.Completed)
			return res.ActionID
		}
		old := write("old.md") // its snapshot pruned by age at a later promotion
		v.clock.Advance(48 * time.Hour)
		kept := write("kept.md") // its snapshot still stored when it is old
		v.clock.Advance(time.Hour)
		young := write("young.md") // prunes old's snapshot (past 24 h)
		if v.snapshotStored(old) || !v.snapshotStored(kept) {
			t.Fatalf("snapshots stored: old %v, kept %v; want old's pruned, kept's stored", v.snapshotStored(old), v.snapshotStored(kept))
		}
		n, err := v.ex.Forget(ctx, v.clock.Now().Add(-30*time.Minute))
		if err != nil || n != 1 {
			t.Fatalf("Forget = %d, %v; want the old action's record alone", n, err)
		}
		acts, err := v.ex.Actions(ctx, "task-1")
		if err != nil {
			t.Fatal(err)
		}
		var left []string
		for _, a := range acts {
			left = append(left, a.ActionID)
		}
		if len(left) != 2 || left[0] != kept || left[1] != young {
			t.Fatalf("actions left %v; want %s and %s", left, kept, young)
		}
		if len(v.steps(old)) == 0 {
			t.Error("the forgotten action's audit entries went with its record")
		}
		v.verify()
	})
}
