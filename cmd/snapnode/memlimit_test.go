package main

import (
	"math"
	"runtime/debug"
	"testing"
)

// memory_limit becomes the Go runtime's soft limit; 0 leaves the one in
// force (GOMEMLIMIT's, else none).
func TestApplyMemoryLimit(t *testing.T) {
	prior := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(prior) })
	debug.SetMemoryLimit(math.MaxInt64)
	applyMemoryLimit(48 << 20)
	if got := debug.SetMemoryLimit(-1); got != 48<<20 {
		t.Errorf("after memory_limit 48 MiB the runtime's limit is %d", got)
	}
	debug.SetMemoryLimit(100 << 20) // as GOMEMLIMIT=100MiB would
	applyMemoryLimit(0)
	if got := debug.SetMemoryLimit(-1); got != 100<<20 {
		t.Errorf("memory_limit 0 changed the runtime's limit to %d", got)
	}
}
