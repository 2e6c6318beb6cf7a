package agent_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// failFollowUp is the agent's seam (tasks.Agent) failing the Take of the
// next follow-up message (a task of more than one message) once, as a
// database that is busy when the job is told would: the message is in
// the task's history, its request answered (tasks.Service.Committed).
type failFollowUp struct {
	tasks.Agent
	failed atomic.Bool
}

func (f *failFollowUp) Take(ctx context.Context, t *tasks.Task) error {
	if len(t.History) > 1 && f.failed.CompareAndSwap(false, true) {
		return errors.New("database is locked")
	}
	return f.Agent.Take(ctx, t)
}

// withFailingFollowUp gives r a task service whose agent fails the Take
// of the next follow-up once.
func withFailingFollowUp(r *rig) *failFollowUp {
	f := &failFollowUp{Agent: r.queue}
	r.svc = tasks.NewService(r.ts, tasks.ServiceOptions{Agent: f})
	return f
}

// A requester's reply to a job waiting for input, whose hand-over to the
// agent failed after the message was stored, reaches the job: the
// runtime's reconcile gives the job the messages of its task it was not
// given. Before, the task stayed working and the job waiting for ever:
// the proposals' reconcile leaves the agent's tasks to it, and it did not
// compare the task's messages with what the job was told.
func TestReplyWhoseTakeFailedReachesTheJob(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		f := withFailingFollowUp(r)
		m := &scripted{answers: []string{`{"action":"STUCK","evidence_files":[],"summary_for_supervisor":"which file?"}`}}
		task := r.send(t, "write the report")
		if got := r.run(t, m, task.ID, tasks.StateInputRequired, tasks.StateCompleted, tasks.StateFailed); got.Status.State != tasks.StateInputRequired {
			t.Fatalf("task %s %q; want input_required", got.Status.State, got.Status.Message)
		}
		got := fuSend(t, r, task.ID, "use notes.md")
		if !f.failed.Load() || got.Status.State != tasks.StateWorking {
			t.Fatalf("the reply was answered with the task %s (its Take failed: %v); want working", got.Status.State, f.failed.Load())
		}
		m.mu.Lock()
		m.answers = append(m.answers, finishAnswer)
		m.mu.Unlock()
		if got := r.run(t, m, task.ID, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
			t.Fatalf("task %s %q; want completed", got.Status.State, got.Status.Message)
		}
		m.mu.Lock()
		defer m.mu.Unlock()
		if last := m.prompts[len(m.prompts)-1]; !strings.Contains(last[len(last)-1].Content, "use notes.md") {
			t.Fatalf("the job's last call was not told the reply: %q", last[len(last)-1].Content)
		}
	})
}

// A further message on a job at work, whose hand-over to the agent failed
// after the message was stored, is told to the model at the job's next
// step, as one handed over is. Before, the job never saw it.
func TestFollowUpWhoseTakeFailedReachesTheJob(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		n := newRig(t, dsn)
		f := withFailingFollowUp(n)
		m := &fuModel{first: make(chan struct{}), release: make(chan struct{})}
		task := fuStart(t, n, m, agent.Config{ContextTokens: 8000}, "write a report on notes.md")
		fuSend(t, n, task.ID, "and be brief")
		if !f.failed.Load() {
			t.Fatal("the follow-up's Take did not fail")
		}
		prompts := fuFinish(t, n, m, task.ID)
		var told bool
		for _, msg := range prompts[1] {
			told = told || strings.Contains(msg.Content, "and be brief")
		}
		if !told {
			t.Error("the second call was not told the follow-up message")
		}
	})
}

// readCounter is the task service counting the whole reads of a task
// (Task), each decoding its history, artifacts and metadata.
type readCounter struct {
	*tasks.Service
	reads atomic.Int64
}

func (c *readCounter) Task(ctx context.Context, taskID string) (*tasks.Task, error) {
	c.reads.Add(1)
	return c.Service.Task(ctx, taskID)
}

// A step reads its task once: the read that checks, before its action
// runs, that the task was not canceled also gives the job the task's
// messages it missed, for the next call. Before, each call read and
// decoded the whole task a second time for them.
func TestStepReadsTheTaskOnlyForAMessageMissed(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		const steps = 8
		m := &writer{steps: steps}
		task := r.send(t, "write some files")
		c := &readCounter{Service: r.svc}
		// A lease of a minute: its keeper's reads stay out of the count.
		got := r.runWith(t, func(cfg *agent.Config) { cfg.Tasks, cfg.Lease = c, time.Minute }, m, task.ID, tasks.StateCompleted, tasks.StateFailed)
		if got.Status.State != tasks.StateCompleted {
			t.Fatalf("task %s %q; want completed", got.Status.State, got.Status.Message)
		}
		if calls := m.calls.Load(); calls != steps {
			t.Fatalf("%d model calls; want %d", calls, steps)
		}
		// steps-1 actions, each read once, and a few reads at the job's
		// start and end.
		if n := c.reads.Load(); n >= 2*(steps-1) {
			t.Errorf("%d whole reads of the task in a job of %d steps (%d actions); want one an action", n, steps, steps-1)
		}
	})
}
