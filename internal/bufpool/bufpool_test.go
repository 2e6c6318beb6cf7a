package bufpool

import "testing"

func TestGetGivesTheSizeAsked(t *testing.T) {
	var p Buffers
	for _, size := range []int{4096, 16, 4096} {
		bp := p.Get(size)
		if len(*bp) != size {
			t.Fatalf("Get(%d): %d bytes", size, len(*bp))
		}
		p.Put(bp)
	}
	p.Put(nil) // ignored
}

func ExampleBuffers() {
	var reads Buffers
	bp := reads.Get(8)
	copy(*bp, "message!")
	_ = string(*bp) // a copy: nothing keeps the buffer's bytes
	reads.Put(bp)
}
