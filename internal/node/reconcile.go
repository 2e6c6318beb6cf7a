package node

import (
	"context"
	"encoding/json"
	"log/slog"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// interruptedAfter is how long a task must have stood still before a node
// on a shared (PostgreSQL) database takes it up as interrupted: another
// process may be working on a younger one. On SQLite the node is the
// database's only process and takes every task up at once.
const interruptedAfter = 5 * time.Minute

// reconciled counts what reconcile did.
type reconciled struct {
	// Resumed tasks were taken up again (submitted or working), Settled
	// ones waited for a decision that was taken before the node stopped.
	Resumed, Settled int
	// Ended is how many of them are now completed, failed or canceled.
	Ended int
}

// reconcile brings to where they belong the tasks that a node which
// stopped without finishing (a crash, SIGKILL) left behind, among those
// last changed before cutoff: it runs once at start, before any request
// is served, after the executor finished its own interrupted promotions.
//
//   - A task submitted or working is resumed (tasks.Service.Resume): its
//     proposals that the executor recorded are reported from their
//     records (a write that was applied completes the task with its
//     artifacts and is never applied again), the others run now; a
//     message without proposals goes to the agent, or fails when none
//     is configured.
//   - A task waiting for input (input_required) whose held action is no
//     longer held (the operator's approval or denial was carried out but
//     the task not updated) takes the action's outcome.
//   - The agent's own tasks are left to the agent runtime, which
//     reconciles its jobs itself.
//
// A task that fails to reconcile is logged and left as it is.
func (p *proposals) reconcile(ctx context.Context, cutoff time.Time) (reconciled, error) {
	var r reconciled
	live, err := p.tasks.List(ctx, tasks.Filter{States: []tasks.State{tasks.StateSubmitted, tasks.StateWorking, tasks.StateInputRequired}})
	if err != nil {
		return r, err
	}
	for _, t := range live {
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		if t.Status.Timestamp.After(cutoff) {
			continue
		}
		if p.agent != nil {
			if mine, err := p.agent.Owns(ctx, t.ID); err != nil || mine {
				continue
			}
		}
		var (
			now *tasks.Task
			err error
		)
		if t.Status.State == tasks.StateInputRequired {
			now, err = p.settleDecided(ctx, t)
			if now != nil {
				r.Settled++
			}
		} else {
			now, err = p.tasks.Resume(ctx, t.ID)
			r.Resumed++
		}
		if err != nil {
			p.logger.Error("reconcile: task left as it was", "task", t.ID, "state", t.Status.State, "err", err)
			continue
		}
		if now != nil && now.Status.State.Terminal() {
			r.Ended++
		}
		if now != nil {
			p.logger.Info("reconcile: task interrupted by the node's stop", "task", t.ID, "was", t.Status.State, "now", now.Status.State)
		}
	}
	return r, nil
}

// settleDecided gives t, waiting for input, the outcome of its last
// recorded action when that action no longer waits for confirmation (it
// was approved and carried out, or denied, before the node stopped); it
// returns nil when t still waits, or never held an action.
func (p *proposals) settleDecided(ctx context.Context, t *tasks.Task) (*tasks.Task, error) {
	held, err := p.exec.Pending(ctx, t.ID)
	if err != nil || len(held) > 0 {
		return nil, err
	}
	acts, err := p.exec.Actions(ctx, t.ID)
	if err != nil || len(acts) == 0 {
		return nil, err
	}
	res := acts[len(acts)-1].Result()
	if res.Outcome == executor.NeedsConfirmation {
		return nil, nil
	}
	return p.settle(ctx, t.ID, res, res.Outcome == executor.Completed, nil)
}

// accepted keeps a task that a message/send request just created as the
// request's result in results (tasks.ServiceOptions.Accepted), until the
// answer replaces it: a retry of a request whose answer a crash lost gets
// its task (see liveResults) rather than 2006.
func accepted(results snap.ResultStore, retention time.Duration, now func() time.Time, logger *slog.Logger) func(ctx context.Context, from, id string, t *tasks.Task) {
	return func(ctx context.Context, from, id string, t *tasks.Task) {
		b, err := json.Marshal(tasks.NewTaskResponse(t))
		if err == nil {
			err = results.SaveResult(ctx, from, id, b, now().Add(retention))
		}
		if err != nil {
			logger.Warn("task not kept as its request's result", "task", t.ID, "from", from, "id", id, "err", err)
		}
	}
}

// liveResults is the ResultStore of the node's server: a result kept
// while its task was submitted or working (by accepted, or the answer
// of a task left for the agent) is answered with the task as it is now,
// so that a retry after a restart sees how the task ended.
type liveResults struct {
	snap.ResultStore
	tasks *tasks.Service
}

// LoadResult implements snap.ResultStore.
func (r liveResults) LoadResult(ctx context.Context, from, id string, now time.Time) ([]byte, bool, error) {
	p, ok, err := r.ResultStore.LoadResult(ctx, from, id, now)
	if err != nil || !ok {
		return p, ok, err
	}
	var v struct {
		Task struct {
			ID     string `json:"id"`
			Status struct {
				State tasks.State `json:"state"`
			} `json:"status"`
		} `json:"task"`
	}
	if json.Unmarshal(p, &v) != nil || v.Task.ID == "" {
		return p, true, nil
	}
	if st := v.Task.Status.State; st != tasks.StateSubmitted && st != tasks.StateWorking {
		return p, true, nil
	}
	t, err := r.tasks.Task(ctx, v.Task.ID)
	if err != nil || t.Owner != from {
		return p, true, nil // the result kept is the best there is
	}
	b, err := json.Marshal(tasks.NewTaskResponse(t))
	if err != nil {
		return p, true, nil
	}
	return b, true, nil
}
