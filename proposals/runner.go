package proposals

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/tasks"
)

// The points of a proposal's life at which a Pause hook is called (crash
// tests stop the process there).
const (
	// PointRun is before each proposal goes to the executor.
	PointRun = "run"
	// PointRan is once the executor returned its result (a write
	// promoted and recorded), before the task is updated.
	PointRan = "ran"
	// PointApproving is once a decision was checked against its task
	// and held action, before the executor carries it out.
	PointApproving = "approving"
	// PointDecided is once an operator's approval or denial was carried
	// out, before the task is updated.
	PointDecided = "decided"
)

// Executor is what this package needs of the executor
// (*executor.Executor): Run carries a proposal out, Actions and Pending
// read its records of a task, Approve, Deny and Rollback carry out the
// operator's decisions, RecoverInterruptedWith finishes what a crash
// interrupted. Each is safe for concurrent use.
type Executor interface {
	Run(ctx context.Context, req executor.Request) (*executor.Result, error)
	Actions(ctx context.Context, taskID string) ([]executor.Action, error)
	Pending(ctx context.Context, taskID string) ([]executor.Pending, error)
	// PendingPage is a page of them, with how many there are in all;
	// with maxDiff > 0 it ends at the first whose diff brings the page's
	// past maxDiff bytes, reading none after it.
	PendingPage(ctx context.Context, taskID, after string, limit, maxDiff int) ([]executor.Pending, int, error)
	// PendingAction is one of them (executor.ErrNoPending when it is not).
	PendingAction(ctx context.Context, actionID string) (*executor.Pending, error)
	ApproveThen(ctx context.Context, actionID, approver string, before func(context.Context, *sql.Tx) error, then executor.Then) (*executor.Result, error)
	DiffTx(ctx context.Context, tx *sql.Tx, actionID string) (string, error)
	DenyThen(ctx context.Context, actionID, approver, reason string, then executor.Then) (*executor.Result, error)
	Rollback(ctx context.Context, actionID string) error
	Recoverer
}

var _ Executor = (*executor.Executor)(nil)

// Runner carries out the proposals of a task's messages: it is the task
// service's tasks.Runner. It needs the executor only, so that the task
// service can be built on it before the rest of the lifecycle (New).
type Runner struct {
	exec   Executor
	logger *slog.Logger
	// pause, nil but in crash tests, is called at PointRun and PointRan.
	pause func(point string)
}

var _ tasks.Runner = (*Runner)(nil)

// NewRunner returns the Runner of exec. pause, nil but in crash tests,
// is called at PointRun and PointRan; a nil logger discards.
func NewRunner(exec Executor, logger *slog.Logger, pause func(point string)) *Runner {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Runner{exec: exec, logger: logger, pause: pause}
}

// Run implements tasks.Runner. A message's proposals run in order; the
// first that fails or needs confirmation stops the run, and the proposals
// after it are not carried out (the note says so).
//
// A resumed job (the node stopped while it ran) never carries a proposal
// out twice: one the executor recorded for the task since the task began
// (the same data) is reported from that record (see executor.Action.Result);
// one it did not record either never ran or had no effects (a read, a
// refusal), and runs now. A record still promoting has no outcome yet:
// Run returns an error wrapping tasks.ErrNotYet and the task is left as
// it is.
func (r *Runner) Run(ctx context.Context, job tasks.Job) (tasks.Outcome, error) {
	out := tasks.Outcome{State: tasks.StateCompleted}
	var notes []string
	var ran []executor.Action // a resumed job's recorded actions
	if job.Resumed {
		acts, err := r.exec.Actions(ctx, job.TaskID)
		if err != nil {
			return tasks.Outcome{}, err
		}
		for _, a := range acts {
			// Timestamps of the task and of the executor may differ in
			// precision: a second's slack.
			if !a.Created.Before(job.Since.Add(-time.Second)) {
				ran = append(ran, a)
			}
		}
	}
	for i, data := range job.Proposals {
		res, err := r.runOnce(ctx, job, data, &ran)
		if err != nil {
			return tasks.Outcome{}, err
		}
		out.Artifacts = append(out.Artifacts, Artifacts(res)...)
		skipped := ""
		if rest := len(job.Proposals) - i - 1; rest > 0 && res.Outcome != executor.Completed {
			skipped = fmt.Sprintf(" (%d later proposal(s) not run)", rest)
		}
		switch res.Outcome {
		case executor.Failed:
			out.State, out.Note = tasks.StateFailed, res.Reason+skipped
			return out, nil
		case executor.NeedsConfirmation:
			out.State, out.Note = tasks.StateInputRequired, ConfirmationNote(res)+skipped
			return out, nil
		}
		if res.Response != "" {
			notes = append(notes, res.Response)
		}
	}
	if len(notes) > 0 {
		out.Note = notes[len(notes)-1]
	}
	return out, nil
}

// runOnce runs one proposal of job, unless it is among ran (the actions a
// resumed job's proposals were recorded as), which it then reports and
// takes out of ran. A record still promoting has no outcome yet (the
// executor's recovery undoes it and records it failed, unless its
// promotion is still being recorded): runOnce returns an error wrapping
// tasks.ErrNotYet, and the task is left as it is for a later pass.
func (r *Runner) runOnce(ctx context.Context, job tasks.Job, data []byte, ran *[]executor.Action) (*executor.Result, error) {
	for i, a := range *ran {
		if bytes.Equal(a.Data, data) {
			if a.State == "promoting" {
				return nil, fmt.Errorf("proposals: task %s: action %s is still promoting: %w", job.TaskID, a.ActionID, tasks.ErrNotYet)
			}
			*ran = slices.Delete(*ran, i, i+1)
			r.logger.Info("proposals: a proposal the node's stop interrupted had run; its record completes it",
				"task", job.TaskID, "action", a.ActionID, "state", a.State)
			return a.Result(), nil
		}
	}
	if r.pause != nil {
		r.pause(PointRun)
	}
	res, err := r.exec.Run(ctx, executor.Request{TaskID: job.TaskID, Requester: job.Requester, Data: data})
	if err == nil && r.pause != nil {
		r.pause(PointRan)
	}
	return res, err
}
