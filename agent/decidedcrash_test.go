package agent_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// An operator decided the action a job held, and the executor carried
// the decision out, but the node stopped before the runtime heard of it
// (Runtime.Decided): the job still waits, its task input_required, with
// nothing held any more for an operator to decide. The restarted runtime
// takes the decision up from the executor's record: the job goes on with
// its outcome, told to the model, and the task does not wait for ever.
func TestDecidedBeforeCrash(t *testing.T) {
	for _, tc := range []struct {
		name    string
		approve bool
		// stepSettled: the node stopped later, once the held step had
		// the outcome but before the job was queued again.
		stepSettled bool
	}{
		{name: "approved", approve: true},
		{name: "denied"},
		{name: "approved, its step settled", approve: true, stepSettled: true},
	} {
		approve := tc.approve
		t.Run(tc.name, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, dsn string) {
				r := newRig(t, dsn)
				ctx := context.Background()
				task, action := heldDelete(t, r)
				gone := filepath.Join(r.dir, "gone.md")
				// The decision, carried out; the node stops before
				// Runtime.Decided.
				var err error
				if approve {
					_, err = r.exec.Approve(ctx, action, executor.Host)
				} else {
					_, err = r.exec.Deny(ctx, action, executor.Host, "not this one")
				}
				if err != nil {
					t.Fatal(err)
				}
				if tc.stepSettled {
					its, err := r.store.Interactions(ctx, task.ID)
					if err != nil {
						t.Fatal(err)
					}
					it := its[len(its)-1]
					it.Observation.Outcome = agent.ObsApproved
					if err := r.store.ReplaceInteraction(ctx, task.ID, &it); err != nil {
						t.Fatal(err)
					}
				}

				m := &scripted{answers: []string{proposalJSON("FINISH", map[string]any{"response": "done"})}}
				got := r.run(t, m, task.ID, tasks.StateCompleted, tasks.StateFailed, tasks.StateCanceled)
				if got.Status.State != tasks.StateCompleted {
					t.Fatalf("task %s %q; want the job gone on and completed", got.Status.State, got.Status.Message)
				}
				if _, err := os.Stat(gone); approve != os.IsNotExist(err) {
					t.Fatalf("gone.md: %v, approved %v", err, approve)
				}
				h, err := r.store.History(ctx, task.ID)
				if err != nil {
					t.Fatal(err)
				}
				want := agent.ObsApproved
				if !approve {
					want = agent.ObsDenied
				}
				if o := h.Interactions[0].Observation; o == nil || o.ActionID != action || o.Outcome != want {
					t.Fatalf("the held step's observation: %+v; want %s", o, want)
				}
				if len(m.prompts) != 1 {
					t.Fatalf("%d model calls after the restart; want 1", len(m.prompts))
				}
			})
		})
	}
}

// The operator approved the action a job held, and the node stopped in
// the middle of its promotion: the executor's recovery undid it (failed,
// executor.ReasonInterrupted) and the runtime hands the job that outcome
// (the node stopped before Decided). The step is recorded failed, as the
// executor left it, not approved: an approved step counts as a change the
// job made, which would list on the completed task the diff of a delete
// that never happened, and which a resume from a checkpoint would try to
// roll back. The model is told the approval did not go through.
func TestApprovalInterruptedBeforeCrash(t *testing.T) {
	// stepSettled: the node stopped later, once the held step had the
	// outcome but before the job was queued again.
	for _, stepSettled := range []bool{false, true} {
		t.Run(fmt.Sprintf("step settled %v", stepSettled), func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, dsn string) {
				approvalInterrupted(t, dsn, stepSettled)
			})
		})
	}
}

func approvalInterrupted(t *testing.T, dsn string, stepSettled bool) {
	r := newRig(t, dsn)
	ctx := context.Background()
	task, action := heldDelete(t, r)
	gone := filepath.Join(r.dir, "gone.md")
	// The approval promotes the delete; the node stops before its
	// last commit, and the next start's recovery undoes it.
	lost := errors.New("the node stopped")
	if _, err := r.exec.ApproveThen(ctx, action, executor.Host, nil,
		func(context.Context, *sql.Tx, *executor.Result) error { return lost }); !errors.Is(err, lost) {
		t.Fatalf("approve: %v", err)
	}
	if n, err := r.exec.RecoverInterrupted(ctx); n != 1 || err != nil {
		t.Fatalf("recovered %d: %v", n, err)
	}
	acts, err := r.exec.Actions(ctx, task.ID)
	if err != nil || len(acts) != 1 || acts[0].State != "failed" || acts[0].Reason != executor.ReasonInterrupted {
		t.Fatalf("records: %+v %v", acts, err)
	}
	if stepSettled {
		its, err := r.store.Interactions(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		it := its[len(its)-1]
		it.Observation.Outcome, it.Observation.Reason = agent.ObsFailed, executor.ReasonInterrupted
		if err := r.store.ReplaceInteraction(ctx, task.ID, &it); err != nil {
			t.Fatal(err)
		}
	}

	m := &scripted{answers: []string{proposalJSON("FINISH", map[string]any{"response": "done"})}}
	got := r.run(t, m, task.ID, tasks.StateCompleted, tasks.StateFailed, tasks.StateCanceled)
	if got.Status.State != tasks.StateCompleted {
		t.Fatalf("task %s %q; want the job gone on and completed", got.Status.State, got.Status.Message)
	}
	if b, err := os.ReadFile(gone); err != nil || string(b) != "bye\n" {
		t.Fatalf("gone.md: %q %v; the recovery put it back", b, err)
	}
	h, err := r.store.History(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if o := h.Interactions[0].Observation; o == nil || o.ActionID != action || o.Outcome != agent.ObsFailed || o.Reason != executor.ReasonInterrupted {
		t.Fatalf("the held step's observation: %+v; want failed, %q", o, executor.ReasonInterrupted)
	}
	if err := agent.Replay(h, 64<<10); err != nil {
		t.Fatalf("replay: %v", err)
	}
	var told strings.Builder
	for _, p := range m.prompts {
		for _, msg := range p {
			told.WriteString(msg.Content)
		}
	}
	if len(m.prompts) != 1 || !strings.Contains(told.String(), executor.ReasonInterrupted) {
		t.Fatalf("the model was not told the approval was undone: %s", told.String())
	}
	for _, a := range got.Artifacts {
		if a.ArtifactID == "changes" {
			t.Fatalf("the task lists changes the job made: %+v; the delete was undone", a.Parts)
		}
	}
}
