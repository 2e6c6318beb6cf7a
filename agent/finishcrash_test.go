package agent_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// approvedDelete leaves, on a new rig over SQLite, a job whose model
// proposed to delete gone.md, held for the operator, then approved and
// handed back to the job (Runtime.Decided, the runtime made with set):
// the job is queued again, its held step approved, its reason still the
// hold's note. It returns the rig, the task and the action.
func approvedDelete(t *testing.T, set func(*agent.Config)) (*rig, *tasks.Task, string) {
	t.Helper()
	r := newRig(t, testdb.SQLite(t))
	ctx := context.Background()
	task, action := heldDelete(t, r)
	res, err := r.exec.Approve(ctx, action, executor.Host)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := decider(t, r, set).Decided(ctx, task.ID, res, true, res.Diff); err != nil {
		t.Fatalf("Decided: %v", err)
	}
	return r, task, action
}

// heldDelete writes gone.md ("bye\n") in r's sandbox and runs a new task
// whose model proposes to delete it, until the policy holds the delete
// for the operator. It returns the task and the held action's id.
func heldDelete(t *testing.T, r *rig) (*tasks.Task, string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(r.dir, "gone.md"), []byte("bye\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	task := r.send(t, "delete gone.md")
	m := &scripted{answers: []string{proposalJSON("DELETE_FILE", map[string]any{"path": "/sandbox/gone.md"})}}
	if got := r.run(t, m, task.ID, tasks.StateInputRequired, tasks.StateCompleted, tasks.StateFailed); got.Status.State != tasks.StateInputRequired {
		t.Fatalf("task %s %q; want the delete held", got.Status.State, got.Status.Message)
	}
	held, err := r.exec.Pending(context.Background(), task.ID)
	if err != nil || len(held) != 1 {
		t.Fatalf("held: %+v %v", held, err)
	}
	return task, held[0].ActionID
}

// decider is a runtime on r, not run, to hand decisions to jobs.
func decider(t *testing.T, r *rig, set func(*agent.Config)) *agent.Runtime {
	t.Helper()
	cfg := agent.Config{Queue: r.queue, Store: r.store, Tasks: r.svc, Executor: r.exec, Model: &scripted{},
		ContextTokens: 8000, Lease: time.Second, Poll: 10 * time.Millisecond}
	if set != nil {
		set(&cfg)
	}
	rt, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// sqlExec runs q on r's database.
func (r *rig) sqlExec(t *testing.T, q string) {
	t.Helper()
	if err := r.db.Write(context.Background(), func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, q)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}

func artifactText(task *tasks.Task, id string) (string, int) {
	var text string
	n := 0
	for _, a := range task.Artifacts {
		if a.ArtifactID != id {
			continue
		}
		n++
		for _, p := range a.Parts {
			if p.Text != nil {
				text += *p.Text
			}
		}
	}
	return text, n
}

// The model finishes a job whose action was held and approved: the job's
// success and its answer are one write. A node that stopped right after
// the job's first write of its success (a SQLite trigger refuses every
// later change of the job's status or reason, as a dead process makes
// none) left the task to the restart's reconcile with the hold's note
// ("confirmation needed for action …") as its message and its answer,
// where the model's answer is due.
func TestFinishAnswerWrittenWithSuccess(t *testing.T) {
	r, task, _ := approvedDelete(t, nil)
	ctx := context.Background()
	if j, err := r.store.Get(ctx, task.ID); err != nil || !strings.HasPrefix(j.Reason, "confirmation needed") {
		t.Fatalf("the job before its finish: %+v %v; want the hold's note as its reason", j, err)
	}
	r.sqlExec(t, `CREATE TRIGGER stopped BEFORE UPDATE ON agent_jobs
		WHEN OLD.status = 'SUCCESS' AND (NEW.status IS NOT OLD.status OR NEW.reason IS NOT OLD.reason)
		BEGIN SELECT RAISE(ABORT, 'the node stopped'); END`)
	const answer = "deleted gone.md"
	m := &scripted{answers: []string{proposalJSON("FINISH", map[string]any{"response": answer})}}
	// The restart's reconcile completes the task, if the job's run did not.
	got := r.run(t, m, task.ID, tasks.StateCompleted, tasks.StateFailed, tasks.StateCanceled)
	if got.Status.State != tasks.StateCompleted || got.Status.Message != answer {
		t.Fatalf("task %s %q; want completed with the model's answer %q", got.Status.State, got.Status.Message, answer)
	}
	// The state the run waited for, with the artifacts the task has now.
	got, err := r.svc.Task(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if text, n := artifactText(got, "agent-response"); n != 1 || text != answer {
		t.Fatalf("the task's answer artifacts: %d, %q; want one, %q", n, text, answer)
	}
	if j, err := r.store.Get(ctx, task.ID); err != nil || j.Status != agent.Success || j.Reason != answer {
		t.Fatalf("the job: %+v %v; want %s with the answer as its reason", j, err, agent.Success)
	}
}

// stopAtCompletion is the task service of a node that stops as the task
// is first written completed (its state and answer's artifact in one
// write; or, as older versions wrote it, the artifact, then the state):
// the runtime's context is canceled and nothing is written from then on.
type stopAtCompletion struct {
	agent.Tasks
	stop    func()
	stopped *atomic.Bool
}

func (s stopAtCompletion) AddArtifact(ctx context.Context, taskID string, a tasks.Artifact) (*tasks.Task, error) {
	if a.ArtifactID == "agent-response" || s.stopped.Load() {
		return nil, s.stopNow()
	}
	return s.Tasks.AddArtifact(ctx, taskID, a)
}

func (s stopAtCompletion) Transition(ctx context.Context, taskID string, to tasks.State, note string) (*tasks.Task, error) {
	if to == tasks.StateCompleted || s.stopped.Load() {
		return nil, s.stopNow()
	}
	return s.Tasks.Transition(ctx, taskID, to, note)
}

func (s stopAtCompletion) Resolve(ctx context.Context, taskID string, out tasks.Outcome) (*tasks.Task, error) {
	if out.State == tasks.StateCompleted || s.stopped.Load() {
		return nil, s.stopNow()
	}
	return s.Tasks.Resolve(ctx, taskID, out)
}

func (s stopAtCompletion) stopNow() error {
	s.stopped.Store(true)
	s.stop()
	return errors.New("the node stopped")
}

// A node stopped after the job's success was written and before its task
// was: the restart's reconcile completes the task with the model's answer
// and, as the job's own completion would have, the changes the job made
// (the approved delete), where it left only the answer.
func TestReconciledSuccessListsChanges(t *testing.T) {
	r, task, _ := approvedDelete(t, nil)
	ctx := context.Background()
	const answer = "deleted gone.md"
	m := &scripted{answers: []string{proposalJSON("FINISH", map[string]any{"response": answer})}}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rt, err := agent.New(agent.Config{Queue: r.queue, Store: r.store, Tasks: stopAtCompletion{Tasks: r.svc, stop: cancel, stopped: new(atomic.Bool)},
		Executor: r.exec, Model: m, ContextTokens: 8000, Lease: time.Second, Poll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Run(rctx); err != nil {
		t.Fatal(err)
	}
	// As the crash left it: the job ended in success, its task not.
	j, err := r.store.Get(ctx, task.ID)
	if err != nil || j.Status != agent.Success || j.Reason != answer {
		t.Fatalf("the job after the stop: %+v %v; want %s with the answer", j, err, agent.Success)
	}
	if cur, err := r.svc.Task(ctx, task.ID); err != nil || cur.Status.State != tasks.StateWorking {
		t.Fatalf("the task after the stop: %+v %v; want it still working", cur, err)
	}

	got := r.run(t, &scripted{}, task.ID, tasks.StateCompleted, tasks.StateFailed, tasks.StateCanceled)
	if got.Status.State != tasks.StateCompleted || got.Status.Message != answer {
		t.Fatalf("task %s %q; want completed with %q", got.Status.State, got.Status.Message, answer)
	}
	// The state the run waited for, with the artifacts the task has now.
	if got, err = r.svc.Task(ctx, task.ID); err != nil {
		t.Fatal(err)
	}
	checkDeleteAnswered(t, got, answer)
}

// A decision handed to its job twice (the first hand-over cut after it
// put the decision's artifacts on the task, by a stop or a failed write;
// the restart's reconcile hands it again) puts them there once and logs
// no warning for the second: the artifacts are the same decision's.
func TestDecisionHandedTwiceQuiet(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	ctx := context.Background()
	task, action := heldDelete(t, r)
	res, err := r.exec.Approve(ctx, action, executor.Host)
	if err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	rt := decider(t, r, func(c *agent.Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	// The first hand-over stops once the artifacts are on the task.
	r.sqlExec(t, `CREATE TRIGGER stopped BEFORE UPDATE ON agent_interactions BEGIN SELECT RAISE(ABORT, 'the node stopped'); END`)
	if _, err := rt.Decided(ctx, task.ID, res, true, res.Diff); err == nil || !strings.Contains(err.Error(), "the node stopped") {
		t.Fatalf("the first hand-over: %v; want it stopped", err)
	}
	r.sqlExec(t, `DROP TRIGGER stopped`)
	if _, err := rt.Decided(ctx, task.ID, res, true, res.Diff); err != nil {
		t.Fatalf("the second hand-over: %v", err)
	}
	if logged.Len() > 0 {
		t.Fatalf("the second hand-over logged:\n%s", logged.String())
	}
	cur, err := r.svc.Task(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if _, n := artifactText(cur, "diff-"+res.ActionID); n != 1 {
		t.Fatalf("the decision's diff is on the task %d times; want once: %+v", n, cur.Artifacts)
	}
	in, err := r.store.PendingInput(ctx, task.ID)
	if err != nil || strings.Count(in, "The operator approved action "+res.ActionID) != 1 {
		t.Fatalf("what the model is told next: %q %v; want the approval once", in, err)
	}
}
