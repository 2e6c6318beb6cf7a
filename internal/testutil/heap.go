package testutil

import "runtime"

// LiveHeap collects garbage and returns the bytes the heap then holds
// (runtime.MemStats.HeapAlloc): the difference of two readings, one with
// a structure held and one without, is what the structure keeps live.
func LiveHeap() int64 {
	var m runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}
