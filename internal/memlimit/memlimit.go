package memlimit

import (
	"context"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
)

// Hand-written: no maintained module adjusts the limit to the live heap
// (those known set it once, from a container's memory limit, or tune
// GOGC the other way round, to collect less often under a ceiling).

// Runtime metrics read after each collection.
const (
	liveBytes     = "/gc/heap/live:bytes"
	totalBytes    = "/memory/classes/total:bytes"
	objectsBytes  = "/memory/classes/heap/objects:bytes"
	freeBytes     = "/memory/classes/heap/free:bytes"
	releasedBytes = "/memory/classes/heap/released:bytes"
)

// Usage is what the runtime held at the end of a collection.
type Usage struct {
	// Live is the heap memory marked live by the collection.
	Live int64
	// Other is what the runtime counts against its limit besides the
	// heap's objects: goroutine stacks, its own structures, profiling
	// buckets, and the unused space of the heap's spans in use (which
	// the heap cannot grow into).
	Other int64
}

// Limit returns the soft memory limit for target given u: target, unless
// the live heap needs more room. The room is a quarter of the live heap
// to grow into before the next collection, above what is live and Other,
// plus the headroom the runtime keeps below its limit (3 % of the heap's
// goal, at least 1 MiB), so that the heap's goal under the limit is at
// least 1.25 times what is live. A quarter, not a half: a node under a
// flood (13 MiB live, 15 MiB of stacks and runtime structures) then
// stays within its 32 MiB target instead of raising the limit to
// 38 MiB, for collections twice as frequent while the live heap does
// not fit, about 6 % more CPU under that flood (docs/benchmarks.md).
func Limit(target int64, u Usage) int64 {
	heap := u.Live + u.Live/4
	return max(target, u.Other+max(heap*100/97, heap+1<<20))
}

// Read returns the runtime's usage as of its last collection.
func Read() Usage {
	s := []metrics.Sample{
		{Name: liveBytes}, {Name: totalBytes}, {Name: objectsBytes},
		{Name: freeBytes}, {Name: releasedBytes},
	}
	metrics.Read(s)
	v := func(i int) int64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0 // not supported by this runtime
		}
		return int64(min(s[i].Value.Uint64(), math.MaxInt64))
	}
	return Usage{Live: v(0), Other: v(1) - v(2) - v(3) - v(4)}
}

// Hold runs Run for target in a goroutine, unless target is 0 or less or
// GOMEMLIMIT is set in the environment (the runtime's own limit then
// stays in force). Calling the returned function stops it and waits
// until the limit in force before is restored.
func Hold(ctx context.Context, target int64) (stop func()) {
	if target <= 0 || os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		Run(ctx, target)
	}()
	return func() { cancel(); <-done }
}

// Run holds the runtime's soft memory limit at Limit(target, Read()),
// set again after every collection, until ctx ends; then it restores the
// limit in force before and returns. Only one Run should be active at a
// time: the limit and the percentage are the process's, and each Run
// restores what it found, so two overlapping Runs ended out of order can
// leave the percentage off under a limit nobody follows any more (or, for
// a moment as one ends while the other starts, off with no limit at all).
//
// While it runs, the collector's percentage (GOGC) is off unless GOGC is
// set in the environment: the collector runs when the runtime's memory
// reaches the limit, not each time the heap doubles. A program with a
// small live heap then collects several times less often (a node with
// 6 MiB live collected every 180 ms at GOGC=100 under a peer's steady
// reads, each collection taking a core for 2-4 ms beside its requests)
// and holds its target instead of twice its live heap; one whose live
// heap outgrows the target collects at 1.25 times what is live, as it
// would at GOGC=25. The percentage in force
// before is restored, before the limit, when Run returns.
func Run(ctx context.Context, target int64) {
	run(ctx, target, nil)
}

// run is Run; set, when not nil, is called with each limit set.
func run(ctx context.Context, target int64, set func(int64)) {
	before := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(before)
	collected := make(chan struct{}, 1)
	stop := watchCollections(collected)
	defer stop()
	apply := func() {
		limit := Limit(target, Read())
		debug.SetMemoryLimit(limit)
		if set != nil {
			set(limit)
		}
	}
	apply()
	if os.Getenv("GOGC") == "" {
		// Deferred after the limit's restore, so run before it: the
		// percentage is never off without the limit.
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
	}
	for {
		select {
		case <-ctx.Done():
			return
		case <-collected:
			apply()
		}
	}
}

// watchCollections signals c (without blocking: a pending signal is
// enough) after each garbage collection, until stop is called. Each
// collection finds the previous sentinel unreachable and runs its
// cleanup, which signals and sets the next one.
func watchCollections(c chan<- struct{}) (stop func()) {
	done := make(chan struct{})
	var arm func()
	arm = func() {
		// Larger than the tiny allocator's 16 bytes, whose blocks are
		// shared and may outlive their objects.
		s := new([32]byte)
		runtime.AddCleanup(s, func(struct{}) {
			select {
			case <-done:
				return
			default:
			}
			select {
			case c <- struct{}{}:
			default:
			}
			arm()
		}, struct{}{})
	}
	arm()
	return func() { close(done) }
}
