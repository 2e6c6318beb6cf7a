package proposals

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/tasks"
)

// Tasks is what Proposals needs of the task service (*tasks.Service):
// Task reads a task (a missing one is an error), Settle records an
// outcome of it in a producer's commit (tasks.Settlement), Resume takes
// up a task a stop interrupted, List finds the tasks to reconcile. Each
// is safe for concurrent use.
type Tasks interface {
	Task(ctx context.Context, taskID string) (*tasks.Task, error)
	Settle(taskID string) *tasks.Settlement
	Resume(ctx context.Context, taskID string) (*tasks.Task, error)
	List(ctx context.Context, f tasks.Filter) ([]*tasks.Task, error)
	Committed(ctx context.Context, taskID string, last *tasks.Task, step string, err error) (*tasks.Task, error)
}

var _ Tasks = (*tasks.Service)(nil)

// Jobs is the agent runtime (*agent.Runtime) as decisions reach it: Owns
// reports whether a task is one of its jobs; Decided hands it the outcome
// of a decision on an action its job held with the diff held, and
// returns the task as the job's resumption left it. The agent's tasks
// are reconciled by the runtime itself.
type Jobs interface {
	Owns(ctx context.Context, taskID string) (bool, error)
	Decided(ctx context.Context, taskID string, res *executor.Result, approved bool, held string) (*tasks.Task, error)
}

// Config is what Proposals is made of. Executor and Tasks are required.
type Config struct {
	Executor Executor
	Tasks    Tasks
	// Jobs, when the node runs an agent, takes the decisions on its
	// jobs' actions; nil when it does not.
	Jobs Jobs
	// Claims keeps two processes on one database from reconciling one
	// task at once (DBClaims); nil when this process is the database's
	// only one.
	Claims Claimer
	// Pause, nil but in crash tests, is called at PointDecided.
	Pause  func(point string)
	Logger *slog.Logger
}

// Proposals owns the lifecycle of the proposals a task holds: the
// operator's decision on a held action (Decide), the listing of held
// actions (Held), the rollback of a promoted one (Rollback), the
// withdrawal of held actions when their task ends (TaskEnded), and the
// reconciliation of tasks a stop interrupted (Reconcile, ReconcileEvery).
// Its Runner carries the proposals out. It is safe for concurrent use.
type Proposals struct {
	exec   Executor
	tasks  Tasks
	jobs   Jobs
	claims Claimer
	pause  func(point string)
	logger *slog.Logger
}

// New returns the Proposals of cfg.
func New(cfg Config) (*Proposals, error) {
	if cfg.Executor == nil || cfg.Tasks == nil {
		return nil, errors.New("proposals: Config.Executor and Config.Tasks are required")
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Proposals{exec: cfg.Executor, tasks: cfg.Tasks, jobs: cfg.Jobs, claims: cfg.Claims,
		pause: cfg.Pause, logger: cfg.Logger}, nil
}

// Decision is an operator's decision on an action a task holds.
type Decision struct {
	TaskID string
	// ActionID names the held action; "" decides on the one action the
	// task holds (ErrAmbiguous when it holds several).
	ActionID string
	// Approver is who decides: executor.Host (the machine's operator,
	// through the admin socket or the console) or an operator's address.
	Approver string
	Approve  bool
	// Reason is the note a denied task fails with, at most MaxReason
	// bytes; "" gives a default.
	Reason string
	// Diff, when set, is DiffSum of the diff the approver was shown: an
	// approval of an action whose diff is another now (its files changed
	// and it was held again with the new one) is refused with
	// ErrDiffChanged, and nothing runs.
	Diff string
	// Claim, when not nil, is the replay record of the signed message
	// carrying the decision, left to it (see tasks.TxClaim): written in
	// the decision's first commit (the approval's first, the denial's
	// one), so that a decision whose commit fails leaves the message's id
	// unspent for its retry.
	Claim *tasks.TxClaim
}

// MaxReason bounds a Decision's Reason, in bytes: a longer one is
// refused (ErrReasonTooLong), never cut without a word.
const MaxReason = 1024

// DiffSum is the sum a Decision names the diff it was taken on by: the
// SHA-256 of the diff, in hex.
func DiffSum(diff string) string {
	h := sha256.Sum256([]byte(diff))
	return hex.EncodeToString(h[:])
}

// ValidDiffSum reports whether s is a sum as DiffSum writes it: 64
// lowercase hex digits.
func ValidDiffSum(s string) bool {
	b, err := hex.DecodeString(s)
	return err == nil && len(b) == sha256.Size && s == strings.ToLower(s)
}

// shown refuses, with ErrDiffChanged, an approval that names a diff
// other than diff, the held action's actionID's.
func (d Decision) shown(actionID, diff string) error {
	if !d.Approve || d.Diff == "" {
		return nil
	}
	if sum := DiffSum(diff); sum != d.Diff {
		return &HeldError{TaskID: d.TaskID, ActionID: actionID, DiffSum: sum, Err: ErrDiffChanged}
	}
	return nil
}

// Errors of Decide. Each is wrapped with the task and the actions
// concerned; errors.As gives a *StateError or *HeldError for details.
var (
	// ErrTaskEnded: the task is completed, failed or canceled. Its held
	// actions were withdrawn when it ended; none can run any more.
	ErrTaskEnded = errors.New("the task has ended")
	// ErrNotWaiting: the task is submitted or working, not waiting for
	// a decision.
	ErrNotWaiting = errors.New("the task is not waiting for a decision")
	// ErrNoHeld: the task holds no action.
	ErrNoHeld = errors.New("the task holds no action")
	// ErrNotHeld: the task does not hold the action named.
	ErrNotHeld = errors.New("the task holds no such action")
	// ErrAmbiguous: no action was named and the task holds several.
	ErrAmbiguous = errors.New("the task holds more than one action: name the one to decide")
	// ErrDiffChanged: the action's diff is no longer the one the
	// approver was shown (Decision.Diff): look at the new one.
	ErrDiffChanged = errors.New("the action's diff changed since it was shown: review the new one")
	// ErrTakenUp: the approval stood still longer than reconcile_after
	// (a slow disk, a paused process), and another process's reconcile
	// pass took the action up as interrupted (executor.ErrTakenUp): it
	// holds the action again (approve again), or undid its promotion.
	// Nothing of the approval was recorded.
	ErrTakenUp = errors.New("the approval took longer than reconcile_after, and another process took the action up as interrupted")
	// ErrReasonTooLong: the reason is over MaxReason bytes.
	ErrReasonTooLong = fmt.Errorf("the reason is over %d bytes", MaxReason)
)

// TakenUpError is the refusal of an approval that another process took
// up as interrupted (ErrTakenUp). HeldAgain tells whether the task holds
// the action again, waiting for a decision.
type TakenUpError struct {
	TaskID, ActionID string
	HeldAgain        bool
	Err              error // the executor's error
}

func (e *TakenUpError) Error() string {
	if e.HeldAgain {
		return fmt.Sprintf("task %s, action %s: %v; it is held again: approve it again", e.TaskID, e.ActionID, ErrTakenUp)
	}
	return fmt.Sprintf("task %s, action %s: %v; it is no longer held (its promotion was undone, or it was decided since): see the task", e.TaskID, e.ActionID, ErrTakenUp)
}

func (e *TakenUpError) Unwrap() []error { return []error{ErrTakenUp, e.Err} }

// HeldAgainError is the failure of an approval after its first commit
// recorded it (an executor.DecidedError): a later step failed before
// the action changed anything, and the action was given back to the
// operators (ErrHeldAgain). The approval may be made again, by a new
// decision; a signed one with a new message id, the first one's being
// spent.
type HeldAgainError struct {
	TaskID, ActionID string
	Err              error // the executor's error
}

// ErrHeldAgain: an approval was recorded, then failed before the action
// changed anything, and the action is held again (a *HeldAgainError).
var ErrHeldAgain = errors.New("the approval was recorded, then failed before the action ran")

func (e *HeldAgainError) Error() string {
	return fmt.Sprintf("task %s, action %s: %v (%v); it is held again: approve it again", e.TaskID, e.ActionID, ErrHeldAgain, e.Err)
}

func (e *HeldAgainError) Unwrap() []error { return []error{ErrHeldAgain, e.Err} }

// StateError is the refusal of a decision on a task that does not wait
// for one (ErrTaskEnded, ErrNotWaiting).
type StateError struct {
	TaskID string
	State  tasks.State
}

func (e *StateError) Error() string {
	if e.State.Terminal() {
		return fmt.Sprintf("task %s is %s: %v; nothing of it can be approved or denied any more (an action still held when it ended was withdrawn, never run)", e.TaskID, e.State, ErrTaskEnded)
	}
	return fmt.Sprintf("task %s is %s: %v", e.TaskID, e.State, ErrNotWaiting)
}

func (e *StateError) Unwrap() error {
	if e.State.Terminal() {
		return ErrTaskEnded
	}
	return ErrNotWaiting
}

// HeldError is the refusal of a decision that names no action the task
// holds (ErrNoHeld, ErrNotHeld, ErrAmbiguous). Held lists the actions it
// holds, as "ID (ACTION)".
type HeldError struct {
	TaskID   string
	ActionID string // the action named, if any
	Held     []string
	// DiffSum, with ErrDiffChanged, is DiffSum of the action's diff now.
	DiffSum string
	Err     error
}

func (e *HeldError) Error() string {
	switch e.Err {
	case ErrNoHeld:
		return fmt.Sprintf("task %s: %v", e.TaskID, e.Err)
	case ErrNotHeld:
		return fmt.Sprintf("task %s: %v %s; it holds %s", e.TaskID, e.Err, e.ActionID, strings.Join(e.Held, ", "))
	case ErrDiffChanged:
		return fmt.Sprintf("task %s, action %s: %v", e.TaskID, e.ActionID, e.Err)
	}
	return fmt.Sprintf("task %s: %v (--action ID): %s", e.TaskID, e.Err, strings.Join(e.Held, ", "))
}

func (e *HeldError) Unwrap() error { return e.Err }

// Decide carries out d: the held action is approved (it runs now) or
// denied, and its task takes the outcome (an agent's job resumes with
// it; a peer's proposal ends the task). It is the node's one decision
// path: the admin socket, the console, and signed operator messages all
// call it, and it returns the task as the decision left it.
//
// The held action is bound to its task as it is now: a task that ended
// (canceled, completed, failed) is refused with ErrTaskEnded, one that is
// not waiting for input with ErrNotWaiting, and nothing runs. A task that
// holds several actions needs the one decided named (ErrAmbiguous names
// them); the executor refuses an approver who may not decide
// (executor.ErrSelfApproval, executor.ErrNotOperator), a decision
// taken meanwhile (executor.ErrNoPending) and a reason over MaxReason
// (ErrReasonTooLong). An approval that stood still
// past reconcile_after and that another process took up as interrupted
// is refused with ErrTakenUp (a *TakenUpError): nothing of it was
// recorded, and the action is held again.
func (p *Proposals) Decide(ctx context.Context, d Decision) (*tasks.Task, error) {
	t, err := p.decide(ctx, d)
	if err != nil && d.Claim.Pending() && !errors.Is(err, executor.ErrBusy) && p.underWay(ctx, d, err) {
		// Refused while an approval of the task's action was under way,
		// its commit not made yet: that approval may be another copy of
		// this very message, whose record this refusal, written now, would
		// take from it (and it would then do nothing). Told to retry, the
		// requester learns the approval's outcome, its own id unspent.
		return nil, fmt.Errorf("task %s: %w: %w", d.TaskID, ErrUnderWay, err)
	}
	return t, err
}

// ErrUnderWay refuses a decision, for now, that came while an approval
// of the task's action was under way: the decision may be tried again
// once that one is over.
var ErrUnderWay = errors.New("an approval of the task's action is under way")

// underWay reports whether d, refused with err, may have met an approval
// of its task's action under way: one is now, or err found no held
// action (an approval had it then) and the action is held again (that
// approval failed and gave it back since).
func (p *Proposals) underWay(ctx context.Context, d Decision, err error) bool {
	acts, aerr := p.exec.Actions(ctx, d.TaskID)
	if aerr != nil {
		return false
	}
	if slices.ContainsFunc(acts, func(a executor.Action) bool { return a.State == "approving" }) {
		return true
	}
	if !errors.Is(err, ErrNoHeld) && !errors.Is(err, ErrNotHeld) && !errors.Is(err, executor.ErrNoPending) {
		return false
	}
	return slices.ContainsFunc(acts, func(a executor.Action) bool {
		return a.State == "pending" && (d.ActionID == "" || a.ActionID == d.ActionID)
	})
}

func (p *Proposals) decide(ctx context.Context, d Decision) (*tasks.Task, error) {
	if len(d.Reason) > MaxReason {
		return nil, fmt.Errorf("task %s: %w (it has %d): nothing was decided", d.TaskID, ErrReasonTooLong, len(d.Reason))
	}
	t, err := p.tasks.Task(ctx, d.TaskID)
	if err != nil {
		return nil, err
	}
	if st := t.Status.State; st != tasks.StateInputRequired {
		if st.Terminal() {
			// Whatever it still holds is an orphan: withdraw it now.
			p.withdraw(ctx, d.TaskID, ended(st))
		}
		return nil, &StateError{TaskID: d.TaskID, State: st}
	}
	pa, err := p.held(ctx, d.TaskID, d.ActionID)
	if err != nil {
		return nil, err
	}
	if err := d.shown(pa.ActionID, pa.Diff); err != nil {
		return nil, err // refused at once; checked again as it runs
	}
	reason := d.Reason
	if !d.Approve && reason == "" {
		reason = "denied by the operator"
	}
	// A denied task fails with the operator's words.
	denied := func(res *executor.Result) *executor.Result {
		r := *res
		r.Reason = fmt.Sprintf("%s Reason: %s", res.Reason, reason)
		return &r
	}
	var deny func(*executor.Result) *executor.Result
	if !d.Approve {
		deny = denied
	}
	st, then, err := p.settlement(ctx, d.TaskID, deny, d.Approve, pa.Diff)
	if err != nil {
		return nil, err
	}
	if err := d.Claim.Ready(ctx); err != nil {
		return nil, err
	}
	if p.pause != nil {
		p.pause(PointApproving)
	}
	var res *executor.Result
	if d.Approve {
		// The task is checked again in the approval's first commit, with
		// its row held: a cancel lands before it (and nothing runs) or
		// once the action is under way.
		unended := p.tasks.Settle(d.TaskID).Unended
		before := func(ctx context.Context, tx *sql.Tx) error {
			if err := d.Claim.In(ctx, tx); err != nil {
				return err
			}
			if err := unended(ctx, tx); err != nil {
				return err
			}
			if d.Diff == "" {
				return nil
			}
			// Checked again where nobody can change it any more: a
			// second approval may have held the action again since.
			diff, err := p.exec.DiffTx(ctx, tx, pa.ActionID)
			if err != nil {
				return err
			}
			return d.shown(pa.ActionID, diff)
		}
		res, err = p.exec.ApproveThen(ctx, pa.ActionID, d.Approver, before, then)
		if _, ok := errors.AsType[*executor.DecidedError](err); ok {
			// The approval's first commit stood, the request's replay
			// record with it: the request is answered for what it did.
			d.Claim.Kept()
		}
		err = d.Claim.Done(err)
	} else {
		if d.Claim != nil {
			settle := then
			then = func(ctx context.Context, tx *sql.Tx, res *executor.Result) error {
				if err := d.Claim.In(ctx, tx); err != nil {
					return err
				}
				if settle == nil {
					return nil
				}
				return settle(ctx, tx, res)
			}
		}
		if res, err = p.exec.DenyThen(ctx, pa.ActionID, d.Approver, reason, then); err == nil {
			res = denied(res)
		}
		err = d.Claim.Done(err)
	}
	if err != nil {
		if d.Approve && errors.Is(err, executor.ErrTakenUp) {
			return nil, p.takenUp(ctx, d.TaskID, pa.ActionID, err)
		}
		if errors.Is(err, tasks.ErrTerminal) || errors.Is(err, executor.ErrBusy) {
			// The task ended meanwhile (canceled, or completed by
			// another action approved at the same moment): what it still
			// holds, this action included, is withdrawn.
			if t, terr := p.tasks.Task(ctx, d.TaskID); terr == nil && t.Status.State.Terminal() {
				p.withdraw(ctx, d.TaskID, ended(t.Status.State))
				return nil, &StateError{TaskID: d.TaskID, State: t.Status.State}
			}
		}
		if de, ok := errors.AsType[*executor.DecidedError](err); ok {
			// The decision was recorded, then the approval failed: the
			// action held again waits for another decision; one left
			// under way is settled by the recovery, whose outcome
			// reaches the task, and the task as it stands answers.
			if de.HeldAgain {
				p.logger.Warn("an approval failed after it was recorded; the action is held again", "task", d.TaskID, "action", pa.ActionID, "err", err)
				return nil, &HeldAgainError{TaskID: d.TaskID, ActionID: pa.ActionID, Err: err}
			}
			return p.tasks.Committed(ctx, d.TaskID, nil, "the approval after its first commit", err)
		}
		return nil, err
	}
	if p.pause != nil {
		p.pause(PointDecided)
	}
	t, err = p.settle(ctx, d.TaskID, res, d.Approve, pa.Diff, st)
	if err != nil {
		// The decision is recorded, the request's replay record with it:
		// the task as it stands is the answer, and reconcile (or the
		// agent's, for its job) gives the task the decision's outcome.
		return p.tasks.Committed(ctx, d.TaskID, nil, "the decision's outcome", err)
	}
	return t, nil
}

// takenUp is the refusal of the approval of actionID that another
// process's recovery took up as interrupted (err, executor.ErrTakenUp):
// it says whether the task holds the action again.
func (p *Proposals) takenUp(ctx context.Context, taskID, actionID string, err error) error {
	te := &TakenUpError{TaskID: taskID, ActionID: actionID, Err: err}
	if held, perr := p.exec.Pending(ctx, taskID); perr == nil {
		te.HeldAgain = slices.ContainsFunc(held, func(pa executor.Pending) bool { return pa.ActionID == actionID })
	}
	p.logger.Warn("an approval was taken up as interrupted by another process", "task", taskID, "action", actionID,
		"held_again", te.HeldAgain, "err", err)
	return te
}

// held returns the held action of taskID to decide on: actionID, or when
// it is "" the one action the task holds. A task holding several needs
// the action named: a decision never lands on an action the operator did
// not mean.
func (p *Proposals) held(ctx context.Context, taskID, actionID string) (*executor.Pending, error) {
	list, err := p.exec.Pending(ctx, taskID)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(list))
	for i, pa := range list {
		if pa.ActionID == actionID {
			return &list[i], nil
		}
		ids[i] = pa.ActionID + " (" + pa.Action + ")"
	}
	switch {
	case len(list) == 0:
		return nil, &HeldError{TaskID: taskID, ActionID: actionID, Err: ErrNoHeld}
	case actionID != "":
		return nil, &HeldError{TaskID: taskID, ActionID: actionID, Held: ids, Err: ErrNotHeld}
	case len(list) > 1:
		return nil, &HeldError{TaskID: taskID, Held: ids, Err: ErrAmbiguous}
	}
	return &list[0], nil
}

// MaxHeldListed bounds the actions Held and HeldPage return at once.
const MaxHeldListed = 1000

// Held returns the actions taskID holds, oldest first, or when taskID is
// "" those every task holds: the oldest MaxHeldListed of them (HeldPage
// says how many there are and pages through the rest). Each is decided
// by its ActionID.
func (p *Proposals) Held(ctx context.Context, taskID string) ([]executor.Pending, error) {
	page, err := p.HeldPage(ctx, HeldQuery{Task: taskID})
	if err != nil {
		return nil, err
	}
	return page.Actions, nil
}

// HeldQuery selects a page of held actions.
type HeldQuery struct {
	// Task names the task whose held actions are listed; "": every
	// task's.
	Task string
	// After is the action the page starts after, in the listing's order
	// (the oldest first): a page's Next; "": from the oldest.
	After string
	// Limit bounds the page; 0 or more than MaxHeldListed:
	// MaxHeldListed.
	Limit int
	// MaxDiff, when more than 0, bounds the bytes of the diffs the page
	// reads: it ends before the action whose diff would bring them past
	// MaxDiff (but for its first action, which it lists whatever its
	// diff's size), and reads none after that one. A page so ended says
	// so (HeldPage.DiffBound).
	MaxDiff int
}

// HeldPage is one page of held actions: the CLI, the admin socket and the
// console page through the same listing.
type HeldPage struct {
	Actions []executor.Pending
	// Total is how many actions the query's task holds (every task's:
	// all that wait for a decision), on this page or not.
	Total int
	// Next is the After of the next page; "" when there is none.
	Next string
	// DiffBound: the page ended where its diffs reached
	// HeldQuery.MaxDiff, before its Limit; Next starts after it.
	DiffBound bool
}

// HeldPage returns the page of held actions q selects, oldest first,
// with how many are held in all.
func (p *Proposals) HeldPage(ctx context.Context, q HeldQuery) (*HeldPage, error) {
	limit := q.Limit
	if limit <= 0 || limit > MaxHeldListed {
		limit = MaxHeldListed
	}
	// One more than the page tells whether another follows.
	list, total, err := p.exec.PendingPage(ctx, q.Task, q.After, limit+1, q.MaxDiff)
	if err != nil {
		return nil, err
	}
	// The action whose diff passes the bound is read, not listed: it
	// tells that another page follows.
	end, diffs := min(len(list), limit), 0
	for i, a := range list[:end] {
		if diffs += len(a.Diff); q.MaxDiff > 0 && i > 0 && diffs > q.MaxDiff {
			end = i
			break
		}
	}
	page := &HeldPage{Actions: list[:end], Total: total, DiffBound: end < min(len(list), limit)}
	if len(list) > end {
		page.Next = page.Actions[end-1].ActionID
	}
	return page, nil
}

// Holds reports whether taskID still holds the action actionID for a
// decision.
func (p *Proposals) Holds(ctx context.Context, taskID, actionID string) (bool, error) {
	a, err := p.HeldAction(ctx, taskID, actionID)
	return a != nil, err
}

// HeldAction returns the action actionID that taskID holds for a
// decision, as it is now (its diff among the rest); nil when taskID holds
// no such action.
func (p *Proposals) HeldAction(ctx context.Context, taskID, actionID string) (*executor.Pending, error) {
	a, err := p.exec.PendingAction(ctx, actionID)
	if errors.Is(err, executor.ErrNoPending) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if a.TaskID != taskID {
		return nil, nil
	}
	return a, nil
}

// Rollback rolls the promoted action actionID back (executor.Rollback).
func (p *Proposals) Rollback(ctx context.Context, actionID string) error {
	if err := p.exec.Rollback(ctx, actionID); err != nil {
		return fmt.Errorf("action %s: %w", actionID, err)
	}
	return nil
}

// settle applies a decision's result to its task: an agent's job resumes
// with it, a peer's proposal ends the task, and the artifact of the
// changes held (diff) says what became of them (Settled). When that ends
// the task, the actions it still holds are withdrawn. st, when the
// decision's commit carried the task's outcome (see settlement),
// publishes it; nil applies it now.
func (p *Proposals) settle(ctx context.Context, taskID string, res *executor.Result, approved bool, diff string, st *tasks.Settlement) (*tasks.Task, error) {
	t, err := p.settleTask(ctx, taskID, res, approved, diff, st)
	if err == nil && t.Status.State.Terminal() {
		p.withdraw(ctx, taskID, ended(t.Status.State))
	}
	return t, err
}

func (p *Proposals) settleTask(ctx context.Context, taskID string, res *executor.Result, approved bool, diff string, st *tasks.Settlement) (*tasks.Task, error) {
	if p.jobs != nil {
		if mine, err := p.jobs.Owns(ctx, taskID); err != nil {
			return nil, err
		} else if mine {
			return p.jobs.Decided(ctx, taskID, res, approved, diff)
		}
	}
	if st == nil {
		st = p.tasks.Settle(taskID)
	}
	t, err := st.Done(ctx, decided(res, approved, diff))
	if errors.Is(err, tasks.ErrTerminal) {
		// The task ended (a cancel) once the action was under way: the
		// action ran, the task keeps the state it ended in.
		return p.tasks.Task(ctx, taskID)
	}
	return t, err
}

// settlement returns the write that records taskID's outcome in the
// executor's commit of a decision on the action it holds (held with
// diff), so that the action's record and the task's state are durable
// together, and the Settlement that publishes it. An agent's job gets
// neither (nil): the agent resumes it with the outcome afterwards. deny,
// for a denial, gives the result the task fails with.
func (p *Proposals) settlement(ctx context.Context, taskID string, deny func(*executor.Result) *executor.Result, approved bool, diff string) (*tasks.Settlement, executor.Then, error) {
	if p.jobs != nil {
		if mine, err := p.jobs.Owns(ctx, taskID); err != nil || mine {
			return nil, nil, err
		}
	}
	st := p.tasks.Settle(taskID)
	return st, func(ctx context.Context, tx *sql.Tx, res *executor.Result) error {
		if deny != nil {
			res = deny(res)
		}
		return st.In(ctx, tx, decided(res, approved, diff))
	}, nil
}

// decided is the task outcome of a decision on an action held with diff:
// Outcome, and the artifact of the changes held saying what became of
// them (Settled) in the place of the one that showed them waiting.
func decided(res *executor.Result, approved bool, diff string) tasks.Outcome {
	how := SettledDenied
	if approved {
		how = SettledApproved
	}
	out := Outcome(res)
	out.Replace = []tasks.Artifact{Settled(res.ActionID, diff, res, how)}
	return out
}

// Outcome is the task outcome of an executor result: completed with its
// response, failed with its reason, or waiting for input with the note
// naming the action to confirm; the result's artifacts (what was read or
// listed, the diff of a change) go with it.
func Outcome(res *executor.Result) tasks.Outcome {
	out := tasks.Outcome{Artifacts: Artifacts(res)}
	switch res.Outcome {
	case executor.Completed:
		out.State, out.Note = tasks.StateCompleted, res.Response
	case executor.Failed:
		out.State, out.Note = tasks.StateFailed, res.Reason
	default:
		out.State, out.Note = tasks.StateInputRequired, ConfirmationNote(res)
	}
	return out
}

// TaskEnded withdraws the actions taskID still holds when the task has
// ended (a peer or an operator canceled it): none of them can run any
// more, and none should wait in an operator's list. It returns how many
// it withdrew; a task that has not ended keeps its actions (0).
func (p *Proposals) TaskEnded(ctx context.Context, taskID string) (int, error) {
	t, err := p.tasks.Task(ctx, taskID)
	if err != nil {
		return 0, err
	}
	if !t.Status.State.Terminal() {
		return 0, nil
	}
	return p.withdraw(ctx, taskID, ended(t.Status.State)), nil
}

// Ended withdraws the actions t still holds, t having ended (wire it as
// tasks.ServiceOptions.Ended): none of them can run any more, and no
// list should offer an operator a decision the node would refuse. A
// task that has not ended keeps its actions. A withdrawal that fails is
// logged; the next reconcile pass tries again.
func (p *Proposals) Ended(ctx context.Context, t *tasks.Task) {
	if t.Status.State.Terminal() {
		p.withdraw(ctx, t.ID, ended(t.Status.State))
	}
}

// ended is why the actions of a task that ended in state are withdrawn.
func ended(state tasks.State) string { return "the task ended (" + string(state) + ")" }

// withdraw denies, as the host, the actions taskID still holds, its task
// having ended or gone (why says which), and returns how many it denied. A
// failure is logged; the next reconcile pass tries again.
func (p *Proposals) withdraw(ctx context.Context, taskID, why string) int {
	held, err := p.exec.Pending(ctx, taskID)
	if err != nil {
		p.logger.Warn("held actions of an ended task not withdrawn", "task", taskID, "err", err)
		return 0
	}
	n := 0
	for _, pa := range held {
		if _, err := p.exec.DenyThen(ctx, pa.ActionID, executor.Host, why+" before this action was decided", nil); err != nil {
			p.logger.Warn("held action of an ended task not withdrawn", "task", taskID, "action", pa.ActionID, "err", err)
			continue
		}
		n++
		p.logger.Info("withdrew the held action of an ended task", "task", taskID, "action", pa.ActionID, "why", why)
	}
	return n
}
