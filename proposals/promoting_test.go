package proposals_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// A held action whose approval a crash (or a failed last commit) left
// promoting has no outcome yet: the executor's recovery undoes it and
// records it failed. A reconcile pass that leaves the promotion alone (it
// is younger than the pass's cutoff: another process's, maybe in
// progress) must leave its task waiting too, not complete it from the
// record: the next pass undoes the action.
func TestReconcileLeavesPromotingApproval(t *testing.T) {
	r := newReplica(t, testdb.SQLite(t), false)
	ctx := context.Background()
	if err := os.WriteFile(r.file("one.txt"), []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	task := r.send(t, r.svc, "", [2]string{"DELETE_FILE", "/sandbox/one.txt"})
	held, err := r.props.Held(ctx, task.ID)
	if err != nil || len(held) != 1 || task.Status.State != tasks.StateInputRequired {
		t.Fatalf("task %s, held %v %v", task.Status.State, held, err)
	}
	cutoff := time.Now() // a pass for the tasks that stood still until now
	for !time.Now().After(cutoff) {
	}
	lost := errors.New("the node stopped")
	if _, err := r.exec.ApproveThen(ctx, held[0].ActionID, operator, nil,
		func(context.Context, *sql.Tx, *executor.Result) error { return lost }); !errors.Is(err, lost) {
		t.Fatalf("approve: %v", err)
	}
	if acts, _ := r.exec.Actions(ctx, task.ID); len(acts) != 1 || acts[0].State != "promoting" {
		t.Fatalf("records: %+v", acts)
	}
	if _, err := r.props.Reconcile(ctx, cutoff); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.svc.Task(ctx, task.ID); got.Status.State != tasks.StateInputRequired {
		t.Fatalf("while its action is promoting the task went %s %q", got.Status.State, got.Status.Message)
	}
	// The next pass recovers the action, then settles the task from it.
	if _, err := r.props.Reconcile(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.svc.Task(ctx, task.ID); got.Status.State != tasks.StateFailed {
		t.Fatalf("task %s %q, want failed", got.Status.State, got.Status.Message)
	}
	if !exists(t, r.file("one.txt")) {
		t.Fatal("one.txt was not restored")
	}
}
