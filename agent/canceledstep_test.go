package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

// A step given up because its job was canceled is in the job's history:
// one interaction of kind canceled, with the request that was sent, the
// error saying why (a delegate's cancel of its task, when its model said
// so), and the job's status after it, CANCELED. It is written once: a
// node started again on the store does not write it again. Before, the
// history ended with the step before, and only the log told of the call
// in flight when the job was canceled.
func TestCanceledStepInHistory(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		m := newElsewhere(true)
		id := r.send(t, "canceled in a step").ID
		stop := r.startRuntime(t, m, 1, 0)
		<-m.stepped
		if _, err := taskstest.Cancel(context.Background(), r.svc, "alice", []byte(`{"taskId":"`+id+`"}`)); err != nil {
			t.Fatal(err)
		}
		m.next(t) // the job's end is written before its work elsewhere is canceled
		stop()
		check := func(t *testing.T) {
			t.Helper()
			h, it := givenUpStep(t, r, id)
			if it.Response.Kind != agent.KindCanceled || it.Response.Status != agent.ResponseError ||
				it.Response.NewStatus != agent.Canceled || !strings.Contains(it.Response.Error, "context canceled") || it.Sequence != 0 || it.Timestamp.IsZero() {
				t.Errorf("step %+v; want kind canceled, ERROR, new status CANCELED, with its error and time", it.Response)
			}
			if len(it.Request.Messages) == 0 {
				t.Errorf("the canceled step keeps no request; want what was sent")
			}
			if err := agent.Replay(h, 64<<10); err != nil {
				t.Errorf("the history does not replay: %v", err)
			}
			if h.Status != agent.Canceled {
				t.Errorf("job status %s; want %s", h.Status, agent.Canceled)
			}
		}
		check(t)
		// Started again (noCancelAgain runs a node until its first
		// reconcile pass is done): the step is not written twice.
		m.noCancelAgain(t, r)
		check(t)
	})
}

// answersCanceled is a Model whose one step cancels its job's task and,
// once the job's context ends for it, answers all the same: an answer
// that comes, paid for, after the job was canceled.
type answersCanceled struct {
	cancel func(id string)
	done   chan struct{}
}

func (m *answersCanceled) Complete(ctx context.Context, p agent.Prompt) (*agent.Completion, error) {
	m.cancel(p.Job.JobID)
	<-ctx.Done()
	defer close(m.done)
	return &agent.Completion{Text: fuThink, PromptTokens: 10, CompletionTokens: 10}, nil
}

// An answer that came once its job was canceled, and so was not acted
// on, is in the job's history: its kind and action, an observation of
// none saying why, and the job's status after it, CANCELED. Before, it
// was dropped: the history did not show the answer paid for.
func TestCanceledAnswerInHistory(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		id := r.send(t, "answered once canceled").ID
		m := &answersCanceled{done: make(chan struct{}), cancel: func(id string) {
			if _, err := taskstest.Cancel(context.Background(), r.svc, "alice", []byte(`{"taskId":"`+id+`"}`)); err != nil {
				t.Error(err)
			}
		}}
		stop := r.startRuntime(t, m, 1, 0)
		<-m.done
		stop() // the job's end is written before the runtime stops
		h, it := givenUpStep(t, r, id)
		if it.Response.Kind != agent.KindProposal || it.Response.Action != "THINK" || it.Response.NewStatus != agent.Canceled ||
			it.Observation == nil || it.Observation.Outcome != agent.ObsNone || !strings.Contains(it.Observation.Reason, "canceled") {
			t.Errorf("step %+v, observation %+v; want the THINK proposal, not acted on because canceled, new status CANCELED", it.Response, it.Observation)
		}
		if err := agent.Replay(h, 64<<10); err != nil {
			t.Errorf("the history does not replay: %v", err)
		}
	})
}
