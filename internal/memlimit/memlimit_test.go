package memlimit

import (
	"context"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strconv"
	"testing"
	"time"
)

func TestLimit(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name   string
		target int64
		u      Usage
		want   int64
	}{
		{"room under the target", 32 * mib, Usage{Live: 10 * mib, Other: 8 * mib}, 32 * mib},
		// 20 MiB of heap and its headroom (3 %: 633 KiB, so 1 MiB).
		{"exactly the target", 32 * mib, Usage{Live: 16 * mib, Other: 11 * mib}, 32 * mib},
		{"a byte past the target", 32 * mib, Usage{Live: 16 * mib, Other: 11*mib + 1}, 32*mib + 1},
		// 25 MiB of heap and its headroom (3 %: 792 KiB, so 1 MiB).
		{"the live heap needs more", 32 * mib, Usage{Live: 20 * mib, Other: 8 * mib}, 34 * mib},
		// 500 MiB of heap: 3 % of the goal, 15.46 MiB, is the headroom.
		{"far past the target", 32 * mib, Usage{Live: 400 * mib, Other: 10 * mib}, 10*mib + 500*mib*100/97},
	} {
		if got := Limit(c.target, c.u); got != c.want {
			t.Errorf("%s: Limit(%d, %+v) = %d, want %d", c.name, c.target, c.u, got, c.want)
		}
	}
}

func TestReadAfterCollection(t *testing.T) {
	keep := make([][]byte, 16)
	for i := range keep {
		keep[i] = make([]byte, 1<<20)
	}
	runtime.GC()
	u := Read()
	runtime.KeepAlive(keep)
	if u.Live < 16<<20 {
		t.Errorf("live heap %d bytes with 16 MiB held", u.Live)
	}
	if u.Other <= 0 {
		t.Errorf("runtime's other memory %d bytes, want some (stacks, structures)", u.Other)
	}
}

// Run sets the limit at once, raises it after the collection that finds a
// live heap too large for the target, lowers it back once that heap is
// gone, and restores the limit in force before when its context ends.
func TestRunFollowsTheLiveHeap(t *testing.T) {
	const target = 16 << 20
	before := debug.SetMemoryLimit(-1)
	ctx, cancel := context.WithCancel(context.Background())
	set := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx, target, func(int64) {
			select {
			case set <- struct{}{}:
			default:
			}
		})
	}()
	defer func() {
		cancel()
		<-done
		if got := debug.SetMemoryLimit(-1); got != before {
			t.Errorf("limit %d after Run, want %d as before", got, before)
		}
	}()
	// waitFor collects until Run has set a limit that satisfies ok.
	waitFor := func(what string, ok func(int64) bool) {
		t.Helper()
		deadline := time.After(30 * time.Second)
		for {
			runtime.GC()
			select {
			case <-set:
				if ok(debug.SetMemoryLimit(-1)) {
					return
				}
			case <-deadline:
				t.Fatalf("%s: limit %d", what, debug.SetMemoryLimit(-1))
			}
		}
	}
	waitFor("at rest", func(l int64) bool { return l >= target && l < 1<<40 })

	keep := make([][]byte, 48) // 48 MiB live: far past the target
	for i := range keep {
		keep[i] = make([]byte, 1<<20)
	}
	waitFor("with 48 MiB live", func(l int64) bool { return l >= 60<<20 })
	runtime.KeepAlive(keep)
	keep = nil
	waitFor("once it is gone", func(l int64) bool { return l < 48<<20 })
}

// Hold leaves the limit in force for a target of 0 and when GOMEMLIMIT
// is set; otherwise it sets one, and its stop restores the one before.
func TestHold(t *testing.T) {
	const prior = 1 << 40
	before := debug.SetMemoryLimit(prior)
	defer debug.SetMemoryLimit(before)
	ctx := context.Background()

	stop := Hold(ctx, 0)
	if got := debug.SetMemoryLimit(-1); got != prior {
		t.Errorf("target 0: limit %d, want %d unchanged", got, prior)
	}
	stop()

	t.Setenv("GOMEMLIMIT", "1GiB")
	stop = Hold(ctx, 32<<20)
	if got := debug.SetMemoryLimit(-1); got != prior {
		t.Errorf("with GOMEMLIMIT set: limit %d, want %d unchanged", got, prior)
	}
	stop()

	// The percentage in force is the runtime's (GOGC when the test
	// started), and GOGC is cleared so that Hold turns it off.
	gogc := gcPercent()
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	stop = Hold(ctx, 32<<20)
	for debug.SetMemoryLimit(-1) == prior {
		runtime.Gosched() // Run sets the limit as it starts
	}
	if got := debug.SetMemoryLimit(-1); got < 32<<20 || got >= prior {
		t.Errorf("target 32 MiB: limit %d", got)
	}
	// The percentage is turned off just after the limit is set.
	for end := time.Now().Add(5 * time.Second); gcPercent() != -1 && time.Now().Before(end); {
		runtime.Gosched()
	}
	if got := gcPercent(); got != -1 {
		t.Errorf("target 32 MiB: GOGC %d, want off (the limit decides when to collect)", got)
	}
	stop()
	if got := debug.SetMemoryLimit(-1); got != prior {
		t.Errorf("after stop: limit %d, want %d restored", got, prior)
	}
	if got := gcPercent(); got != gogc {
		t.Errorf("after stop: GOGC %d, want %d restored", got, gogc)
	}

	// GOGC set in the environment is the operator's: left as it is.
	t.Setenv("GOGC", strconv.Itoa(gogc))
	stop = Hold(ctx, 32<<20)
	for debug.SetMemoryLimit(-1) == prior {
		runtime.Gosched()
	}
	if got := gcPercent(); got != gogc {
		t.Errorf("with GOGC set: GOGC %d, want %d unchanged", got, gogc)
	}
	stop()
}

// gcPercent reads the collector's percentage (GOGC; -1 when off) without
// setting it: reading it with debug.SetGCPercent would set it for a
// moment, and undo a change Run makes in that moment.
func gcPercent() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(int64(s[0].Value.Uint64()))
}

// On a fragmented heap (every other small object freed, so that half of
// its spans' space is unused and cannot be grown into) the heap's goal
// under the limit Run sets is still 1.25 times what is live: the unused
// space is counted beside the runtime's other memory, not as room.
func TestRunLeavesRoomOnAFragmentedHeap(t *testing.T) {
	const objects = 1 << 18 // of 64 bytes: 16 MiB kept, 16 MiB freed in between
	all := make([][]byte, 2*objects)
	for i := range all {
		all[i] = make([]byte, 64)
	}
	keep := make([][]byte, 0, objects)
	for i := 0; i < len(all); i += 2 {
		keep = append(keep, all[i])
	}
	all = nil
	runtime.GC()

	before := debug.SetMemoryLimit(-1)
	defer debug.SetMemoryLimit(before)
	ctx, cancel := context.WithCancel(context.Background())
	set := make(chan struct{}, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(ctx, 16<<20, func(int64) {
			select {
			case set <- struct{}{}:
			default:
			}
		})
	}()
	defer func() { cancel(); <-done }()
	<-set // Run has set its first limit, and watches the collections
	runtime.GC()
	<-set // the limit set after that collection
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}, {Name: "/memory/classes/heap/unused:bytes"}}
	metrics.Read(s)
	live, goal, unused := s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()
	runtime.KeepAlive(keep)
	if unused < 4<<20 {
		t.Skipf("the heap is not fragmented (%d bytes of its spans unused): nothing to show", unused)
	}
	if goal < live*5/4-live/32 {
		t.Errorf("heap goal %d bytes with %d live and %d unused: want about 1.25 times what is live", goal, live, unused)
	}
}
