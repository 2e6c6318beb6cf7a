//go:build !race

package jsondec

import "testing"

// Reading an object of objects with a lent decoder allocates nothing once
// the pool holds one (the race detector empties pools at random: not run
// under it).
func TestReuseAllocatesNothing(t *testing.T) {
	b := []byte(`{"id":"x","from":"a","to":"b","payload":{"message":{"messageId":"m","role":"user","parts":[{"text":"hi"}]}},"sig":"s"}`)
	walk(b)
	if n := testing.AllocsPerRun(100, func() { walk(b) }); n != 0 {
		t.Fatalf("%v allocations to read the object", n)
	}
}
