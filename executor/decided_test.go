package executor_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/testdb"
)

// An approval that fails after its first commit stood (the caller's
// before written with it: an operator's replay record) says so, with a
// *executor.DecidedError, and whether the action was given back to the
// operators: the caller cannot tell it from a failure of that first
// commit otherwise, after which nothing of the approval stays (the
// caller's write included). Here the promotion finds a file changed,
// the approval stages again, and the second attempt's first commit
// fails (the database busy): the action is held again. A failure of the
// approval's last commit, the files promoted, leaves it promoting for
// the recovery. A failure of the first commit itself is no
// DecidedError.
func TestApprovalFailingAfterItsFirstCommit(t *testing.T) {
	errBusy := errors.New("injected: database is locked")
	for _, tc := range []struct {
		name      string
		changed   bool // the promotion finds a file changed (sandbox.ErrChanged)
		failFirst int  // the call of before that fails (0: none)
		failThen  bool // the caller's write of the outcome fails
		decided   bool // a DecidedError
		heldAgain bool
		state     string // the action's after the approval
	}{
		{name: "staged again, its commit failing", changed: true, failFirst: 2, decided: true, heldAgain: true, state: "pending"},
		{name: "last commit failing", failThen: true, decided: true, state: "promoting"},
		{name: "first commit failing", failFirst: 1, state: "pending"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, dsn string) {
				v := newEnv(t, dsn)
				ctx := context.Background()
				v.file("c.txt", "c\n")
				held := v.run(agent, prop("DELETE_FILE", map[string]string{"path": "/sandbox/c.txt"}))
				if held.Outcome != executor.NeedsConfirmation {
					t.Fatalf("delete: %s", held.Outcome)
				}
				if tc.changed {
					executor.SetFaults(v.ex, func(context.Context, *sandbox.Sandbox, *sandbox.Staged) error {
						return sandbox.ErrChanged
					}, nil)
				}
				calls := 0
				before := func(context.Context, *sql.Tx) error {
					if calls++; calls == tc.failFirst {
						return errBusy
					}
					return nil
				}
				var then executor.Then
				if tc.failThen {
					then = func(context.Context, *sql.Tx, *executor.Result) error { return errBusy }
				}
				_, err := v.ex.ApproveThen(ctx, held.ActionID, operator, before, then)
				if !errors.Is(err, errBusy) {
					t.Fatalf("approval: %v; want the injected failure", err)
				}
				de, ok := errors.AsType[*executor.DecidedError](err)
				if ok != tc.decided || ok && (de.HeldAgain != tc.heldAgain || de.ActionID != held.ActionID) {
					t.Fatalf("approval: %#v; want a DecidedError %v, held again %v", err, tc.decided, tc.heldAgain)
				}
				if a := v.action(held.ActionID); a.State != tc.state {
					t.Fatalf("the action is %s; want %s", a.State, tc.state)
				}
			})
		})
	}
}
