package agent_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

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
		t.Run(endingFails[fails], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r, task, _ := approvedDelete(t, nil)
				ctx := context.Background()
				const answer = "deleted gone.md"
				m := &scripted{answers: []string{proposalJSON("FINISH", map[string]any{"response": answer})}}
				got, logged := endingRun(t, r, nil, m, task.ID, agent.Success, tasks.StateCompleted, fails)
				if got.Status.State != tasks.StateCompleted || got.Status.Message != answer {
					t.Fatalf("task %s %q; want completed with the model's answer %q", got.Status.State, got.Status.Message, answer)
				}
				// The job's tries, then the reconcile's.
				checkTries(t, logged, fails)
				checkDeleteAnswered(t, got, answer)
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

// reviewedWithEvidence runs, on a new rig over SQLite, a job whose model
// writes report.md and answers COMPLETED with it as evidence, accepted by
// the supervisor when review is on. With stop, the node stops as the
// task is first written completed, report.md is changed, and a restart's
// reconcile completes the task. It returns the task as it ends.
func reviewedWithEvidence(t *testing.T, review, stop bool) *tasks.Task {
	t.Helper()
	r := newRig(t, testdb.SQLite(t))
	ctx := context.Background()
	task := r.send(t, "write report.md")
	resp := func(action, summary string, files ...string) string {
		b, _ := json.Marshal(map[string]any{"action": action, "evidence_files": append([]string{}, files...), "summary_for_supervisor": summary})
		return string(b)
	}
	answers := []string{
		proposalJSON("WRITE_FILE", map[string]any{"path": "/sandbox/report.md", "content": "apples 1\n"}),
		resp("COMPLETED", "report.md lists the fruit", "/sandbox/report.md", "/sandbox/absent.md"),
	}
	if review {
		answers = append(answers, resp("COMPLETED", "the report is right"))
	}
	m := &scripted{answers: answers}
	set := func(c *agent.Config) { c.Review = review }
	if !stop {
		return r.ended(t, set, m, task.ID)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cfg := agent.Config{Queue: r.queue, Store: r.store, Tasks: stopAtCompletion{Tasks: r.svc, stop: cancel, stopped: new(atomic.Bool)},
		Executor: r.exec, Model: m, ContextTokens: 8000, Lease: time.Second, Poll: 10 * time.Millisecond}
	set(&cfg)
	rt, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Run(rctx); err != nil {
		t.Fatal(err)
	}
	if j, err := r.store.Get(ctx, task.ID); err != nil || j.Status != agent.Success {
		t.Fatalf("the job after the stop: %+v %v; want %s", j, err, agent.Success)
	}
	if cur, err := r.svc.Task(ctx, task.ID); err != nil || cur.Status.State != tasks.StateWorking || len(cur.Artifacts) != 0 {
		t.Fatalf("the task after the stop: %+v %v; want it working, without artifacts", cur, err)
	}
	// What the evidence file says now is not what the job gave.
	if err := os.WriteFile(filepath.Join(r.dir, "report.md"), []byte("changed since\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return r.ended(t, set, &scripted{}, task.ID)
}

// ended runs the job of taskID until its task ends or waits, and returns
// the task with the artifacts it has then.
func (r *rig) ended(t *testing.T, set func(*agent.Config), m agent.Model, taskID string) *tasks.Task {
	t.Helper()
	r.runWith(t, set, m, taskID, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
	task, err := r.svc.Task(context.Background(), taskID)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// A task the restart's reconcile completes carries the artifacts its
// job's own completion gives: the answer, the evidence files as the job
// read them when it ended (not as they are at the restart), a
// supervisor's review, the changes; it got the answer and the changes
// alone.
func TestReconciledSuccessSameArtifacts(t *testing.T) {
	for _, review := range []bool{false, true} {
		t.Run(map[bool]string{false: "no review", true: "review"}[review], func(t *testing.T) {
			want := reviewedWithEvidence(t, review, false)
			got := reviewedWithEvidence(t, review, true)
			if got.Status.State != tasks.StateCompleted || got.Status.Message != want.Status.Message {
				t.Fatalf("the reconciled task %s %q; want completed %q", got.Status.State, got.Status.Message, want.Status.Message)
			}
			ids := []string{"agent-response", "evidence-0", "changes"}
			if review {
				ids = []string{"agent-response", "evidence-0", "review", "changes"}
			}
			for _, task := range []*tasks.Task{want, got} {
				var have []string
				for _, a := range task.Artifacts {
					have = append(have, a.ArtifactID)
				}
				if !slices.Equal(have, ids) {
					t.Fatalf("artifacts %v; want %v", have, ids)
				}
			}
			for i, a := range want.Artifacts {
				b := got.Artifacts[i]
				wj, _ := json.Marshal(a)
				gj, _ := json.Marshal(b)
				if string(wj) != string(gj) {
					t.Errorf("artifact %s: reconciled %s; the job's own completion %s", a.ArtifactID, gj, wj)
				}
			}
			if text, _ := artifactText(got, "evidence-0"); text != "apples 1\n" {
				t.Errorf("the evidence %q; want report.md as the job read it", text)
			}
		})
	}
}
