package agent_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// failEnding is the task service of a node whose database refuses the
// task's write to state to the first left times (busy, or briefly gone),
// then takes it; the node keeps running.
type failEnding struct {
	agent.Tasks
	to   tasks.State
	left *atomic.Int32
}

func (f failEnding) fail(to tasks.State) bool { return to == f.to && f.left.Add(-1) >= 0 }

func (f failEnding) Transition(ctx context.Context, taskID string, to tasks.State, note string) (*tasks.Task, error) {
	if f.fail(to) {
		return nil, errors.New("database is locked (SQLITE_BUSY)")
	}
	return f.Tasks.Transition(ctx, taskID, to, note)
}

func (f failEnding) Resolve(ctx context.Context, taskID string, out tasks.Outcome) (*tasks.Task, error) {
	if f.fail(out.State) {
		return nil, errors.New("database is locked (SQLITE_BUSY)")
	}
	return f.Tasks.Resolve(ctx, taskID, out)
}

// endingRun runs, on r, the job of taskID with model m, the task's
// write to the state the job ends or waits in (to) refused fails times,
// and the lease's release refused while the job is in status and its task
// not in to (the node's database gone for a moment). It returns the task
// once it is in one of the states, with its artifacts, and the log's
// warnings.
func endingRun(t *testing.T, r *rig, set func(*agent.Config), m agent.Model, taskID string, status agent.Status, to tasks.State, fails int32) (*tasks.Task, string) {
	t.Helper()
	r.sqlExec(t, `CREATE TRIGGER busy BEFORE UPDATE ON agent_jobs
		WHEN OLD.status = '`+string(status)+`' AND OLD.lease_holder <> '' AND NEW.lease_holder = ''
			AND (SELECT state FROM tasks WHERE id = OLD.task_id) <> '`+string(to)+`'
		BEGIN SELECT RAISE(ABORT, 'database is locked'); END`)
	left := new(atomic.Int32)
	left.Store(fails)
	var logged bytes.Buffer
	cur := r.runWith(t, func(c *agent.Config) {
		c.Tasks = failEnding{Tasks: r.svc, to: to, left: left}
		c.Poll = 50 * time.Millisecond
		c.Logger = slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
		if set != nil {
			set(c)
		}
	}, m, taskID, tasks.StateCompleted, tasks.StateInputRequired, tasks.StateFailed, tasks.StateCanceled)
	if n := left.Load(); n >= 0 && cur.Status.State == to {
		t.Fatalf("%d of the %d failures left: the task's write was not refused as the test meant", n+1, fails)
	}
	got, err := r.svc.Task(context.Background(), taskID)
	if err != nil {
		t.Fatal(err)
	}
	return got, logged.String()
}

// checkTries fails unless the log shows the job trying the task's write
// again as often as fails asks (at most 3 times), and leaving it to the
// reconcile pass past its tries.
func checkTries(t *testing.T, logged string, fails int32) {
	t.Helper()
	if tried, left := strings.Count(logged, "trying again"), strings.Contains(logged, "the reconcile pass makes it"); tried != min(int(fails), 3) || left != (fails > 4) {
		t.Fatalf("the job tried the task's write again %d times, left it to the reconcile: %v; want %d, %v; logged:\n%s", tried, left, min(fails, 3), fails > 4, logged)
	}
}

// checkDeleteAnswered fails unless the task carries one answer artifact,
// answer, and one changes artifact listing the approved delete of gone.md
// (approvedDelete) once.
func checkDeleteAnswered(t *testing.T, task *tasks.Task, answer string) {
	t.Helper()
	if text, n := artifactText(task, "agent-response"); n != 1 || text != answer {
		t.Fatalf("the task's answer artifacts: %d, %q; want one, %q", n, text, answer)
	}
	if text, n := artifactText(task, "changes"); n != 1 || strings.Count(text, "-bye") != 1 {
		t.Fatalf("the task's changes artifacts: %d, %q; want one listing the delete once", n, text)
	}
}

var endingFails = map[int32]string{1: "once", 6: "past the job's tries"}

// A job that halts at its step limit while the database refuses the
// task's write (and the lease's release) stays halted: its task fails
// with the halt's reason and its halt artifact, written by the job trying
// again (fails 1) or by the reconcile pass of the running node (fails 6).
// Before, the failed write sent the job to work's error path, which saved
// it waiting for a human over its halt, its task input_required; and the
// reconcile failed the task of a halted job without its halt artifact.
func TestHaltWriteFails(t *testing.T) {
	for _, fails := range []int32{1, 6} {
		t.Run(endingFails[fails], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, testdb.SQLite(t))
				ctx := context.Background()
				task := r.send(t, "write a.md")
				m := &scripted{answers: []string{proposalJSON("WRITE_FILE", map[string]any{"path": "/sandbox/a.md", "content": "a\n"})}}
				got, logged := endingRun(t, r, func(c *agent.Config) { c.MaxSteps = 1 }, m, task.ID, agent.HaltedTime, tasks.StateFailed, fails)
				const reason = "halted (HALTED_TIME): max_steps reached: 1 of at most 1"
				if got.Status.State != tasks.StateFailed || got.Status.Message != reason {
					t.Fatalf("task %s %q; want failed %q", got.Status.State, got.Status.Message, reason)
				}
				checkTries(t, logged, fails)
				var halt string
				for _, a := range got.Artifacts {
					if a.ArtifactID == "halt" && len(a.Parts) == 1 {
						halt = string(a.Parts[0].Data)
					}
				}
				const want = `{"halt":"HALTED_TIME","limit":"max_steps","max":1,"got":1,"steps":1,"cost_cents":0}`
				if halt != want {
					t.Fatalf("the halt artifact %q; want %q (artifacts %+v)", halt, want, got.Artifacts)
				}
				j, err := r.store.Get(ctx, task.ID)
				if err != nil || j.Status != agent.HaltedTime || j.Reason != reason {
					t.Fatalf("the job: %+v %v; want %s, %q", j, err, agent.HaltedTime, reason)
				}
			})
		})
	}
}

// refusing is a model server that refuses the node's request for good
// (a revoked API key), its error naming the server's address.
type refusing struct{}

func (refusing) Complete(context.Context, agent.Prompt) (*agent.Completion, error) {
	return nil, &agent.ModelError{Status: 401, Message: "invalid API key for http://10.1.2.3:8000"}
}

// A job that waits for a human while the database refuses the task's
// write (and the lease's release) keeps waiting for the reason it had,
// its task input_required with what the requester is told (not the
// operator's reason, which names the model server), written by the job
// trying again (fails 1) or by the reconcile pass (fails 6). Before, the
// failed write sent the job to work's error path, which replaced its
// reason with the node's failure; and the reconcile showed the task the
// operator's reason.
func TestWaitWriteFails(t *testing.T) {
	for _, fails := range []int32{1, 6} {
		t.Run(endingFails[fails], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, testdb.SQLite(t))
				ctx := context.Background()
				task := r.send(t, "write a.md")
				got, logged := endingRun(t, r, nil, refusing{}, task.ID, agent.InterventionRequired, tasks.StateInputRequired, fails)
				if got.Status.State != tasks.StateInputRequired || !strings.HasPrefix(got.Status.Message, "the model server refused the node's request, on the node's side") {
					t.Fatalf("task %s %q; want input_required with what the requester is told", got.Status.State, got.Status.Message)
				}
				if strings.Contains(got.Status.Message, "10.1.2.3") {
					t.Fatalf("the task shows the operator's reason: %q", got.Status.Message)
				}
				checkTries(t, logged, fails)
				j, err := r.store.Get(ctx, task.ID)
				if err != nil || j.Status != agent.InterventionRequired || !strings.HasPrefix(j.Reason, "the model server refused the request (HTTP 401)") {
					t.Fatalf("the job: %+v %v; want %s with the model server's refusal as its reason", j, err, agent.InterventionRequired)
				}
			})
		})
	}
}

// The database refuses the write of the task's answer artifact while the
// job holds its lease (a SQLite trigger): the task is not completed
// without it. The job tries the whole write again, then leaves it to the
// reconcile pass, which completes the task with its answer and changes.
// Before, the artifact's failure was logged and the task completed
// without it.
func TestCompletionArtifactWriteFails(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r, task, _ := approvedDelete(t, nil)
		ctx := context.Background()
		r.sqlExec(t, `CREATE TRIGGER busy BEFORE UPDATE ON tasks
			WHEN NEW.artifacts LIKE '%"agent-response"%' AND OLD.artifacts NOT LIKE '%"agent-response"%'
				AND (SELECT lease_holder FROM agent_jobs WHERE task_id = NEW.id) <> ''
			BEGIN SELECT RAISE(ABORT, 'database is locked'); END`)
		const answer = "deleted gone.md"
		m := &scripted{answers: []string{proposalJSON("FINISH", map[string]any{"response": answer})}}
		var logged bytes.Buffer
		got := r.runWith(t, func(c *agent.Config) {
			c.Poll = 50 * time.Millisecond
			c.Logger = slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))
		}, m, task.ID, tasks.StateCompleted, tasks.StateInputRequired, tasks.StateFailed, tasks.StateCanceled)
		if got.Status.State != tasks.StateCompleted || got.Status.Message != answer {
			t.Fatalf("task %s %q; want completed with %q", got.Status.State, got.Status.Message, answer)
		}
		got, err := r.svc.Task(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		checkDeleteAnswered(t, got, answer)
		checkTries(t, logged.String(), 6)
	})
}

// releaseFailsRun runs, on r, the job of taskID with model m until its
// task is in to, the lease's release refused (a trigger) while the job
// is in status and its task in to: the job's ending saved and shown. It
// then lets the lease lapse and the reconcile pass run, and returns the
// task and the log's warnings.
func releaseFailsRun(t *testing.T, r *rig, set func(*agent.Config), m agent.Model, taskID string, status agent.Status, to tasks.State) (*tasks.Task, string) {
	t.Helper()
	r.sqlExec(t, `CREATE TRIGGER busy BEFORE UPDATE ON agent_jobs
		WHEN OLD.status = '`+string(status)+`' AND OLD.lease_holder <> '' AND NEW.lease_holder = ''
			AND (SELECT state FROM tasks WHERE id = OLD.task_id) = '`+string(to)+`'
		BEGIN SELECT RAISE(ABORT, 'database is locked'); END`)
	var logged bytes.Buffer
	cfg := agent.Config{Queue: r.queue, Store: r.store, Tasks: r.svc, Executor: r.exec, Model: m,
		ContextTokens: 8000, Lease: time.Second, Poll: 50 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(&logged, &slog.HandlerOptions{Level: slog.LevelWarn}))}
	if set != nil {
		set(&cfg)
	}
	rt, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	for start := time.Now(); ; {
		// Every goroutine of the bubble idle: the job's step is over.
		synctest.Wait()
		got, err := r.svc.Task(ctx, taskID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.State == to {
			break
		}
		if time.Since(start) > time.Minute {
			t.Fatalf("task %s %q; want %s", got.Status.State, got.Status.Message, to)
		}
		time.Sleep(cfg.Poll)
	}
	// The lease lapses; reconcile passes run.
	time.Sleep(3 * cfg.Lease)
	synctest.Wait()
	cancel()
	<-done
	got, err := r.svc.Task(context.Background(), taskID)
	if err != nil {
		t.Fatal(err)
	}
	return got, logged.String()
}

// The database refuses the release of the job's lease once its ending
// (a success, a halt, a wait for a human) is saved and its task shows it
// (a trigger): the job stays as it ended, and so does its task; the
// failure is logged and the lease left to lapse, after which the
// reconcile pass has nothing to do. Before, end returned the release's
// error, and work's error path saved the job waiting for a human over
// its success or halt, or with the node's failure over its wait's reason.
func TestReleaseFailsAfterEnding(t *testing.T) {
	const answer = "done, nothing to change"
	cases := []struct {
		name   string
		set    func(*agent.Config)
		model  func() agent.Model
		status agent.Status
		to     tasks.State
		reason string // the job's reason, its prefix for a wait
		shown  string // the task's status message, its prefix for a wait
	}{
		{"success", nil, func() agent.Model {
			return &scripted{answers: []string{proposalJSON("FINISH", map[string]any{"response": answer})}}
		}, agent.Success, tasks.StateCompleted, answer, answer},
		{"halt", func(c *agent.Config) { c.MaxSteps = 1 }, func() agent.Model {
			return &scripted{answers: []string{proposalJSON("WRITE_FILE", map[string]any{"path": "/sandbox/a.md", "content": "a\n"})}}
		}, agent.HaltedTime, tasks.StateFailed, "halted (HALTED_TIME): max_steps reached: 1 of at most 1", "halted (HALTED_TIME): max_steps reached: 1 of at most 1"},
		{"wait", nil, func() agent.Model { return refusing{} }, agent.InterventionRequired, tasks.StateInputRequired,
			"the model server refused the request (HTTP 401)", "the model server refused the node's request, on the node's side"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, testdb.SQLite(t))
				ctx := context.Background()
				task := r.send(t, "write a.md")
				got, logged := releaseFailsRun(t, r, c.set, c.model(), task.ID, c.status, c.to)
				if got.Status.State != c.to || !strings.HasPrefix(got.Status.Message, c.shown) {
					t.Fatalf("task %s %q; want %s %q", got.Status.State, got.Status.Message, c.to, c.shown)
				}
				j, err := r.store.Get(ctx, task.ID)
				if err != nil || j.Status != c.status || !strings.HasPrefix(j.Reason, c.reason) {
					t.Fatalf("the job: %+v %v; want %s %q", j, err, c.status, c.reason)
				}
				if n := strings.Count(logged, "lease could not be given up"); n != 1 || strings.Contains(logged, "job failed") {
					t.Fatalf("the release's failure logged %d times (want once), the job failed: %v; logged:\n%s", n, strings.Contains(logged, "job failed"), logged)
				}
			})
		})
	}
}

// A job whose model proposes to delete a file, held for the operator,
// while the database refuses the task's write: the task waits
// (input_required) with the hold's note and the diff of the held delete
// for the operator and the requester to read, written by the job trying
// again (fails 1) or by the reconcile pass, which makes the diff from the
// executor's record of the held action (fails 6). Before, the reconcile
// showed the note without the diff.
func TestHeldWaitWriteFails(t *testing.T) {
	for _, fails := range []int32{1, 6} {
		t.Run(endingFails[fails], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newRig(t, testdb.SQLite(t))
				ctx := context.Background()
				if err := os.WriteFile(filepath.Join(r.dir, "gone.md"), []byte("bye\n"), 0o600); err != nil {
					t.Fatal(err)
				}
				task := r.send(t, "delete gone.md")
				m := &scripted{answers: []string{proposalJSON("DELETE_FILE", map[string]any{"path": "/sandbox/gone.md"})}}
				got, logged := endingRun(t, r, nil, m, task.ID, agent.InterventionRequired, tasks.StateInputRequired, fails)
				held, err := r.exec.Pending(ctx, task.ID)
				if err != nil || len(held) != 1 {
					t.Fatalf("held: %+v %v", held, err)
				}
				if note := "confirmation needed for action " + held[0].ActionID; got.Status.State != tasks.StateInputRequired || !strings.HasPrefix(got.Status.Message, note) {
					t.Fatalf("task %s %q; want input_required %q…", got.Status.State, got.Status.Message, note)
				}
				checkTries(t, logged, fails)
				var diffs []string
				for _, a := range got.Artifacts {
					if strings.HasPrefix(a.ArtifactID, "pending-") && a.Name == "changes awaiting confirmation of action "+held[0].ActionID &&
						len(a.Parts) == 1 && a.Parts[0].Text != nil && a.Parts[0].MediaType == "text/x-diff" {
						diffs = append(diffs, *a.Parts[0].Text)
					}
				}
				if len(diffs) != 1 || diffs[0] != held[0].Diff || !strings.Contains(diffs[0], "-bye") {
					t.Fatalf("the held delete's diffs on the task: %q; want one, %q (artifacts %+v)", diffs, held[0].Diff, got.Artifacts)
				}
			})
		})
	}
}
