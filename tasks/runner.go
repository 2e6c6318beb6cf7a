package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/snap"
)

// MaxProposals bounds the proposals one message may carry.
const MaxProposals = 16

// Runner carries out the proposals a message carries: the node's executor,
// which knows nothing of SNAP or of tasks. The Service calls Run with the
// task working, adds the Outcome's artifacts and moves the task to its
// state. Run must return within its context's deadline; an error is the
// Runner's own failure (the task fails with a note, the peer sees no
// detail), not a rejected proposal, which is an Outcome; an error wrapping
// ErrNotYet leaves the task working (see ErrNotYet).
type Runner interface {
	Run(ctx context.Context, job Job) (Outcome, error)
}

// ErrNotYet is what a Runner returns, wrapped, when a resumed Job's
// outcome cannot be told yet: a proposal carried out before the stop has
// no outcome in its record yet (a write still being promoted, which the
// executor's recovery is to undo). The task is left working (a submitted
// one was moved to working before the Runner ran, as for any run), and
// Resume returns the error: a later Resume takes it up again.
var ErrNotYet = errors.New("the outcome of a proposal that ran is not settled yet")

// Job is the work of one message.
type Job struct {
	TaskID    string
	Requester string
	// Proposals are the message's data parts that are proposals or
	// action descriptors (see Proposals), in order.
	Proposals []json.RawMessage
	// Resumed is set when a node that stopped mid-run takes the job up
	// again (Service.Resume): some proposals may have been carried out
	// since Since, and the Runner must report those from its records
	// rather than carry them out a second time. Since is when the task
	// was created: an action held for an operator was recorded when it
	// was held, and the stop may have come after the operator's approval
	// carried it out, once the task was working again.
	Resumed bool
	Since   time.Time
}

// Outcome is what a Runner made of a Job.
type Outcome struct {
	// State is StateCompleted, StateFailed or StateInputRequired (a
	// Store's Apply also takes StateWorking, a step's progress, and "",
	// StateKept).
	State State
	// Note is the status message (at most MaxStatusMessage bytes).
	Note      string
	Artifacts []Artifact
	// Replace holds artifacts that take the place of the task's
	// artifacts of the same ids, where they stand: what became of
	// something an earlier outcome showed (a held action's changes,
	// once decided). One the task does not have is added, as Artifacts
	// are; one equal to the task's changes nothing.
	Replace []Artifact
	// At is when the outcome was reached, the time of its status; zero
	// means now by the Service's clock.
	At time.Time
}

// StateKept is the State of an Outcome that changes the task's artifacts
// only (Outcome.Artifacts, Outcome.Replace): the task keeps its status,
// and no status event is recorded.
const StateKept State = ""

// Proposals returns the data parts of m that the executor judges:
// proposals and action descriptors, as proposal.Classify tells them from
// plain data. A part with a proposal's action and args but no
// schema_version is one of them, so that it is refused naming the missing
// version rather than ignored as data.
func Proposals(m Message) []json.RawMessage {
	var out []json.RawMessage
	for _, p := range m.Parts {
		if len(p.Data) > 0 && proposal.Classify(p.Data) != proposal.FormatData {
			out = append(out, p.Data)
		}
	}
	return out
}

// checkProposals refuses a message with more proposals (Proposals of it)
// than MaxProposals.
func checkProposals(proposals []json.RawMessage) error {
	if n := len(proposals); n > MaxProposals {
		return snap.FieldError(root+".message.parts", "maxProposals", MaxProposals, n)
	}
	return nil
}

// run hands the proposals of job, which is t's, to the runner, with t
// working, and applies the outcome. Without a runner or proposals, t is
// returned as it is.
func (s *Service) run(ctx context.Context, t *Task, job Job) (*Task, error) {
	props := job.Proposals
	if s.runner == nil || len(props) == 0 || t.Status.State.Terminal() || t.Status.State == StateInputRequired {
		return t, nil
	}
	if t.Status.State == StateSubmitted {
		var err error
		if t, err = s.Transition(ctx, t.ID, StateWorking, "running "+plural(len(props), "proposal")); err != nil {
			return nil, err
		}
	}
	out, err := s.runner.Run(ctx, job)
	if errors.Is(err, ErrNotYet) {
		return nil, err
	}
	if err != nil {
		s.log.Error("tasks: runner failed", "task", t.ID, "err", err)
		out = Outcome{State: StateFailed, Note: "internal error while running the proposals"}
	}
	return s.Resolve(ctx, t.ID, out)
}

// Resume takes up a task that a node stopped (a crash, a kill) left
// submitted or working, so that it ends or waits as if the node had not
// stopped: the proposals of its last message go to the Runner again as a
// resumed Job (it reports what already ran from its records and carries
// out the rest); a message without proposals goes to the Agent, as when
// it arrived. Any other task is returned as it is. A missing task is
// 1001. A Runner that cannot tell the outcome yet leaves the task working
// (an error wrapping ErrNotYet).
func (s *Service) Resume(ctx context.Context, taskID string) (*Task, error) {
	t, err := s.Task(ctx, taskID)
	if err != nil {
		return nil, err
	}
	if st := t.Status.State; (st != StateSubmitted && st != StateWorking) || len(t.History) == 0 {
		return t, nil
	}
	msg := t.History[len(t.History)-1]
	props := Proposals(msg)
	if len(props) == 0 {
		return s.delegate(ctx, t, len(t.History) == 1)
	}
	if s.runner == nil {
		return t, nil
	}
	return s.run(ctx, t, Job{TaskID: t.ID, Requester: t.Owner, Proposals: props, Resumed: true, Since: t.CreatedAt})
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
