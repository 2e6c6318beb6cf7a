package testutil_test

import (
	"sync"
	"testing"

	"github.com/snapnode/snapnode/internal/testutil"
)

// What a sync.Pool holds is garbage to LiveHeap: it is dropped by the
// first reading, not counted by one reading and dropped by the next (a
// collection keeps a pool's items for one more cycle), so that two
// readings around a structure do not count what some pool let go
// between them.
func TestLiveHeapDropsWhatPoolsHold(t *testing.T) {
	const size = 8 << 20
	var pool sync.Pool
	pool.Put(make([]byte, size))
	first := testutil.LiveHeap()
	second := testutil.LiveHeap()
	if d := first - second; d > size/2 {
		t.Errorf("two readings with nothing between differ by %d bytes: the pool's %d bytes counted by the first", d, size)
	}
}

// HeapHeld counts what release lets go, not what its closure keeps, and
// not what something else lets go during one of its measures.
func TestHeapHeld(t *testing.T) {
	const size, other = 4 << 20, 32 << 20
	type owner struct {
		structure []byte
		rest      []byte
	}
	elsewhere := make([]byte, other) // an earlier test's garbage, let go late
	tries := 0
	held := testutil.HeapHeld(3, func() func() {
		tries++
		o := &owner{structure: make([]byte, size), rest: make([]byte, size)}
		return func() {
			o.structure = nil
			if tries == 1 {
				elsewhere = nil
			}
		}
	})
	if tries != 3 {
		t.Errorf("hold called %d times, want 3", tries)
	}
	if held < size-size/8 || held > size+size/8 {
		t.Errorf("HeapHeld = %d, want about %d", held, size)
	}
	_ = elsewhere
}
