package testutil

import "runtime"

// LiveHeap collects garbage and returns the bytes the heap then holds
// (runtime.MemStats.HeapAlloc): the difference of two readings, one with
// a structure held and one without, is what the structure keeps live.
//
// It collects twice: a collection keeps what a sync.Pool holds for one
// more cycle (the pool's victim cache), so that after one collection the
// reading would count the pools' items, and the next reading, after
// another, would not.
func LiveHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// HeapHeld returns the live heap a structure keeps: LiveHeap once hold
// has made it, less LiveHeap once the release function hold returns has
// let go of it. What release refers to stays live through both readings,
// so that the rest of what hold made (the structure's owner, say) counts
// in neither.
//
// Memory that something else lets go between the two readings (the
// garbage an earlier test left reachable from a timer, a finalizer or a
// goroutine still ending) would count as the structure's: so HeapHeld
// measures tries times, anew, and returns the least.
func HeapHeld(tries int, hold func() (release func())) int64 {
	least := int64(-1)
	for range max(tries, 1) {
		release := hold()
		with := LiveHeap()
		release()
		d := with - LiveHeap()
		runtime.KeepAlive(release)
		if least < 0 || d < least {
			least = d
		}
	}
	return least
}
