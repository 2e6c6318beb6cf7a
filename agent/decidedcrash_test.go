package agent_test

import (
	"context"
	"os"
	"path/filepath"
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
				gone := filepath.Join(r.dir, "gone.md")
				if err := os.WriteFile(gone, []byte("bye\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				task := r.send(t, "delete gone.md")
				m := &scripted{answers: []string{proposalJSON("DELETE_FILE", map[string]any{"path": "/sandbox/gone.md"})}}
				if got := r.run(t, m, task.ID, tasks.StateInputRequired, tasks.StateCompleted, tasks.StateFailed); got.Status.State != tasks.StateInputRequired {
					t.Fatalf("task %s %q; want the delete held", got.Status.State, got.Status.Message)
				}
				held, err := r.exec.Pending(ctx, task.ID)
				if err != nil || len(held) != 1 {
					t.Fatalf("held: %+v %v", held, err)
				}
				// The decision, carried out; the node stops before
				// Runtime.Decided.
				if approve {
					_, err = r.exec.Approve(ctx, held[0].ActionID, executor.Host)
				} else {
					_, err = r.exec.Deny(ctx, held[0].ActionID, executor.Host, "not this one")
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

				m = &scripted{answers: []string{proposalJSON("FINISH", map[string]any{"response": "done"})}}
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
				if o := h.Interactions[0].Observation; o == nil || o.ActionID != held[0].ActionID || o.Outcome != want {
					t.Fatalf("the held step's observation: %+v; want %s", o, want)
				}
				if len(m.prompts) != 1 {
					t.Fatalf("%d model calls after the restart; want 1", len(m.prompts))
				}
			})
		})
	}
}
