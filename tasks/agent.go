package tasks

import (
	"context"
	"errors"
	"fmt"
	"github.com/snapnode/snapnode/internal/textcut"
)

// Agent works on the tasks whose messages carry no proposal: free text (and
// data that is not a proposal) is a job for a model or a worker, not for the
// executor. It is the seam between the task engine and the agent runtime
// (package agent).
//
// The contract:
//   - Take is called by the Service after a message without proposals
//     created task t (state submitted) or continued it (the message is the
//     last of t.History; a task that waited for input is working again).
//   - Take records the job durably before it returns (a crash after Take
//     returns loses nothing) and does not wait for the work: the agent
//     drives the task later, through the Service, to a terminal state or to
//     input_required.
//   - A *Refusal means the agent will not take the task (none is
//     configured, it is full): the Service fails the task at once with the
//     refusal's reason, so the requester gets an answer, never a task that
//     waits for ever. Any other error is the agent's own failure: the task
//     fails with a generic note and the error is logged.
type Agent interface {
	Take(ctx context.Context, t *Task) error
}

// Refusal is an Agent's refusal of a task, with the reason the task fails
// with (at most MaxStatusMessage bytes are kept).
type Refusal struct{ Reason string }

func (r *Refusal) Error() string { return "agent refused the task: " + r.Reason }

// Screener is implemented by an Agent that knows, before a new task is
// stored, that it will refuse it (a node without an agent refuses every
// free-text task). Screen returns the *Refusal that Take would return
// for any new task, or nil when Take must be asked. A new task without
// proposals is then created failed with the refusal's reason, in one
// write instead of two, and Take is not called; a continued task still
// goes through Take.
type Screener interface {
	Screen() *Refusal
}

// Admitter is implemented by an Agent whose queue is bounded. Admit is
// asked before a new task without proposals is stored, and returns a
// *snap.Error (5002, 5003, with retryAfter) when requester's task would
// not fit: the request gets it and no task is made, rather than one that
// waits without end. Else the task counts as admitted until release is
// called, once Take has been asked about it or it was not made, so that
// requests handled at once do not all fit in the same room. A message to
// an existing task is not asked about. known reports whether requester
// is a peer the node knows (see Service.Known), with a query: Admit asks
// it only when the answer decides.
type Admitter interface {
	Admit(ctx context.Context, requester string, known func() bool) (release func(), err error)
}

// screen is the agent's refusal of every new free-text task, if it
// declares one (Screener).
func (s *Service) screen() *Refusal {
	if sc, ok := s.agent.(Screener); ok {
		return sc.Screen()
	}
	return nil
}

// delegate hands t, which a message without proposals created or
// continued, to the agent. A refusal fails the task at once with its reason
// when nothing would ever work on it: a new task, or a continued one left
// working. The agent's own failure fails a new task (no job was recorded
// for it); on a continued task it is returned, and the task stays as it
// is, the message in its history (a request answers with it: Committed).
func (s *Service) delegate(ctx context.Context, t *Task, created bool) (*Task, error) {
	if s.agent == nil || t.Status.State.Terminal() {
		return t, nil
	}
	err := s.agent.Take(ctx, t)
	if err == nil {
		return t, nil
	}
	var r *Refusal
	note := "internal error: the agent could not take the task"
	switch {
	case errors.As(err, &r):
		note = r.Reason
	case !created:
		return nil, fmt.Errorf("tasks: agent: %w", err)
	default:
		s.log.Error("tasks: agent failed to take a task", "task", t.ID, "err", err)
	}
	if created || t.Status.State == StateWorking {
		return s.Transition(ctx, t.ID, StateFailed, textcut.Prefix(note, MaxStatusMessage))
	}
	return t, nil
}

// Progress records a note on a task that stays in its state (a step of
// the agent's work): subscribers get a status event with it. A terminal
// task gives ErrTerminal; a missing one a *snap.Error 1001.
func (s *Service) Progress(ctx context.Context, taskID, note string) (*Task, error) {
	return s.change(ctx, taskID, func(cur *Task) (*Task, error) {
		if cur.Status.State.Terminal() {
			return nil, fmt.Errorf("tasks: progress of %s: %w", taskID, ErrTerminal)
		}
		return s.setStatus(ctx, cur, cur.Status.State, textcut.Prefix(note, MaxStatusMessage), "progress")
	})
}

// Task returns the task with the id, whoever owns it, for a worker; a
// missing task is a *snap.Error 1001.
func (s *Service) Task(ctx context.Context, taskID string) (*Task, error) {
	t, err := s.store.Get(ctx, taskID)
	if errors.Is(err, ErrNotFound) {
		return nil, notFound(taskID)
	}
	if err != nil {
		return nil, fmt.Errorf("tasks: %w", err)
	}
	return t, nil
}
