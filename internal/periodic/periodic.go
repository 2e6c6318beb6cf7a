package periodic

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"time"
)

// ErrAbandoned is wrapped by the error of a pass its deadline cut (see
// Pass).
var ErrAbandoned = errors.New("periodic: pass abandoned")

// Pass runs one pass of the loop named loop: job, on ctx bounded by
// bound (no bound when bound is not positive), so that a database call
// that does not return (a server that hung) is given up, and the loop
// goes on at its next tick. A pass its deadline cut while ctx lives
// returns an error that wraps ErrAbandoned and the job's own, naming
// bound. While job runs its goroutine carries the pprof labels "loop"
// and, when bounded, "pass_deadline" (RFC 3339, UTC): a goroutine
// profile (debug=1) names the loop of each pass in progress and when it
// is to be given up.
func Pass[N any](ctx context.Context, loop string, bound time.Duration, job func(context.Context) (N, error)) (N, error) {
	pctx, cancel := ctx, context.CancelFunc(func() {})
	labels := []string{"loop", loop}
	if bound > 0 {
		deadline := time.Now().Add(bound)
		pctx, cancel = context.WithDeadline(ctx, deadline)
		labels = append(labels, "pass_deadline", deadline.UTC().Format(time.RFC3339Nano))
	}
	defer cancel()
	var (
		n   N
		err error
	)
	pprof.Do(pctx, pprof.Labels(labels...), func(pctx context.Context) { n, err = job(pctx) })
	if err != nil && bound > 0 && pctx.Err() != nil && ctx.Err() == nil {
		err = fmt.Errorf("%w after %v, tried again at the next tick: %w", ErrAbandoned, bound, err)
	}
	if observe, ok := ctx.Value(observerKey{}).(func(string, error)); ok && ctx.Err() == nil {
		observe(loop, err)
	}
	return n, err
}

type observerKey struct{}

// WithObserver returns ctx carrying observe, which each Pass on it, or
// on a context made from it, tells of its end (unless ctx ended during
// it): its loop, and its error, nil for a pass that succeeded, one that
// wraps ErrAbandoned for a pass its bound cut. observe must be safe for
// concurrent use.
func WithObserver(ctx context.Context, observe func(loop string, err error)) context.Context {
	return context.WithValue(ctx, observerKey{}, observe)
}

// Run calls job at every tick until ctx is done, and then returns ctx's
// error, each call a Pass of loop bounded by bound. A failed job (one
// abandoned at its bound included) is tried again at the next tick;
// report, if not nil, is told of each round, after it, unless ctx ended
// during it. The caller owns ticks: a time.Ticker's C in production, a
// channel of its own in tests.
func Run[N any](ctx context.Context, loop string, ticks <-chan time.Time, bound time.Duration, job func(ctx context.Context, now time.Time) (N, error), report func(N, error)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case now := <-ticks:
			n, err := Pass(ctx, loop, bound, func(ctx context.Context) (N, error) { return job(ctx, now) })
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
func Every(ctx context.Context, loop string, interval, bound time.Duration, job func(ctx context.Context) error, report func(error)) error {
	if interval <= 0 {
		return fmt.Errorf("periodic: %s: interval %v", loop, interval)
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	return Run(ctx, loop, tick.C, bound, func(ctx context.Context, _ time.Time) (struct{}, error) {
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
