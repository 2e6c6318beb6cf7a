package executor

import (
	"context"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/testdb"
)

// SetFaults makes e's promotions call promote, and its rollbacks
// rollback, in place of the sandbox's (nil: the sandbox's), given the
// sandbox that would have run them: the tests of package executor_test
// leave them half-way (sandbox.ErrIncomplete) as only a disk failing
// twice in a row would, or stand them still before they change anything.
func SetFaults(e *Executor, promote func(ctx context.Context, sb *sandbox.Sandbox, st *sandbox.Staged) error,
	rollback func(ctx context.Context, sb *sandbox.Sandbox, snap *sandbox.Snapshot) error) {
	e.promoteFault, e.rollbackFault = promote, rollback
}

// EndedPlan returns SQLite's plan for the query of the ended records that
// Forget reads (see testdb.QueryPlan).
func EndedPlan(t testing.TB, e *Executor) []string {
	return testdb.QueryPlan(t, e.store.db.R, e.store.endedQuery(), int64(1), int64(0), int64(0), "", forgetBatch)
}

// SetRecovering makes e's recoveries (RecoverInterruptedWith) call f once
// they have read an action's record, before they do anything with it (nil:
// nothing): the tests stand a recovery still there while the call that
// holds the action goes on.
func SetRecovering(e *Executor, f func(actionID string)) {
	e.recovering = f
}
