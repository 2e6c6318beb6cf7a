package proposals

import (
	"context"
	"errors"
	"runtime/pprof"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/periodic"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// InterruptedAfter is the default of how long a task must have stood
// still before a node on a shared (PostgreSQL) database takes it up as
// interrupted (the node's reconcile_after setting): another process may
// be working on a younger one. On SQLite the node is the database's only
// process and takes every task up at start.
const InterruptedAfter = 5 * time.Minute

// Reconciled counts what a reconcile pass did.
type Reconciled struct {
	// Resumed tasks were taken up again (submitted or working), Settled
	// ones waited for a decision that was taken before the node stopped.
	Resumed, Settled int
	// Ended is how many of them are now completed, failed or canceled.
	Ended int
	// Withdrawn is how many held actions of ended tasks were withdrawn.
	Withdrawn int
	// Skipped is how many tasks another process was reconciling.
	Skipped int
	// Recovered is how many actions caught mid-promotion (or mid-rollback,
	// mid-approval) the executor settled first.
	Recovered int
}

// Reconcile brings to where they belong the tasks that a node which
// stopped without finishing (a crash, SIGKILL) left behind, among those
// last changed before cutoff. The node runs it at start, before any
// request is served and after the executor finished its own interrupted
// promotions, and then periodically (ReconcileEvery) for the tasks a
// replica on the same database may have been running at start.
//
//   - A task submitted or working is resumed (tasks.Service.Resume): its
//     proposals that the executor recorded are reported from their
//     records (a write that was applied completes the task with its
//     artifacts and is never applied again), the others run now; a
//     message without proposals goes to the agent, or fails when none
//     is configured. One whose write is still promoting (younger than
//     cutoff, which the executor's recovery left alone) is left as it is:
//     the pass that recovers the write takes it up.
//   - A task waiting for input (input_required) whose held action is no
//     longer held (the operator's approval or denial was carried out but
//     the task not updated) takes the action's outcome.
//   - The agent's own tasks are left to the agent runtime, which
//     reconciles its jobs itself.
//   - An action still held by a task that has ended is withdrawn.
//
// First, the executor finishes the actions a crash caught mid-promotion
// (RecoverInterrupted), so that their tasks then fail with the reason.
//
// Each task is claimed first (Config.Claims) and read again under the
// claim: of two processes reconciling at once, one handles a task and the
// other skips it, and a task the first one moved on is newer than the
// cutoff for the second. A task that fails to reconcile is logged and
// left as it is, for the next pass.
func (p *Proposals) Reconcile(ctx context.Context, cutoff time.Time) (Reconciled, error) {
	return p.reconcile(ctx, ctx, cutoff)
}

// reconcile is Reconcile with its lookups and writes on ctx and the runs
// of the tasks it resumes on life, which a pass's bound does not cut
// (ReconcileEvery).
func (p *Proposals) reconcile(ctx, life context.Context, cutoff time.Time) (Reconciled, error) {
	var r Reconciled
	n, err := RecoverInterrupted(ctx, p.exec, p.claims, cutoff)
	r.Recovered = n
	if err != nil {
		p.logger.Error("reconcile: interrupted actions not all recovered", "err", err)
	}
	// Brief: each task taken up is read again under its claim.
	live, err := p.tasks.List(ctx, tasks.Filter{States: []tasks.State{tasks.StateSubmitted, tasks.StateWorking, tasks.StateInputRequired}, Brief: true})
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
		if p.jobs != nil {
			if mine, err := p.jobs.Owns(ctx, t.ID); err != nil || mine {
				continue
			}
		}
		release, ok, err := p.claim(ctx, t.ID)
		if err != nil {
			p.logger.Error("reconcile: task not claimed", "task", t.ID, "err", err)
			continue
		}
		if !ok {
			r.Skipped++
			continue
		}
		p.reconcileTask(ctx, life, t.ID, cutoff, &r)
		release()
	}
	n, err = p.withdrawOrphans(ctx)
	r.Withdrawn = n
	return r, err
}

// Recoverer is the executor (*executor.Executor) as it finishes the
// actions a crash interrupted mid-promotion, mid-rollback or
// mid-approval, among those last changed before o.Before, each claimed
// through o.Claim.
type Recoverer interface {
	RecoverInterruptedWith(ctx context.Context, o executor.RecoverOptions) (int, error)
}

// RecoverInterrupted has exec finish the actions a crash interrupted that
// were last changed before cutoff, each claimed through claims (nil: this
// process is the database's only one): a replica's action younger than
// cutoff may be in progress, and of two processes recovering at once one
// recovers an action and the other leaves it. It returns how many actions
// were recovered. Reconcile calls it first; the node also calls it at
// start, before anything (the agent) may run an action.
func RecoverInterrupted(ctx context.Context, exec Recoverer, claims Claimer, cutoff time.Time) (int, error) {
	o := executor.RecoverOptions{Before: cutoff}
	if claims != nil {
		o.Claim = func(ctx context.Context, actionID string) (func(), bool, error) {
			return claims.Claim(ctx, "snapnode/recover/"+actionID)
		}
	}
	return exec.RecoverInterruptedWith(ctx, o)
}

// reconcileTask reconciles taskID, claimed, if it is still as the list
// found it: not ended, and unchanged since cutoff.
func (p *Proposals) reconcileTask(ctx, life context.Context, taskID string, cutoff time.Time, r *Reconciled) {
	t, err := p.tasks.Task(ctx, taskID)
	if err != nil {
		p.logger.Error("reconcile: task left as it was", "task", taskID, "err", err)
		return
	}
	if t.Status.State.Terminal() || t.Status.Timestamp.After(cutoff) {
		return // another process took it up meanwhile
	}
	var now *tasks.Task
	if t.Status.State == tasks.StateInputRequired {
		now, err = p.settleDecided(ctx, t)
		if now != nil {
			r.Settled++
		}
	} else {
		// Its run as a request's: not cut by the pass's bound, and,
		// labelled apart, not taken for a pass stuck past it.
		pprof.Do(life, pprof.Labels("loop", "reconcile: resumed run"), func(life context.Context) {
			now, err = p.tasks.Resume(life, t.ID)
		})
		if errors.Is(err, tasks.ErrNotYet) {
			// The pass that recovers the action takes the task up.
			p.logger.Info("reconcile: task left waiting for the executor to settle an action it ran", "task", t.ID, "err", err)
			return
		}
		r.Resumed++
	}
	if err != nil {
		p.logger.Error("reconcile: task left as it was", "task", t.ID, "state", t.Status.State, "err", err)
		return
	}
	if now != nil && now.Status.State.Terminal() {
		r.Ended++
	}
	if now != nil {
		p.logger.Info("reconcile: task interrupted by the node's stop", "task", t.ID, "was", t.Status.State, "now", now.Status.State)
	}
}

// claim claims taskID through Config.Claims; without one every claim
// succeeds.
func (p *Proposals) claim(ctx context.Context, taskID string) (release func(), ok bool, err error) {
	if p.claims == nil {
		return func() {}, true, nil
	}
	return p.claims.Claim(ctx, "snapnode/reconcile/"+taskID)
}

// withdrawOrphans withdraws the actions held by tasks that have ended (a
// withdrawal that failed, or a task that ended on another process), or
// that are gone: a task's retention deleted it while a withdrawal kept
// failing, and no decision can reach its actions any more (Decide reads
// the task first).
func (p *Proposals) withdrawOrphans(ctx context.Context) (int, error) {
	held, err := p.exec.Pending(ctx, "")
	if err != nil {
		return 0, err
	}
	n := 0
	seen := map[string]bool{}
	for _, pa := range held {
		if seen[pa.TaskID] {
			continue
		}
		seen[pa.TaskID] = true
		t, err := p.tasks.Task(ctx, pa.TaskID)
		if snap.CodeOf(err) == snap.CodeTaskNotFound {
			n += p.withdraw(ctx, pa.TaskID, "the task no longer exists")
			continue
		}
		if err != nil || !t.Status.State.Terminal() {
			continue
		}
		n += p.withdraw(ctx, pa.TaskID, ended(t.Status.State))
	}
	return n, nil
}

// settleDecided gives t, waiting for input, the outcome of its last
// recorded action when that action no longer waits for confirmation (it
// was approved and carried out, or denied, before the node stopped); it
// returns nil when t still waits, never held an action, or its action is
// still promoting.
func (p *Proposals) settleDecided(ctx context.Context, t *tasks.Task) (*tasks.Task, error) {
	held, err := p.exec.Pending(ctx, t.ID)
	if err != nil || len(held) > 0 {
		return nil, err
	}
	acts, err := p.exec.Actions(ctx, t.ID)
	if err != nil || len(acts) == 0 {
		return nil, err
	}
	last := acts[len(acts)-1]
	if last.State == "promoting" {
		// No outcome yet: the executor's recovery undoes it (a pass
		// leaves a young one alone), or its promotion is being recorded.
		return nil, nil
	}
	res := last.Result()
	if res.Outcome == executor.NeedsConfirmation {
		return nil, nil
	}
	// The record keeps the diff the action was held with, unless it was
	// staged again as it was approved (promoted with that staging's, the
	// same changes).
	return p.settle(ctx, t.ID, res, last.State != "denied", last.Diff, nil)
}

// ReconcileEvery runs a Reconcile pass at each tick until ctx ends, for
// the tasks that stood still for at least age at the tick's time: the
// tasks a replica was running when this node started, and left
// interrupted, are taken up once they are older than age. report, when
// set, is told of each pass. A pass is given up after bound (see
// periodic.Pass), the runs of the tasks it resumed excepted: they end
// with ctx.
func (p *Proposals) ReconcileEvery(ctx context.Context, ticks <-chan time.Time, age, bound time.Duration, report func(Reconciled, error)) {
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticks:
			r, err := periodic.Pass(ctx, "reconcile", bound, func(pass context.Context) (Reconciled, error) {
				return p.reconcile(pass, ctx, now.Add(-age))
			})
			if report != nil {
				report(r, err)
			}
		}
	}
}
