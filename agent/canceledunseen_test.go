package agent_test

import (
	"context"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

// unheardTasks is the task service whose events the runtime does not
// hear: a task's cancel reaches a job only when the job reads its task
// (or at a lease renewal), as a cancel another process made does.
type unheardTasks struct {
	*tasks.Service
	events *tasks.Broker
}

func (u unheardTasks) Events() *tasks.Broker { return u.events }

// answersOnce cancels its job's task and answers at once: the answer
// comes before the cancel reached the job's context.
type answersOnce struct {
	cancel func(id string)
	done   chan struct{}
}

func (m *answersOnce) Complete(ctx context.Context, p agent.Prompt) (*agent.Completion, error) {
	m.cancel(p.Job.JobID)
	close(m.done)
	return &agent.Completion{Text: fuThink, PromptTokens: 10, CompletionTokens: 10}, nil
}

// An answer that comes once the task was canceled, but before its cancel
// reached the job's context (the job learns it from its read of the
// task), is the step the cancel gave up, written with the job's end,
// CANCELED, as when the cancel came first. Before, the job returned
// without writing anything: the answer, paid for, was lost, and the job
// stayed RUNNING, leased, until a reconcile pass or another claim ended
// it without the step.
func TestCanceledAnswerBeforeTheJobHeard(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		id := r.send(t, "canceled, unheard").ID
		m := &answersOnce{done: make(chan struct{}), cancel: func(id string) {
			if _, err := taskstest.Cancel(context.Background(), r.svc, "alice", []byte(`{"taskId":"`+id+`"}`)); err != nil {
				t.Error(err)
			}
		}}
		rt, stop := r.runtimeOn(t, m, func(cfg *agent.Config) {
			cfg.Tasks = unheardTasks{Service: r.svc, events: tasks.NewBroker(0)}
			cfg.Lease = time.Hour // no renewal reads the task during the test
		})
		<-m.done
		waitIdle(rt)
		stop()
		h, it := givenUpStep(t, r, id)
		if h.Status != agent.Canceled {
			t.Errorf("job status %s; want %s", h.Status, agent.Canceled)
		}
		if it.Response.Kind != agent.KindProposal || it.Response.NewStatus != agent.Canceled ||
			it.Observation == nil || it.Observation.Outcome != agent.ObsNone {
			t.Errorf("step %+v, observation %+v; want the THINK proposal, not acted on, new status CANCELED", it.Response, it.Observation)
		}
		if it.Response.PromptTokens != 10 {
			t.Errorf("the answer's usage is not counted: %+v", it.Response)
		}
		if err := agent.Replay(h, 64<<10); err != nil {
			t.Errorf("the history does not replay: %v", err)
		}
	})
}

// waitIdle waits, a while at most, until rt works on no job.
func waitIdle(rt *agent.Runtime) {
	for deadline := time.Now().Add(10 * time.Second); rt.Running() > 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
	}
}
