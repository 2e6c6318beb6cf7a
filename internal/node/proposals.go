package node

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/console"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/snap"
)

// reconcileInterval is how often the node looks again for tasks a stop
// left interrupted (proposals.ReconcileEvery): on PostgreSQL, those a
// replica was running when this node started and that stayed interrupted
// past reconcile_after.
const reconcileInterval = time.Minute

// startReconciler runs a reconcile pass of props every reconcileInterval,
// for the tasks that stood still for after (reconcile_after), until the
// returned stop is called (it waits for the pass in progress).
func startReconciler(ctx context.Context, props *proposals.Proposals, after time.Duration, at loopTiming, logger *slog.Logger) (stop func()) {
	rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	tick := time.NewTicker(at.interval)
	done := make(chan struct{})
	go func() {
		defer close(done)
		props.ReconcileEvery(rctx, tick.C, after, at.bound, func(r proposals.Reconciled, err error) {
			if err != nil && rctx.Err() == nil {
				logger.Warn("reconcile pass", "err", err)
			}
			if r.Resumed+r.Settled+r.Withdrawn > 0 {
				logger.Warn("took up tasks left interrupted", "resumed", r.Resumed, "settled", r.Settled, "ended", r.Ended, "withdrawn", r.Withdrawn)
			}
		})
	}()
	return func() { cancel(); <-done; tick.Stop() }
}

// adminHandler is the admin socket's handler: decisions and rollbacks go
// to the proposals, login URLs to the console.
type adminHandler struct {
	props *proposals.Proposals
	// agent is the node's agent runtime; nil without one.
	agent *agent.Runtime
	// console, once the HTTP listener serves it, issues the login URLs.
	console *atomic.Pointer[consoleLogin]
	logger  *slog.Logger
}

var _ admin.Handler = adminHandler{}

// heldAction is one held action as `snapnode held` lists it.
type heldAction struct {
	Task      string    `json:"task"`
	Action    string    `json:"action"`
	Kind      string    `json:"kind"`
	Requester string    `json:"requester"`
	Reason    string    `json:"reason"`
	Created   time.Time `json:"created"`
	// Diff is what approving it changes, as an operator reads it (every
	// invisible character spelled out: executor.Visible); DiffSum is the
	// SHA-256 of the diff itself, which an approval may name (`snapnode
	// approve --diff`) to be refused should the action be held again
	// with another.
	Diff    string `json:"diff,omitempty"`
	DiffSum string `json:"diff_sha256"`
	// DiffCut counts the bytes of the diff left out of Diff, a diff that
	// alone would pass the socket's bound (heldDiffShown); 0: Diff is
	// whole.
	DiffCut int `json:"diff_cut,omitempty"`
}

// heldList is a page of held actions as `snapnode held` reads it: Total
// counts every action held (the task's, when one is named), on the page
// or not; Next is the action the next page starts after, "" for none.
type heldList struct {
	Actions []heldAction `json:"actions"`
	Total   int          `json:"total"`
	Next    string       `json:"next,omitempty"`
	// DiffsBounded: the page ended before its limit, where the diffs it
	// reads (heldDiffBudget, heldSumBudget) or sends were spent; Next
	// lists the rest.
	DiffsBounded bool `json:"diffs_bounded,omitempty"`
}

// Diff budgets of a held page (proposals.HeldQuery.MaxDiff): with the
// diffs themselves, up to twelve bytes a byte once spelled out and
// written as JSON, within the admin socket's bound (admin.MaxResponse);
// with their sums alone, what the node reads for one page.
//
// heldDiffShown bounds the diff of one action as sent: written as JSON
// (a "<" is six bytes, \u003c), within 3/4 of the socket's bound.
const (
	heldDiffBudget = admin.MaxResponse / 16
	heldSumBudget  = admin.MaxResponse
	heldDiffShown  = admin.MaxResponse / 8
)

// Held implements admin.Handler. The diffs a page reads are bounded
// (heldDiffBudget, heldSumBudget): the page ends where they are spent,
// and says so; the one after is read, no more.
func (h adminHandler) Held(ctx context.Context, taskID, after string, limit int, withDiff bool) (any, error) {
	budget := heldSumBudget
	if withDiff {
		budget = heldDiffBudget
	}
	page, err := h.props.HeldPage(ctx, proposals.HeldQuery{Task: taskID, After: after, Limit: limit, MaxDiff: budget})
	if err != nil {
		return nil, err
	}
	out := make([]heldAction, 0, len(page.Actions))
	next, shown := page.Next, 0
	for _, pa := range page.Actions {
		a := heldAction{Task: pa.TaskID, Action: pa.ActionID, Kind: pa.Action, Requester: pa.Requester, Reason: pa.Reason, Created: pa.Created.UTC(),
			DiffSum: proposals.DiffSum(pa.Diff)}
		if withDiff {
			a.Diff = executor.Visible(pa.Diff)
			if len(a.Diff) > heldDiffShown {
				// One diff can pass the socket's bound alone (a
				// composite's changes are one diff): its start is
				// shown, the rest counted.
				var used int
				a.Diff, used = executor.VisiblePrefix(pa.Diff, heldDiffShown, false)
				a.DiffCut = len(pa.Diff) - used
			}
			// As sent, a page's diffs within the budget can still pass
			// the socket's bound (its first is listed whatever its
			// size): the page ends before the one that would.
			b, _ := json.Marshal(a.Diff)
			if shown += len(b); len(out) > 0 && shown > admin.MaxResponse*3/4 {
				next = out[len(out)-1].Action
				break
			}
		}
		out = append(out, a)
	}
	return heldList{Actions: out, Total: page.Total, Next: next, DiffsBounded: page.DiffBound || next != page.Next}, nil
}

// Decide implements admin.Handler: the host decides.
func (h adminHandler) Decide(ctx context.Context, taskID, actionID string, approve bool, reason, diff string) (any, error) {
	t, err := h.props.Decide(ctx, proposals.Decision{TaskID: taskID, ActionID: actionID, Approver: executor.Host, Approve: approve, Reason: reason, Diff: diff})
	switch {
	case snap.CodeOf(err) == snap.CodeTaskNotFound:
		// The SNAP error a requester gets says less than an operator needs.
		return nil, fmt.Errorf("no task %s on this node (a task is deleted task_retention after it ends)", taskID)
	case err != nil:
		return nil, err
	}
	return t, nil
}

// Rollback implements admin.Handler.
func (h adminHandler) Rollback(ctx context.Context, actionID string) (any, error) {
	if err := h.props.Rollback(ctx, actionID); err != nil {
		return nil, err
	}
	return map[string]any{"action": actionID, "rolledBack": true}, nil
}

// ConsoleURL implements admin.Handler: a one-time login URL to the
// console for the host, who reached the admin socket, to be opened by a
// browser of the local user user (admin.AnyUser: by any client).
func (h adminHandler) ConsoleURL(ctx context.Context, user int) (any, error) {
	cl := h.console.Load()
	if cl == nil {
		return nil, errNoConsole
	}
	if user == admin.AnyUser {
		user = console.AnyUser
	}
	url, exp, err := cl.c.LoginURL(cl.base, executor.Host, user)
	if err != nil {
		return nil, err
	}
	h.logger.Info("console: issued a one-time login URL", "expires", exp, "uid", user)
	res := map[string]any{"url": url, "expires": exp.UTC()}
	if user != console.AnyUser && consolePeerUser() != nil {
		res["uid"] = user // the only user whose connection spends it
	}
	return res, nil
}

// startAdmin opens the admin socket in the data folder on h and serves
// it until the returned stop is called (it waits for the commands in
// progress).
func startAdmin(ctx context.Context, dataDir string, h adminHandler, logger *slog.Logger) (stop func() error, err error) {
	srv, err := admin.Listen(admin.Path(dataDir), h, logger)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	return background(context.WithoutCancel(ctx), srv.Serve), nil
}

// background runs run on a goroutine of its own until ctx ends or the
// returned stop is called; stop waits for run to return and returns its
// error.
func background(ctx context.Context, run func(context.Context) error) (stop func() error) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	return func() error { cancel(); return <-done }
}
