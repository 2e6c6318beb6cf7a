package tasks

import (
	"context"
	"fmt"
	"time"

	"github.com/snapnode/snapnode/internal/periodic"
)

// pruneBatch is how many tasks one Prune call deletes at most, so that a
// large backlog does not hold the database's writer for long.
const pruneBatch = 1000

// Retention deletes tasks some time after they end. The host decides how
// long (the operator's configuration); a requester cannot.
type Retention struct {
	Store Store
	// TTL is how long a terminal task is kept; 0 or less keeps tasks.
	TTL time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time
}

// PruneOnce deletes every task terminal for longer than TTL, in batches,
// and returns how many it deleted.
func (r Retention) PruneOnce(ctx context.Context) (int, error) {
	if r.TTL <= 0 {
		return 0, nil
	}
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	cut := now().Add(-r.TTL)
	total := 0
	for {
		n, err := r.Store.Prune(ctx, cut, pruneBatch)
		total += n
		if err != nil {
			return total, fmt.Errorf("tasks: retention: %w", err)
		}
		if n < pruneBatch {
			return total, nil
		}
	}
}

// retentionLoop names Run's passes (periodic.Pass).
const retentionLoop = "task retention"

// Run prunes at once and then every interval until ctx is done, and
// returns ctx's error, each round given up after bound (see
// periodic.Pass). report, if not nil, is told of each round.
func (r Retention) Run(ctx context.Context, interval, bound time.Duration, report func(deleted int, err error)) error {
	if interval <= 0 {
		return fmt.Errorf("tasks: retention: interval %v", interval)
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	prune := func(ctx context.Context, _ time.Time) (int, error) { return r.PruneOnce(ctx) }
	n, err := periodic.Pass(ctx, retentionLoop, bound, func(ctx context.Context) (int, error) { return prune(ctx, time.Time{}) })
	if report != nil && ctx.Err() == nil {
		report(n, err)
	}
	return periodic.Run(ctx, retentionLoop, tick.C, bound, prune, report)
}
