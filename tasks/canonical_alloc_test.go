//go:build !race

package tasks

import "testing"

// Writing the answer to a message/send to a buffer makes no allocation:
// no reflection, no intermediate form, the data part canonicalized by a
// pooled decoder straight into the buffer (encoding/json and
// canonicalization made 6; not run under the race detector, which
// empties pools at random).
func TestCanonicalJSONAllocations(t *testing.T) {
	r := sendAnswer()
	buf := make([]byte, 0, 1024)
	if n := testing.AllocsPerRun(100, func() {
		var err error
		if buf, err = r.AppendCanonicalJSON(buf[:0]); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("writing the answer made %.0f allocations, want 0", n)
	}
}
