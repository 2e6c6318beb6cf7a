package ratelimit_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/ratelimit"
	"github.com/snapnode/snapnode/internal/testclock"
)

func TestBucket(t *testing.T) {
	clock := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := ratelimit.New(ratelimit.Config{Rate: 2, Burst: 3, Now: clock.Now})
	for i := range 3 {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatalf("request %d of the burst refused", i+1)
		}
	}
	ok, wait := l.Allow("a")
	if ok || wait != 500*time.Millisecond {
		t.Fatalf("past the burst: ok=%v wait=%v, want a refusal with 0.5 s to wait", ok, wait)
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Fatal("another key was limited by a's bucket")
	}
	// A refusal takes no token: after the wait exactly one more passes.
	clock.Advance(wait)
	if ok, _ := l.Allow("a"); !ok {
		t.Fatal("refused after waiting the time it said")
	}
	if ok, _ := l.Allow("a"); ok {
		t.Fatal("two tokens after one token's wait")
	}
	clock.Advance(10 * time.Second)
	for i := range 3 {
		if ok, _ := l.Allow("a"); !ok {
			t.Fatalf("refill capped at the burst: request %d refused", i+1)
		}
	}
	if ok, _ := l.Allow("a"); ok {
		t.Fatal("the bucket refilled beyond its burst")
	}
}

func TestBoundedKeys(t *testing.T) {
	clock := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := ratelimit.New(ratelimit.Config{Rate: 1, Burst: 1, MaxKeys: 100, Now: clock.Now})
	l.Allow("victim")
	for i := range 1000 {
		l.Allow(fmt.Sprint("k", i))
		if l.Len() > 100 {
			t.Fatalf("%d buckets kept, at most 100", l.Len())
		}
	}
	// The least recently used keys went first: the last hundred are kept.
	if ok, _ := l.Allow("k999"); ok {
		t.Fatal("a recent key's empty bucket was dropped")
	}
	if ok, _ := l.Allow("victim"); !ok {
		t.Fatal("the oldest key's bucket was kept past the bound")
	}
}

func TestDisabled(t *testing.T) {
	var nilLimiter *ratelimit.Limiter
	for _, l := range []*ratelimit.Limiter{nilLimiter, ratelimit.New(ratelimit.Config{})} {
		for range 1000 {
			if ok, _ := l.Allow("a"); !ok {
				t.Fatal("a disabled limiter refused")
			}
		}
		if l.Enabled() || l.Len() != 0 {
			t.Fatal("a disabled limiter keeps buckets")
		}
	}
}

func TestConcurrent(t *testing.T) {
	clock := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := ratelimit.New(ratelimit.Config{Rate: 1, Burst: 50, Now: clock.Now})
	var mu sync.Mutex
	allowed := 0
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 100 {
				if ok, _ := l.Allow("shared"); ok {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		})
	}
	wg.Wait()
	if allowed != 50 {
		t.Fatalf("%d of 800 concurrent requests allowed with a burst of 50 and a stopped clock", allowed)
	}
}

func TestRetryAfterSeconds(t *testing.T) {
	for _, c := range []struct {
		d    time.Duration
		want int
	}{{0, 1}, {time.Millisecond, 1}, {time.Second, 1}, {1001 * time.Millisecond, 2}, {59500 * time.Millisecond, 60}, {time.Hour, 3600}, {-time.Second, 1}} {
		if got := ratelimit.RetryAfterSeconds(c.d); got != c.want {
			t.Errorf("RetryAfterSeconds(%v) = %d, want %d", c.d, got, c.want)
		}
	}
}

func BenchmarkAllow(b *testing.B) {
	l := ratelimit.New(ratelimit.Config{Rate: 1e9, Burst: 1 << 30})
	keys := make([]string, 1024)
	for i := range keys {
		keys[i] = fmt.Sprint("bc1p-key-", i)
	}
	b.Run("allow", func(b *testing.B) {
		for i := 0; b.Loop(); i++ {
			l.Allow(keys[i%len(keys)])
		}
	})
	// Baseline: the map lookup alone, under a mutex.
	b.Run("baseline-map", func(b *testing.B) {
		var mu sync.Mutex
		m := make(map[string]int, len(keys))
		for i := 0; b.Loop(); i++ {
			mu.Lock()
			m[keys[i%len(keys)]]++
			mu.Unlock()
		}
	})
}

// SetRate applies to the buckets already kept and to new ones; a rate of 0
// lets everything through, and a rate set again limits again.
func TestSetRate(t *testing.T) {
	clock := testclock.New(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	l := ratelimit.New(ratelimit.Config{Rate: 1, Burst: 1, Now: clock.Now})
	if ok, _ := l.Allow("a"); !ok {
		t.Fatal("first request refused")
	}
	if ok, _ := l.Allow("a"); ok {
		t.Fatal("second request allowed at a burst of 1")
	}
	l.SetRate(10, 3)
	// a's bucket is empty; at the new rate it has a token after 100 ms.
	if ok, wait := l.Allow("a"); ok || wait != 100*time.Millisecond {
		t.Fatalf("after SetRate(10, 3): ok=%v wait=%v, want a refusal with 100ms to wait", ok, wait)
	}
	for i := range 3 {
		if ok, _ := l.Allow("b"); !ok {
			t.Fatalf("a new key's request %d of the new burst of 3 refused", i+1)
		}
	}
	if ok, _ := l.Allow("b"); ok {
		t.Fatal("a new key got more than the new burst")
	}
	l.SetRate(0, 0)
	if l.Enabled() {
		t.Fatal("rate 0: still enabled")
	}
	for range 100 {
		if ok, _ := l.Allow("b"); !ok {
			t.Fatal("rate 0 refused a request")
		}
	}
	l.SetRate(1, 1)
	clock.Advance(time.Second)
	l.Allow("b")
	if ok, _ := l.Allow("b"); ok {
		t.Fatal("limiting set again let a second request through at a burst of 1")
	}
}

// Window states the sustained rate as a whole number of requests in a
// window of whole seconds, the window as short as keeps the limit at 1 or
// more, written as SNAP's error catalogue writes it ("1m").
func TestWindow(t *testing.T) {
	cases := []struct {
		rate   float64
		limit  int
		window string
	}{
		{20, 20, "1s"},
		{2.5, 2, "1s"},
		{0.5, 1, "2s"},
		{1.0 / 60, 1, "1m"},
		{0.001, 1, "1000s"},
		{1.0 / 3600, 1, "1h"},
	}
	for _, tc := range cases {
		l := ratelimit.New(ratelimit.Config{Rate: tc.rate, Burst: 5})
		if limit, window := l.Window(); limit != tc.limit || window != tc.window {
			t.Errorf("rate %v: Window() = %d, %q; want %d, %q", tc.rate, limit, window, tc.limit, tc.window)
		}
	}
}
