package node

import (
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/ratelimit"
)

// allowed counts how many requests of one key lim allows at once, out of
// 1,000, on a stopped clock.
func allowed(lim *ratelimit.Limiter) int {
	n := 0
	for range 1000 {
		if ok, _ := lim.Allow("key"); ok {
			n++
		}
	}
	return n
}

// With N processes sharing the requests out, each allows one N-th of a
// key's burst (at least 1); a reload keeps the share.
func TestKeyLimitShare(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := func() time.Time { return now }
	cases := []struct {
		rate        float64
		burst       int
		alive, want int
	}{
		{rate: 10, burst: 20, alive: 1, want: 20},
		{rate: 10, burst: 20, alive: 2, want: 10},
		{rate: 10, burst: 20, alive: 3, want: 7},
		{rate: 10, burst: 2, alive: 4, want: 1},
		{rate: 10, burst: 0, alive: 2, want: 5}, // the default burst: one second of the share
		{rate: 10, burst: 20, alive: 0, want: 20},
	}
	for _, c := range cases {
		lim := ratelimit.New(ratelimit.Config{Rate: c.rate, Burst: c.burst, Now: clock})
		k := newKeyLimitShare(lim, c.rate, c.burst)
		k.setAlive(c.alive)
		if got := allowed(lim); got != c.want {
			t.Errorf("rate %v burst %d, %d alive: %d allowed at once, want %d", c.rate, c.burst, c.alive, got, c.want)
		}
	}
	lim := ratelimit.New(ratelimit.Config{Rate: 10, Burst: 20, Now: clock})
	k := newKeyLimitShare(lim, 10, 20)
	k.setAlive(2)
	k.set(40, 40)
	if got := allowed(lim); got != 20 {
		t.Errorf("reloaded to burst 40 with 2 alive: %d allowed at once, want 20", got)
	}
}
