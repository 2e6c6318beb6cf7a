package executor

import (
	"context"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// SetFaults makes e's promotions call promote, and its rollbacks
// rollback, in place of the sandbox's (nil: the sandbox's): the tests of
// package executor_test leave them half-way (sandbox.ErrIncomplete) as
// only a disk failing twice in a row would.
func SetFaults(e *Executor, promote func(ctx context.Context, sb *sandbox.Sandbox, st *sandbox.Staged) error,
	rollback func(ctx context.Context, snap *sandbox.Snapshot) error) {
	e.promoteFault, e.rollbackFault = promote, rollback
}
