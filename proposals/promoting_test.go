package proposals_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/sqlstore"
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
	task, one := r.oneHeld(t)
	cutoff := time.Now() // a pass for the tasks that stood still until now
	for !time.Now().After(cutoff) {
	}
	lost := errors.New("the node stopped")
	if _, err := r.exec.ApproveThen(ctx, one.ActionID, operator, nil,
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

// A task left working whose write the executor's record shows still
// promoting (the process stopped, or the run's last commit failed, after
// the files were renamed) has no outcome yet: the executor's recovery
// undoes the write and records it failed. A reconcile pass that leaves
// the promotion alone (younger than the pass's cutoff) must leave the
// task as it is too, not complete it from the record: the next pass
// undoes the write, then resumes the task, which fails.
func TestResumeLeavesPromotingRun(t *testing.T) {
	r := newReplica(t, testdb.SQLite(t), false)
	ctx := context.Background()
	// The task is stored by a process that stops before running it.
	store, err := sqlstore.New(ctx, r.db)
	if err != nil {
		t.Fatal(err)
	}
	stopped := tasks.NewService(store, tasks.ServiceOptions{Operators: []string{operator}})
	task := r.send(t, stopped, "", [2]string{"WRITE_FILE", "/sandbox/new.txt"})
	if task.Status.State != tasks.StateSubmitted || len(task.History) != 1 {
		t.Fatalf("task %s, %d messages", task.Status.State, len(task.History))
	}
	cutoff := time.Now() // a pass for the tasks that stood still until now
	for !time.Now().After(cutoff) {
	}
	lost := errors.New("the node stopped")
	if _, err := r.exec.Executor.Run(ctx, executor.Request{TaskID: task.ID, Requester: alice, Data: task.History[0].Parts[0].Data,
		Then: func(context.Context, *sql.Tx, *executor.Result) error { return lost }}); !errors.Is(err, lost) {
		t.Fatalf("run: %v", err)
	}
	if acts, _ := r.exec.Actions(ctx, task.ID); len(acts) != 1 || acts[0].State != "promoting" {
		t.Fatalf("records: %+v", acts)
	}
	if _, err := r.props.Reconcile(ctx, cutoff); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.svc.Task(ctx, task.ID); got.Status.State.Terminal() {
		t.Fatalf("while its write is promoting the task went %s %q", got.Status.State, got.Status.Message)
	}
	// The next pass recovers the write, then resumes the task from it.
	if _, err := r.props.Reconcile(ctx, time.Now()); err != nil {
		t.Fatal(err)
	}
	if got, _ := r.svc.Task(ctx, task.ID); got.Status.State != tasks.StateFailed {
		t.Fatalf("task %s %q, want failed", got.Status.State, got.Status.Message)
	}
	if exists(t, r.file("new.txt")) {
		t.Fatal("new.txt was not undone")
	}
	if n := r.exec.count(task.ID); n != 0 {
		t.Fatalf("the write ran again %d times", n)
	}
}

// An action held by a task that ended is withdrawn when the task ends,
// and by every reconcile pass after a withdrawal that failed. One still
// held when the task's retention deleted the task could no longer be
// reached: Decide reads the task first (not found), and the passes
// skipped a task they could not read, so it stayed in `snapnode held`
// for good. A pass now withdraws the actions of a task that is gone.
func TestHeldOutlivingItsTaskWithdrawn(t *testing.T) {
	r := newReplica(t, testdb.SQLite(t), false)
	ctx := context.Background()
	task, one := r.oneHeld(t)
	// The task is canceled, and its withdrawal does not happen (here: is
	// not called) until the task's retention deletes it.
	if err := r.cancel(task.ID); err != nil {
		t.Fatal(err)
	}
	store, err := sqlstore.New(ctx, r.db)
	if err != nil {
		t.Fatal(err)
	}
	later := func() time.Time { return time.Now().Add(48 * time.Hour) }
	if n, err := (tasks.Retention{Store: store, TTL: 24 * time.Hour, Now: later}).PruneOnce(ctx); n != 1 || err != nil {
		t.Fatalf("retention: %d %v", n, err)
	}
	if _, err := r.props.Decide(ctx, proposals.Decision{TaskID: task.ID, ActionID: one.ActionID, Approver: executor.Host}); err == nil {
		t.Fatal("a decision on a deleted task went on")
	}
	rec, err := r.props.Reconcile(ctx, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if all, err := r.props.Held(ctx, ""); err != nil || len(all) != 0 || rec.Withdrawn != 1 {
		t.Fatalf("after a pass: held %v %v, withdrawn %d", all, err, rec.Withdrawn)
	}
	if acts, _ := r.exec.Actions(ctx, task.ID); len(acts) != 1 || acts[0].State != "denied" {
		t.Fatalf("records: %+v", acts)
	}
	if !exists(t, r.file("one.txt")) {
		t.Fatal("one.txt is gone")
	}
}
