package periodic_test

import (
	"context"
	"errors"
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
		done <- periodic.Run(ctx, ticks, func(_ context.Context, now time.Time) (int, error) {
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
	if err := periodic.Every(context.Background(), 0, func(context.Context) error { return nil }, nil); err == nil {
		t.Error("Every with a zero interval: no error")
	}
	synctest.Test(t, func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		fail := errors.New("database gone")
		rounds := 0
		var reported []error
		done := make(chan error, 1)
		go func() {
			done <- periodic.Every(ctx, time.Minute, func(context.Context) error {
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
