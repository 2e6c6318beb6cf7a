package agent_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/tasks"
)

// failCompletion is the task service of a node whose database refuses
// the task's write to completed (busy, or briefly gone) the first left
// times, then takes it; the node keeps running.
type failCompletion struct {
	agent.Tasks
	left *atomic.Int32
}

func (f failCompletion) Transition(ctx context.Context, taskID string, to tasks.State, note string) (*tasks.Task, error) {
	if to == tasks.StateCompleted && f.left.Add(-1) >= 0 {
		return nil, errors.New("database is locked (SQLITE_BUSY)")
	}
	return f.Tasks.Transition(ctx, taskID, to, note)
}

// The database refuses the task's write after the job's success was
// saved (busy, or briefly gone), and the lease's release after it while
// the task is not completed (a trigger), the node running on: the success
// stands, and the task is completed from it with the model's answer and
// the changes, by the job itself trying the write again (fails 1) or,
// when its tries are spent, by the reconcile pass of the running node
// (fails 6). Before, the job, still holding its lease, was switched to
// waiting for a human at the next write the database took, its answer
// lost, its task input_required with nothing to decide.
func TestCompletionWriteFails(t *testing.T) {
	for _, fails := range []int32{1, 6} {
		t.Run(map[int32]string{1: "once", 6: "past the job's tries"}[fails], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, task, _ := approvedDelete(t, nil)
				ctx := context.Background()
				const answer = "deleted gone.md"
				m := &scripted{answers: []string{proposalJSON("FINISH", map[string]any{"response": answer})}}
				r.sqlExec(t, `CREATE TRIGGER busy BEFORE UPDATE ON agent_jobs
					WHEN OLD.status = 'SUCCESS' AND OLD.lease_holder <> '' AND NEW.lease_holder = ''
						AND (SELECT state FROM tasks WHERE id = OLD.task_id) <> 'completed'
					BEGIN SELECT RAISE(ABORT, 'database is locked'); END`)
				left := new(atomic.Int32)
				left.Store(fails)
				var logged bytes.Buffer
				got := r.runWith(t, func(c *agent.Config) {
					c.Tasks = failCompletion{Tasks: r.svc, left: left}
					c.Poll = 50 * time.Millisecond
					c.Logger = slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
				}, m, task.ID, tasks.StateCompleted, tasks.StateInputRequired, tasks.StateFailed, tasks.StateCanceled)
				if got.Status.State != tasks.StateCompleted || got.Status.Message != answer {
					t.Fatalf("task %s %q; want completed with the model's answer %q", got.Status.State, got.Status.Message, answer)
				}
				if n := left.Load(); n >= 0 {
					t.Fatalf("%d of the %d failures left: the task's write was not refused as the test meant", n+1, fails)
				}
				// The job's tries, then the reconcile's.
				if tried, left := strings.Count(logged.String(), "trying again"), strings.Contains(logged.String(), "the reconcile pass makes it"); tried != min(int(fails), 3) || left != (fails > 4) {
					t.Fatalf("the job tried the task's write again %d times, left it to the reconcile: %v; want %d, %v; logged:\n%s", tried, left, min(fails, 3), fails > 4, logged.String())
				}
				if got, err := r.svc.Task(ctx, task.ID); err != nil {
					t.Fatal(err)
				} else {
					if text, n := artifactText(got, "agent-response"); n != 1 || text != answer {
						t.Fatalf("the task's answer artifacts: %d, %q; want one, %q", n, text, answer)
					}
					if text, n := artifactText(got, "changes"); n != 1 || strings.Count(text, "-bye") != 1 {
						t.Fatalf("the task's changes artifacts: %d, %q; want one listing the delete once", n, text)
					}
				}
				j, err := r.store.Get(ctx, task.ID)
				if err != nil || j.Status != agent.Success || j.Reason != answer {
					t.Fatalf("the job: %+v %v; want %s with the answer as its reason", j, err, agent.Success)
				}
				// Nothing ran twice: the model was asked once, the
				// delete carried out once.
				if len(m.prompts) != 1 {
					t.Fatalf("the model was asked %d times; want once", len(m.prompts))
				}
				acts, err := r.exec.Actions(ctx, task.ID)
				if err != nil {
					t.Fatal(err)
				}
				var names []string
				for _, a := range acts {
					names = append(names, a.Action)
				}
				if !slices.Equal(names, []string{"DELETE_FILE"}) {
					t.Fatalf("the executor's actions %v; want the delete once", names)
				}
				its, err := r.store.Interactions(ctx, task.ID)
				if err != nil {
					t.Fatal(err)
				}
				if len(its) != 2 || its[1].Response.NewStatus != agent.Success {
					t.Fatalf("the job's history has %d steps; want the delete and the FINISH that ended it", len(its))
				}
			})
		})
	}
}
