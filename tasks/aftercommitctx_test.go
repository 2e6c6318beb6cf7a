package tasks

import (
	"context"
	"testing"
)

// goneAfterCreate is a store that cancels the request's context once
// the task's write returns: the requester's connection dropped right
// after the commit.
type goneAfterCreate struct {
	Store
	gone context.CancelFunc
}

func (s *goneAfterCreate) Create(ctx context.Context, t *Task) (*Task, error) {
	defer s.gone()
	return s.Store.Create(ctx, t)
}

// ctxAgent takes a task unless its context has ended, as a queue on a
// database would fail its write then.
type ctxAgent struct{ taken int }

func (a *ctxAgent) Take(ctx context.Context, _ *Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	a.taken++
	return nil
}

// ctxRunner completes a run unless its context has ended.
type ctxRunner struct{}

func (ctxRunner) Run(ctx context.Context, _ Job) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return Outcome{}, err
	}
	return Outcome{State: StateCompleted, Note: "done"}, nil
}

// The steps after a request's commit (the agent's Take, the run of its
// proposals) are the node's work, not the requester's: a requester that
// goes away once its task is stored (an HTTP connection dropped) does not
// stop them, and its task is taken or run at once rather than left for
// the reconcile pass minutes later. The node's lifetime
// (ServiceOptions.Lifetime) still stops them. Before, they ran on the
// request's context and failed with it.
func TestStepsAfterTheCommitOutliveTheRequester(t *testing.T) {
	for _, c := range []struct {
		name    string
		payload string
	}{
		{"free text", send(`{"text":"summarise notes.md"}`)},
		{"a proposal", proposalMessage(writeProposal)},
	} {
		t.Run(c.name, func(t *testing.T) {
			for _, stopping := range []bool{false, true} {
				life, stop := context.WithCancel(context.Background())
				if stopping {
					stop() // the node stops
				}
				a := &ctxAgent{}
				s, mem := newService(t, ServiceOptions{Agent: a, Runner: ctxRunner{}, Lifetime: life})
				ctx, gone := context.WithCancel(context.Background())
				s.store = &goneAfterCreate{Store: mem, gone: gone}
				got, err := sendJSON(ctx, s, alice, []byte(c.payload))
				stop()
				if err != nil {
					t.Fatal(err)
				}
				free := c.name == "free text"
				switch {
				case !stopping && free && (a.taken != 1 || got.Status.State != StateSubmitted):
					t.Errorf("the requester gone: the agent took the task %d times, task %s; want taken, submitted", a.taken, got.Status.State)
				case !stopping && !free && got.Status.State != StateCompleted:
					t.Errorf("the requester gone: task %s %q; want completed", got.Status.State, got.Status.Message)
				case stopping && (a.taken != 0 || got.Status.State == StateCompleted):
					t.Errorf("the node stopping: taken %d times, task %s; want neither taken nor run", a.taken, got.Status.State)
				}
			}
		})
	}
}
