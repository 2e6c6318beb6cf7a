package loadgen

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	hundred := make([]time.Duration, 100)
	for i := range hundred {
		hundred[i] = time.Duration(i+1) * time.Millisecond
	}
	thousand := make([]time.Duration, 1000)
	for i := range thousand {
		thousand[i] = time.Duration(i+1) * time.Microsecond
	}
	for _, c := range []struct {
		name   string
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{"empty", nil, 0.5, 0},
		{"one", []time.Duration{7}, 0.999, 7},
		{"p50 of 100", hundred, 0.50, 50 * time.Millisecond},
		{"p99 of 100", hundred, 0.99, 99 * time.Millisecond},
		{"p999 of 100 is the largest", hundred, 0.999, 100 * time.Millisecond},
		{"p100", hundred, 1, 100 * time.Millisecond},
		{"p999 of 1000", thousand, 0.999, 999 * time.Microsecond},
		{"p50 of 2", []time.Duration{1, 2}, 0.5, 1},
		{"p51 of 2", []time.Duration{1, 2}, 0.51, 2},
	} {
		if got := Percentile(c.sorted, c.q); got != c.want {
			t.Errorf("%s: Percentile(q=%v) = %v, want %v", c.name, c.q, got, c.want)
		}
	}
}

// TestLatenciesBounded checks that a series keeps at most its capacity of
// samples while counting every latency and its maximum.
func TestLatenciesBounded(t *testing.T) {
	l := newLatencies(100, 1)
	for i := range 10_000 {
		l.add(time.Duration(i))
	}
	if len(l.samples) != 100 || l.n != 10_000 || l.max != 9_999 {
		t.Fatalf("kept %d, counted %d, max %v; want 100, 10000, 9.999µs", len(l.samples), l.n, l.max)
	}
	// A uniform sample of 0…9999 has its median near 5000.
	if p50 := l.summary().P50; p50 < 3000 || p50 > 7000 {
		t.Errorf("p50 of the sample %v, want near 5000", p50)
	}
	o := newLatencies(100, 2)
	o.add(20_000)
	l.merge(o)
	if l.n != 10_001 || l.max != 20_000 || len(l.samples) != 100 {
		t.Errorf("after merge: counted %d, max %v, kept %d", l.n, l.max, len(l.samples))
	}
}

// TestLatenciesMergeWeighted checks that merging a sampled series (10,000
// latencies of 1 ms, of which 100 are kept) with a small one (100 of 2 ms,
// all kept) keeps each in proportion to the requests it stands for, in
// either order: about 1 in 100 of the kept samples is 2 ms, not half of
// them, so the merged p50 and p99 are 1 ms.
func TestLatenciesMergeWeighted(t *testing.T) {
	for _, order := range []string{"small first", "sampled first"} {
		big, small := newLatencies(100, 1), newLatencies(100, 2)
		for range 10_000 {
			big.add(time.Millisecond)
		}
		for range 100 {
			small.add(2 * time.Millisecond)
		}
		l := newLatencies(100, 3)
		if order == "small first" {
			l.merge(small)
			l.merge(big)
		} else {
			l.merge(big)
			l.merge(small)
		}
		slow := 0
		for _, d := range l.samples {
			if d == 2*time.Millisecond {
				slow++
			}
		}
		if l.n != 10_100 || l.max != 2*time.Millisecond || len(l.samples) != 100 || slow > 5 {
			t.Errorf("%s: counted %d, max %v, kept %d of which %d of 2 ms; want 10100, 2ms, 100, about 1",
				order, l.n, l.max, len(l.samples), slow)
		}
		if s := l.summary(); s.P50 != time.Millisecond || s.P99 > 2*time.Millisecond {
			t.Errorf("%s: %+v", order, s)
		}
	}
	// Series that fit are kept whole.
	a, b := newLatencies(100, 1), newLatencies(100, 2)
	for i := range 30 {
		a.add(time.Duration(i))
		b.add(time.Duration(100 + i))
	}
	a.merge(b)
	if a.n != 60 || len(a.samples) != 60 {
		t.Errorf("30 and 30 merged: counted %d, kept %d; want 60, 60", a.n, len(a.samples))
	}
}
