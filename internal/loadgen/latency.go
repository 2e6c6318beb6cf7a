package loadgen

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// maxSamples bounds the latencies kept per series: beyond it a uniform
// sample of that size is kept (reservoir sampling), so a long run uses
// bounded memory (8 MiB a series) and its percentiles stay unbiased.
const maxSamples = 1 << 20

// latencies is the record of one series of requests. It is not safe for
// concurrent use.
type latencies struct {
	n       int64 // every latency recorded, kept or not
	samples []time.Duration
	max     time.Duration
	cap     int
	rnd     *rand.Rand
}

func newLatencies(capacity int, seed uint64) *latencies {
	return &latencies{cap: capacity, rnd: rand.New(rand.NewPCG(seed, 0x5eed))}
}

func (l *latencies) add(d time.Duration) {
	l.n++
	l.max = max(l.max, d)
	if len(l.samples) < l.cap {
		l.samples = append(l.samples, d)
		return
	}
	if i := l.rnd.Int64N(l.n); i < int64(l.cap) {
		l.samples[i] = d
	}
}

// merge adds o to l. The latencies of a series o kept whole are added one
// by one, as they came. When o kept only a sample, the merged sample is
// drawn from both in proportion to the latencies each stands for (l.n and
// o.n), not to the samples each kept: a sample of a million requests
// outweighs a thousand requests kept whole. It reorders o's samples.
func (l *latencies) merge(o *latencies) {
	if o.n == int64(len(o.samples)) {
		for _, d := range o.samples {
			l.add(d)
		}
		return
	}
	l.max = max(l.max, o.max)
	// A uniform sample without replacement of the union of the two
	// populations: each draw is from l's with the probability of its
	// share of the latencies not drawn yet, and takes one of the samples
	// of that side not taken yet, at random (a uniform subset of a uniform
	// sample is a uniform sample).
	mine, theirs := l.samples, o.samples
	merged := make([]time.Duration, 0, min(l.cap, len(mine)+len(theirs)))
	remMine, remTheirs := l.n, o.n
	usedMine, usedTheirs := 0, 0
	take := func(s []time.Duration, used int) time.Duration {
		j := used + l.rnd.IntN(len(s)-used)
		s[used], s[j] = s[j], s[used]
		return s[used]
	}
	for len(merged) < cap(merged) {
		fromMine := l.rnd.Int64N(remMine+remTheirs) < remMine
		if usedMine == len(mine) {
			fromMine = false
		} else if usedTheirs == len(theirs) {
			fromMine = true
		}
		if fromMine {
			merged = append(merged, take(mine, usedMine))
			usedMine++
			remMine--
		} else {
			merged = append(merged, take(theirs, usedTheirs))
			usedTheirs++
			remTheirs--
		}
	}
	l.samples = merged
	l.n += o.n
}

// Percentile returns the q-quantile (0 < q ≤ 1) of sorted by the nearest
// rank: the smallest value that at least q of the values do not exceed.
// It returns 0 for no values.
func Percentile(sorted []time.Duration, q float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// The epsilon keeps q·n that rounds just above a whole number on it.
	rank := int(math.Ceil(q*float64(len(sorted)) - 1e-9))
	return sorted[min(max(rank, 1), len(sorted))-1]
}

// summary is the percentiles of l.
func (l *latencies) summary() Latency {
	s := slices.Clone(l.samples)
	slices.Sort(s)
	return Latency{
		P50: Percentile(s, 0.50), P99: Percentile(s, 0.99), P999: Percentile(s, 0.999), Max: l.max,
	}
}
