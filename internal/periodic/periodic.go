package periodic

import (
	"context"
	"fmt"
	"time"
)

// Run calls job at every tick until ctx is done, and then returns ctx's
// error. A failed job is tried again at the next tick; report, if not nil,
// is told of each round, after it, unless ctx ended during it. The caller
// owns ticks: a time.Ticker's C in production, a channel of its own in
// tests.
func Run[N any](ctx context.Context, ticks <-chan time.Time, job func(ctx context.Context, now time.Time) (N, error), report func(N, error)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-ticks:
			n, err := job(ctx, now)
			if report != nil && ctx.Err() == nil {
				report(n, err)
			}
		}
	}
}

// Every calls job every interval until ctx is done, and then returns
// ctx's error, as Run does on a time.Ticker of its own; report, if not
// nil, is told of each failed round. An interval that is not positive is
// an error at once.
func Every(ctx context.Context, interval time.Duration, job func(ctx context.Context) error, report func(error)) error {
	if interval <= 0 {
		return fmt.Errorf("periodic: interval %v", interval)
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	return Run(ctx, tick.C, func(ctx context.Context, _ time.Time) (struct{}, error) {
		return struct{}{}, job(ctx)
	}, func(_ struct{}, err error) {
		if err != nil && report != nil {
			report(err)
		}
	})
}

// Sleep waits for d, or until ctx is done, and then returns ctx's error:
// the wait between two tries of a retry loop (the fallback's endpoints,
// the delegate's looks at its answer).
func Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
