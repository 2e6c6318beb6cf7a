package executor

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/proposal"
)

// Pending is an action held for confirmation.
type Pending struct {
	ActionID   string
	TaskID     string
	Requester  string
	ProposalID string
	Action     string
	// Data is the proposal or descriptor as received.
	Data []byte
	// Diff and PreImages are the changes to confirm and what the touched
	// paths held when they were staged; Reason why confirmation is needed.
	Diff      string
	PreImages []PreImage
	Reason    string
	Created   time.Time
}

func pendingOf(r *record) Pending {
	return Pending{ActionID: r.ActionID, TaskID: r.Task, Requester: r.Requester, ProposalID: r.ProposalID,
		Action: r.Action, Data: r.Data, Diff: r.Diff, PreImages: r.PreImages, Reason: r.Reason, Created: r.Created}
}

// Pending returns the actions of a task that wait for confirmation, oldest
// first (taskID "": those of every task). `snapnode approve TASK` finds
// its action here.
func (e *Executor) Pending(ctx context.Context, taskID string) ([]Pending, error) {
	rs, err := e.store.list(ctx, statePending, taskID)
	if err != nil {
		return nil, err
	}
	out := make([]Pending, 0, len(rs))
	for _, r := range rs {
		out = append(out, pendingOf(r))
	}
	return out, nil
}

// PendingPage returns at most limit of the actions of a task that wait for
// confirmation (taskID "": those of every task), oldest first, starting
// after the action after ("": with the oldest), and how many wait in
// all. With maxDiff > 0 it reads no further than the first action but
// the first whose diff brings the page's past maxDiff bytes, and returns
// that one last. An after that names no action is ErrNoAction.
func (e *Executor) PendingPage(ctx context.Context, taskID, after string, limit, maxDiff int) ([]Pending, int, error) {
	var from *record
	if after != "" {
		r, err := e.store.get(ctx, after)
		if errors.Is(err, errNoRecord) {
			return nil, 0, fmt.Errorf("%w: %q", ErrNoAction, after)
		}
		if err != nil {
			return nil, 0, err
		}
		from = r
	}
	total, err := e.store.count(ctx, statePending, taskID)
	if err != nil {
		return nil, 0, err
	}
	rs, err := e.store.listAfter(ctx, statePending, taskID, from, max(limit, 1), maxDiff)
	if err != nil {
		return nil, 0, err
	}
	out := make([]Pending, 0, len(rs))
	for _, r := range rs {
		out = append(out, pendingOf(r))
	}
	return out, total, nil
}

// PendingAction returns the pending action actionID, or ErrNoPending.
func (e *Executor) PendingAction(ctx context.Context, actionID string) (*Pending, error) {
	r, err := e.pendingRecord(ctx, actionID)
	if err != nil {
		return nil, err
	}
	p := pendingOf(r)
	return &p, nil
}

func (e *Executor) pendingRecord(ctx context.Context, actionID string) (*record, error) {
	r, err := e.store.get(ctx, actionID)
	if errors.Is(err, errNoRecord) || (err == nil && r.State != statePending) {
		return nil, fmt.Errorf("%w: %q", ErrNoPending, actionID)
	}
	return r, err
}

// authorize returns the pending action actionID (else ErrNoPending) once
// it has checked that approver may approve (or deny) it: the host, or an
// address with the operator role; for an approval, never the proposer
// itself (addresses compare without regard to case, as bech32's do). A
// refusal is audited and returned as ErrSelfApproval or ErrNotOperator.
// It returns the audit actor of the approver too.
func (e *Executor) authorize(ctx context.Context, actionID, approver string, approve bool) (r *record, actor string, err error) {
	if r, err = e.pendingRecord(ctx, actionID); err != nil {
		return nil, "", err
	}
	if err := checkIdentity("approver", approver, true); err != nil {
		return nil, "", err
	}
	var refusal error
	switch {
	case approve && strings.EqualFold(approver, r.Requester):
		refusal = ErrSelfApproval
	case approver != Host && !e.policy.InForce().IsOperator(approver):
		refusal = ErrNotOperator
	}
	if refusal == nil {
		if approver == Host {
			return r, Host, nil
		}
		return r, "operator:" + approver, nil
	}
	verb := "approval"
	if !approve {
		verb = "denial"
	}
	j := e.journal(r.Task, r.ActionID)
	j.add(audit.Entry{Actor: approver, Step: audit.StepRejected, Decision: verb + "_refused", Reason: refusal.Error()})
	if err := j.flush(ctx); err != nil {
		return nil, "", err
	}
	e.logger.Warn("executor: "+verb+" refused", "action", r.ActionID, "approver", approver, "err", refusal)
	return nil, "", fmt.Errorf("%w (action %s, approver %s)", refusal, r.ActionID, approver)
}

// Approve confirms the pending action actionID on behalf of approver: an
// address with the operator role, or Host. The proposer can never approve
// its own proposal (ErrSelfApproval), and anyone else is refused
// (ErrNotOperator); both refusals are audited. An unknown or finished
// action is ErrNoPending.
//
// The action is judged again by the policy in force (a Deny now fails
// it), staged again, and its pre-images compared with those the operator
// saw: if a touched path changed, the pending record gets the new diff and
// the Result is NeedsConfirmation again (audited "sandboxed" and "held").
// Otherwise it is promoted (audited "confirmed", then "promoted") and the
// Result is Completed; an approved action without effects (a read a
// policy wanted confirmed) runs then.
func (e *Executor) Approve(ctx context.Context, actionID, approver string) (*Result, error) {
	return e.ApproveThen(ctx, actionID, approver, nil, nil)
}

// ApproveThen is Approve with two writes of the caller's. before (nil:
// none) runs first in the approval's first commit, before anything has
// an effect: its error (the task ended meanwhile, say) fails that commit,
// nothing runs, the action waits for a decision again, and the approval
// returns the error. then (nil: none) runs in the approval's last commit
// (see Then); an approval that holds the action again (its files
// changed) is such an outcome too. An approval that fails after its
// first commit stood (before's write with it) returns a *DecidedError.
//
// The approvals of one task's actions promote one at a time: an approval
// whose first commit finds another action of the same task being
// promoted fails with ErrBusy (the action waits again), so that two
// approvals decided at the same moment run one after the other, each
// knowing what the other did.
func (e *Executor) ApproveThen(ctx context.Context, actionID, approver string, before func(context.Context, *sql.Tx) error, then Then) (*Result, error) {
	r, actor, err := e.authorize(ctx, actionID, approver, true)
	if err != nil {
		return nil, err
	}
	token, ok, err := e.store.claim(ctx, actionID, statePending, stateApproving, e.now())
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("%w: %q", ErrNoPending, actionID)
	}
	// Every later write of this approval is conditioned on its claim
	// token: once another process's recovery took the action up (and
	// another approval, maybe, claimed it again), they fail with
	// ErrTakenUp, and nothing of this one is recorded.
	r.State, r.Claim = stateApproving, token
	j := e.journal(r.Task, r.ActionID)
	res, err := e.approve(ctx, j, r, actor, e.alone(r, before), then)
	if err == nil {
		return res, nil
	}
	given := false
	if !errors.Is(err, ErrTakenUp) {
		// Give the action back to the operators, unless it moved on or
		// is no longer this approval's (the token): one another process
		// took up as interrupted was handed back by it already, and may
		// since be under a new approval.
		r.State, r.Updated = statePending, e.now()
		ok, uerr := e.store.update(context.WithoutCancel(ctx), r, stateApproving)
		if uerr != nil {
			e.logger.Error("executor: release action", "action", actionID, "err", uerr)
		}
		given = ok && uerr == nil
	}
	if j.firstDone {
		return nil, &DecidedError{ActionID: actionID, HeldAgain: given, Err: err}
	}
	return res, err
}

// DecidedError is the failure of an approval after its first commit,
// which recorded the decision with the caller's before (see
// ApproveThen): a later step failed with Err (a staging again after the
// files changed, the promotion, the record of its outcome, or a
// recovery that took the action up). HeldAgain reports whether the
// action was given back to the operators, nothing of it applied, to be
// decided again; if not, the action is the recovery's to settle
// (RecoverInterrupted) unless Err says it was settled already.
type DecidedError struct {
	ActionID  string
	HeldAgain bool
	Err       error
}

func (e *DecidedError) Error() string {
	if e.HeldAgain {
		return fmt.Sprintf("executor: approval of %s recorded, then failed; the action is held again: %v", e.ActionID, e.Err)
	}
	return fmt.Sprintf("executor: approval of %s recorded, then failed: %v", e.ActionID, e.Err)
}

func (e *DecidedError) Unwrap() error { return e.Err }

// DiffTx returns the diff of the action actionID as tx sees it: inside an
// approval's before (see ApproveThen), the diff the approval is carrying
// out, which nobody else can change by then.
func (e *Executor) DiffTx(ctx context.Context, tx *sql.Tx, actionID string) (string, error) {
	diff, err := e.store.diffTx(ctx, tx, actionID)
	if errors.Is(err, errNoRecord) {
		return "", fmt.Errorf("%w: %q", ErrNoPending, actionID)
	}
	return diff, err
}

// alone returns the check of an approval's first commit: the caller's
// before, then that no other action of r's task is being promoted.
func (e *Executor) alone(r *record, before func(context.Context, *sql.Tx) error) func(context.Context, *sql.Tx) error {
	return func(ctx context.Context, tx *sql.Tx) error {
		if before != nil {
			if err := before(ctx, tx); err != nil {
				return err
			}
		}
		other, err := e.store.promotingTx(ctx, tx, r.Task, r.ActionID)
		if err != nil {
			return err
		}
		if other != "" {
			return fmt.Errorf("%w (action %s of task %s)", ErrBusy, other, r.Task)
		}
		return nil
	}
}

func (e *Executor) approve(ctx context.Context, j *journal, r *record, actor string, first func(context.Context, *sql.Tx) error, then Then) (*Result, error) {
	j.first, j.then = first, then
	it, err := e.parse(r.Data, r.ActionID)
	if err != nil {
		// It was valid when held: this build no longer accepts it.
		var pe *proposal.Error
		if !errors.As(err, &pe) {
			return nil, err
		}
		res := &Result{ActionID: r.ActionID, ProposalID: r.ProposalID, Action: r.Action, DecidedBy: actor}
		return e.failRecord(ctx, j, r, res, actor, &Failure{Code: string(pe.Code), Message: pe.Message})
	}
	j.setRisk(e.levels, it.risk)
	res := &Result{ActionID: r.ActionID, ProposalID: it.proposalID, Action: it.action, DecidedBy: actor}
	dec, operator := e.judge(ctx, it, r.Requester, false)
	j.add(judgedEntry(actor, dec, operator, false))
	if dec.Effect == policy.Deny {
		return e.failRecord(ctx, j, r, res, actor, policyFailure(dec))
	}
	// The workspace may have changed while the action waited.
	if f, err := e.checkPreconditions(ctx, it, r.Requester); err != nil {
		return nil, err
	} else if f != nil {
		return e.failRecord(ctx, j, r, res, actor, f)
	}
	if !it.hasEffects() {
		j.add(audit.Entry{Actor: actor, Step: audit.StepConfirmed, Decision: "approve"})
		return e.runNoEffects(ctx, j, it, res, actor, r)
	}
	for attempt := 1; ; attempt++ {
		// Each attempt's first commit checks again: a promotion that
		// found its files changed and is staged again meets a cancel
		// or another approval that came meanwhile.
		j.first = first
		sg, f, err := e.stage(ctx, it, r.Requester)
		if err != nil {
			return nil, err
		}
		if f != nil {
			return e.failRecord(ctx, j, r, res, actor, f)
		}
		diffs := sg.st.Diffs()
		if !slices.Equal(preImages(diffs), r.PreImages) || attempt > maxPromoteAttempts {
			j.add(sandboxedEntry(actor, diffs))
			return e.hold(ctx, j, r, res, actor,
				"The files changed since confirmation was asked: confirm the new diff. "+it.confirmReason(dec, diffs), diffs, false)
		}
		j.add(audit.Entry{Actor: actor, Step: audit.StepConfirmed, Decision: "approve"})
		res, changed, err := e.promote(ctx, j, it, r, res, sg, actor, false)
		if !changed {
			return res, err
		}
		// A path changed between this staging and the promotion: stage
		// again; the pre-images now differ and the operator is asked again.
	}
}

// maxPromoteAttempts bounds the stagings of one approval whose promotion
// finds the files changed although their pre-images look the same again.
const maxPromoteAttempts = 3

// failRecord fails an approved action: the record and the audit say so,
// in one commit.
func (e *Executor) failRecord(ctx context.Context, j *journal, r *record, res *Result, actor string, f *Failure) (*Result, error) {
	r.State, r.Reason, r.Updated = stateFailed, f.Message, e.now()
	return e.fail(ctx, j, res, actor, f, e.settle(r, stateApproving))
}

// Deny refuses the pending action actionID on behalf of approver (an
// operator or Host; an operator may deny its own proposal, which can only
// prevent effects): the action fails with CONFIRMATION_DENIED and the
// reason, audited "denied". An unknown or finished action is ErrNoPending.
func (e *Executor) Deny(ctx context.Context, actionID, approver, reason string) (*Result, error) {
	return e.DenyThen(ctx, actionID, approver, reason, nil)
}

// DenyThen is Deny with the caller's write of the outcome, then (nil:
// none), in the denial's commit (see Then).
func (e *Executor) DenyThen(ctx context.Context, actionID, approver, reason string, then Then) (*Result, error) {
	r, actor, err := e.authorize(ctx, actionID, approver, false)
	if err != nil {
		return nil, err
	}
	reason = clean(reason, 1024, false)
	f := &Failure{Code: CodeConfirmationDenied, Message: "An operator denied the action.", Reason: reason}
	r.State, r.Reason, r.Updated = stateDenied, reason, e.now()
	j := e.journal(r.Task, r.ActionID)
	j.then = then
	j.add(audit.Entry{Actor: actor, Step: audit.StepDenied, Decision: "deny", Reason: reason})
	res := &Result{Outcome: Failed, ActionID: r.ActionID, ProposalID: r.ProposalID, Action: r.Action,
		Output: mustJSON(f), Diff: r.Diff, Reason: f.Message, DecidedBy: actor}
	// The record denied and its audit entry, in one commit; none if
	// another call took the action first.
	err = j.last(res).commit(ctx, func(ctx context.Context, tx *sql.Tx) error {
		ok, err := e.store.updateTx(ctx, tx, r, statePending)
		if err == nil && !ok {
			err = fmt.Errorf("%w: %q", ErrNoPending, actionID)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	return res, nil
}

// Action is the durable record of an action of a task: one with effects
// (staged, promoted, rolled back) or one held for confirmation. Reads,
// THINK and FINISH that ran at once leave no record (the audit log has
// them).
type Action struct {
	ActionID   string
	TaskID     string
	ProposalID string
	Action     string
	// State is pending, approving, promoting, promoted, rolling_back,
	// rolled_back, completed, denied or failed.
	State string
	// Data is the proposal or descriptor as received.
	Data    []byte
	Diff    string
	Reason  string
	Created time.Time
	// Updated is when the record last changed (its decision, for one
	// an operator decided).
	Updated time.Time
}

// Result is what a caller that lost Run's answer (the node stopped
// before it used it) reports of the action from its record: completed
// for an action that was carried out (promoted, completed, or since
// rolled back: it did run), failed when it failed or was denied, and
// NeedsConfirmation while it is held. Output is a success note for a
// completed one, stating that the record, not the run, gave it.
func (a Action) Result() *Result {
	res := &Result{ActionID: a.ActionID, ProposalID: a.ProposalID, Action: a.Action, Diff: a.Diff, Reason: a.Reason}
	switch a.State {
	case statePending, stateApproving:
		res.Outcome = NeedsConfirmation
	case stateFailed, stateDenied:
		res.Outcome = Failed
	default:
		res.Outcome = Completed
		res.Output = fmt.Appendf(nil, `{"status":"success","action":%q,"note":"carried out before the node restarted (state %s)"}`, a.Action, a.State)
	}
	return res
}

// Forget deletes the records of actions that ended and can change
// nothing more (completed, denied, failed, or promoted or rolled back with
// their rollback snapshot gone), last changed before before, whose task
// gone reports deleted (a record of no task counts as gone), a page at a
// time, and returns how many. Their audit entries stay, under the audit
// log's own retention. The node calls it with its task retention, so that
// an ended task's file contents and diffs do not outlive it; a record of
// a task still kept (a job that waits for a human for months, whose
// resume may roll its actions back again) stays.
func (e *Executor) Forget(ctx context.Context, before time.Time, gone func(ctx context.Context, taskID string) (bool, error)) (int, error) {
	total := 0
	var after endedRef
	for {
		page, err := e.store.ended(ctx, before, after)
		if err != nil {
			return total, err
		}
		isGone := map[string]bool{"": true}
		var ids []string
		for _, r := range page {
			g, seen := isGone[r.task]
			if !seen {
				if g, err = gone(ctx, r.task); err != nil {
					return total, fmt.Errorf("executor: forget: task %s: %w", r.task, err)
				}
				isGone[r.task] = g
			}
			if g {
				ids = append(ids, r.id)
			}
		}
		// A hundred records a transaction: a record may hold a write's
		// content (up to a message's size), and freeing its pages holds
		// the database's writer.
		for len(ids) > 0 {
			chunk := ids[:min(len(ids), 100)]
			ids = ids[len(chunk):]
			n, err := e.store.forget(ctx, chunk)
			total += n
			if err != nil {
				return total, err
			}
		}
		if len(page) < forgetBatch {
			return total, nil
		}
		after = page[len(page)-1]
	}
}

// Actions returns the recorded actions of a task, oldest first. A worker
// resuming after a crash asks it whether a proposal it sent already ran:
// the executor's record, not the worker's memory, is the truth.
func (e *Executor) Actions(ctx context.Context, taskID string) ([]Action, error) {
	if taskID == "" {
		return nil, fmt.Errorf("executor: actions of a task: %w: empty task id", ErrInvalidIdentity)
	}
	rs, err := e.store.list(ctx, "", taskID)
	if err != nil {
		return nil, err
	}
	out := make([]Action, len(rs))
	for i, r := range rs {
		out[i] = Action{ActionID: r.ActionID, TaskID: r.Task, ProposalID: r.ProposalID, Action: r.Action,
			State: r.State, Data: r.Data, Diff: r.Diff, Reason: r.Reason, Created: r.Created, Updated: r.Updated}
	}
	return out, nil
}
