package executor_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
)

// Forget deletes the record of an action that ended, can change nothing
// more (its rollback snapshot pruned), last changed before the cut, and
// whose task is gone; it keeps the others: a younger action's, an old one
// whose snapshot still allows a rollback, and an old one whose task is
// kept (a job waiting for a human for months, whose resume may roll it
// back). The audit log keeps their entries. Before, every promoted
// action's record, its content and diff included, stayed forever.
func TestForgetEndedActions(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		v.snapAge = 24 * time.Hour
		v.reopen()
		ctx := context.Background()
		write := func(task, name string) string {
			res, err := v.ex.Run(ctx, executor.Request{TaskID: task, Requester: agent,
				Data: prop("WRITE_FILE", map[string]string{"path": "/sandbox/" + name, "content": "secret of " + name + "\n"})})
			if err != nil {
				t.Fatal(err)
			}
			wantOutcome(t, res, executor.Completed)
			return res.ActionID
		}
		old := write("gone-task", "old.md")            // its snapshot pruned by age at a later promotion
		waiting := write("waiting-task", "waiting.md") // as old, but its task is kept
		v.clock.Advance(48 * time.Hour)
		kept := write("gone-task", "kept.md") // its snapshot still stored when it is old
		v.clock.Advance(time.Hour)
		young := write("gone-task", "young.md") // prunes old's snapshot (past 24 h)
		if v.snapshotStored(old) || v.snapshotStored(waiting) || !v.snapshotStored(kept) {
			t.Fatalf("snapshots stored: old %v, waiting %v, kept %v; want only kept's", v.snapshotStored(old), v.snapshotStored(waiting), v.snapshotStored(kept))
		}
		var asked []string
		gone := func(_ context.Context, task string) (bool, error) {
			asked = append(asked, task)
			return task == "gone-task", nil
		}
		n, err := v.ex.Forget(ctx, v.clock.Now().Add(-30*time.Minute), gone)
		if err != nil || n != 1 {
			t.Fatalf("Forget = %d, %v; want the old action's record alone", n, err)
		}
		slices.Sort(asked)
		if !slices.Equal(asked, []string{"gone-task", "waiting-task"}) {
			t.Errorf("tasks asked about %v: want each task of an old ended record once", asked)
		}
		for task, want := range map[string][]string{"gone-task": {kept, young}, "waiting-task": {waiting}} {
			acts, err := v.ex.Actions(ctx, task)
			if err != nil {
				t.Fatal(err)
			}
			var left []string
			for _, a := range acts {
				left = append(left, a.ActionID)
			}
			if !slices.Equal(left, want) {
				t.Errorf("actions of %s left %v; want %v", task, left, want)
			}
		}
		if len(v.steps(old)) == 0 {
			t.Error("the forgotten action's audit entries went with its record")
		}
		// A rollback of it says why it may be unknown, not only "no
		// promoted action".
		if err := v.ex.Rollback(ctx, old); !errors.Is(err, executor.ErrNotPromoted) || !strings.Contains(err.Error(), "task_retention") {
			t.Errorf("rollback of the forgotten action: %v; want ErrNotPromoted naming task_retention", err)
		}
		v.verify()
	})
}

// Reading the ended records walks their index in its order, a page at a
// time, not every record sorted.
func TestForgetUsesItsIndex(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	plan := executor.EndedPlan(t, v.ex)
	if all := strings.Join(plan, "; "); !strings.Contains(all, "executor_actions_ended") || strings.Contains(all, "TEMP B-TREE") {
		t.Fatalf("plan %q: want the index executor_actions_ended, in its order", plan)
	}
}
