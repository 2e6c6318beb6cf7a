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
