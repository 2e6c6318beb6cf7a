package periodic_test

import (
	"context"
	"errors"
	"fmt"
	"runtime/pprof"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapnode/snapnode/internal/periodic"
)

// Each tick runs the job with the tick's time and reports its result; a
// failure does not stop the rounds; the end of ctx ends Run with its error.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	ticks := make(chan time.Time)
	type round struct {
		n   int
		err error
	}
	reports := make(chan round)
	var seen []time.Time
	fail := errors.New("disk full")
	done := make(chan error, 1)
	go func() {
		done <- periodic.Run(ctx, "test", ticks, 0, func(_ context.Context, now time.Time) (int, error) {
			seen = append(seen, now)
			if len(seen) == 1 {
				return 0, fail
			}
			return len(seen), nil
		}, func(n int, err error) { reports <- round{n, err} })
	}()
	t0 := time.Unix(1_700_000_000, 0)
	for i, want := range []round{{0, fail}, {2, nil}, {3, nil}} {
		ticks <- t0.Add(time.Duration(i) * time.Minute)
		if got := <-reports; got.n != want.n || !errors.Is(got.err, want.err) {
			t.Fatalf("round %d: %+v, want %+v", i, got, want)
		}
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
	if len(seen) != 3 || !seen[2].Equal(t0.Add(2*time.Minute)) {
		t.Fatalf("job saw %v", seen)
	}
}

// Every runs its job each interval and reports the failed rounds only; an
// interval that is not positive is refused at once.
func TestEvery(t *testing.T) {
	if err := periodic.Every(context.Background(), "test", 0, 0, func(context.Context) error { return nil }, nil); err == nil {
		t.Error("Every with a zero interval: no error")
	}
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		fail := errors.New("database gone")
		rounds := 0
		var reported []error
		done := make(chan error, 1)
		go func() {
			done <- periodic.Every(ctx, "test", time.Minute, 0, func(context.Context) error {
				rounds++
				if rounds == 2 {
					return fail
				}
				return nil
			}, func(err error) { reported = append(reported, err) })
		}()
		time.Sleep(3*time.Minute + time.Second) // synctest's clock: three rounds
		synctest.Wait()
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Every returned %v, want context.Canceled", err)
		}
		if rounds != 3 || len(reported) != 1 || !errors.Is(reported[0], fail) {
			t.Errorf("%d rounds, reported %v; want 3 rounds and the second's failure alone", rounds, reported)
		}
	})
}

// A round that does not return by itself (a database call on a server
// that hung) is abandoned at its bound, reported as such, and the next
// tick runs the job again; while it runs, its goroutine carries the
// loop's labels.
func TestRunBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		ticks := make(chan time.Time)
		reports := make(chan error, 2)
		calls := 0
		var labels []string
		done := make(chan error, 1)
		go func() {
			done <- periodic.Run(ctx, "sweep", ticks, time.Minute, func(ctx context.Context, _ time.Time) (int, error) {
				calls++
				pprof.ForLabels(ctx, func(k, v string) bool { labels = append(labels, k); return true })
				if calls == 1 {
					<-ctx.Done() // hung
					return 0, fmt.Errorf("sweep: %w", ctx.Err())
				}
				return 1, nil
			}, func(_ int, err error) { reports <- err })
		}()
		start := time.Now()
		ticks <- start
		err := <-reports
		if !errors.Is(err, periodic.ErrAbandoned) || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) != time.Minute {
			t.Fatalf("hung round reported %v after %v, want ErrAbandoned after 1m0s", err, time.Since(start))
		}
		ticks <- time.Now()
		if err := <-reports; err != nil {
			t.Fatalf("next round: %v", err)
		}
		if want := []string{"loop", "pass_deadline"}; !slices.Equal(labels[:2], want) {
			t.Errorf("labels %v, want %v", labels, want)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Errorf("Run = %v", err)
		}
	})
}
