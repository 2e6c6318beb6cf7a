package relay

import (
	"testing"
	"time"
)

func TestBackoffGrowsAndCaps(t *testing.T) {
	const base, maxD = 500 * time.Millisecond, 30 * time.Second
	for _, tc := range []struct {
		name string
		r    float64
		want []time.Duration
	}{
		// rand 0: the low end of each step, d/2.
		{"low", 0, []time.Duration{250, 500, 1000, 2000, 4000, 8000, 15000, 15000, 15000}},
		// rand → 1: the top of each step, d, never above the cap.
		{"high", 0.999999999, []time.Duration{500, 1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := backoff{base: base, max: maxD, rand: func() float64 { return tc.r }}
			for i, w := range tc.want {
				got := b.next().Round(time.Millisecond)
				if got != w*time.Millisecond {
					t.Fatalf("attempt %d: got %v, want %v", i, got, w*time.Millisecond)
				}
			}
		})
	}
}

func TestBackoffJitterStaysInStep(t *testing.T) {
	b := backoff{base: 100 * time.Millisecond, max: 3 * time.Second}
	distinct := map[time.Duration]bool{}
	for i := range 1000 {
		step := min(100*time.Millisecond<<min(i, 10), 3*time.Second)
		d := b.next()
		if d < step/2 || d > step {
			t.Fatalf("attempt %d: %v outside [%v, %v]", i, d, step/2, step)
		}
		if step == 3*time.Second {
			distinct[d] = true
		}
	}
	if len(distinct) < 10 {
		t.Fatalf("capped delays are not jittered: %d distinct values", len(distinct))
	}
}

func TestBackoffNoOverflow(t *testing.T) {
	b := backoff{base: time.Hour, max: 1 << 62, rand: func() float64 { return 0.5 }}
	for i := range 200 {
		if d := b.next(); d <= 0 || d > 1<<62 {
			t.Fatalf("attempt %d: %v", i, d)
		}
	}
}

func TestBackoffReset(t *testing.T) {
	b := backoff{base: time.Second, max: time.Minute, rand: func() float64 { return 0 }}
	for range 5 {
		b.next()
	}
	if d := b.next(); d != 16*time.Second {
		t.Fatalf("before reset: %v", d)
	}
	b.reset()
	if d := b.next(); d != 500*time.Millisecond {
		t.Fatalf("after reset: %v, want the base step again", d)
	}
}
