package periodic_test

import (
	"context"
	"errors"
	"testing"
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
