package agent_test

import (
	"context"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

// answersCanceledWith is answersCanceled answering text.
type answersCanceledWith struct {
	text   string
	cancel func(id string)
	done   chan struct{}
}

func (m *answersCanceledWith) Complete(ctx context.Context, p agent.Prompt) (*agent.Completion, error) {
	m.cancel(p.Job.JobID)
	<-ctx.Done()
	defer close(m.done)
	return &agent.Completion{Text: m.text, PromptTokens: 10, CompletionTokens: 10}, nil
}

// Whatever the answer that came once the job was canceled (an agent
// response: COMPLETED, STUCK, RETRY; not only a proposal), it is the step
// the cancel gave up, in the history with its kind and action and the
// job's end, CANCELED.
func TestCanceledAnyAnswerInHistory(t *testing.T) {
	for name, text := range map[string]string{
		"completed": fuDone,
		"stuck":     `{"action":"STUCK","evidence_files":[],"summary_for_supervisor":"no way on"}`,
		"retry":     `{"action":"RETRY","evidence_files":[],"summary_for_supervisor":"once more"}`,
	} {
		t.Run(name, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, dsn string) {
				r := newRig(t, dsn)
				id := r.send(t, "answered "+name+" once canceled").ID
				m := &answersCanceledWith{text: text, done: make(chan struct{}), cancel: func(id string) {
					if _, err := taskstest.Cancel(context.Background(), r.svc, "alice", []byte(`{"taskId":"`+id+`"}`)); err != nil {
						t.Error(err)
					}
				}}
				rt, stop := r.runtimeOn(t, m, nil)
				<-m.done
				waitIdle(rt)
				stop()
				h, it := givenUpStep(t, r, id)
				if h.Status != agent.Canceled {
					t.Errorf("job status %s; want %s", h.Status, agent.Canceled)
				}
				if it.Response.Kind != agent.KindAgentResponse || it.Response.NewStatus != agent.Canceled || it.Response.PromptTokens != 10 ||
					it.Observation == nil || it.Observation.Outcome != agent.ObsNone {
					t.Errorf("step %+v, observation %+v; want the %s answer, not acted on, new status CANCELED, its usage", it.Response, it.Observation, name)
				}
				if err := agent.Replay(h, 64<<10); err != nil {
					t.Errorf("the history does not replay: %v", err)
				}
			})
		})
	}
}
