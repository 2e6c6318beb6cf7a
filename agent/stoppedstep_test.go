package agent_test

import (
	"context"
	"sync"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
)

// stopsFirst blocks its first call until the node stops it, and answers
// COMPLETED after: it records the step each call was made for.
type stopsFirst struct {
	mu      sync.Mutex
	steps   []int
	started chan struct{}
}

func (m *stopsFirst) Complete(ctx context.Context, p agent.Prompt) (*agent.Completion, error) {
	m.mu.Lock()
	m.steps = append(m.steps, p.Step)
	first := len(m.steps) == 1
	m.mu.Unlock()
	if first {
		close(m.started)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return &agent.Completion{Text: fuDone, PromptTokens: 10, CompletionTokens: 10}, nil
}

// A step the node's stop interrupted (not a cancel) is not written: it is
// made again, under the same sequence, once the job is taken up, and the
// history holds it once, as that call answered.
func TestStoppedStepMadeAgainOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		id := r.send(t, "stopped in a step").ID
		m := &stopsFirst{started: make(chan struct{})}
		stop := r.startRuntime(t, m, 1, 0)
		<-m.started
		stop()
		if its, err := r.store.Interactions(t.Context(), id); err != nil || len(its) != 0 {
			t.Fatalf("after the stop: %d interactions, %v; want none", len(its), err)
		}
		r.completes(t, nil, m, id)
		h, err := r.store.History(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if len(h.Interactions) != 1 || h.Interactions[0].Response.Kind != agent.KindAgentResponse || h.Interactions[0].Response.NewStatus != agent.Success {
			t.Fatalf("history %+v; want the completion alone", h.Interactions)
		}
		if m.steps[0] != 0 || m.steps[1] != 0 {
			t.Errorf("calls for steps %v; want step 0 made again", m.steps)
		}
		if err := agent.Replay(h, 64<<10); err != nil {
			t.Errorf("the history does not replay: %v", err)
		}
	})
}
