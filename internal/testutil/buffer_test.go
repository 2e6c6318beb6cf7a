package testutil_test

import (
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/testutil"
)

// A LockedBuffer with Keep holds about the last Keep bytes however much is
// written; without, everything.
func TestLockedBufferKeep(t *testing.T) {
	var all testutil.LockedBuffer
	kept := testutil.LockedBuffer{Keep: 100}
	for i := range 50 {
		line := strings.Repeat(string(rune('a'+i%26)), 9) + "\n"
		all.Write([]byte(line))
		kept.Write([]byte(line))
	}
	if all.Len() != 500 {
		t.Errorf("unbounded buffer holds %d bytes, want 500", all.Len())
	}
	if n := kept.Len(); n < 50 || n > 110 {
		t.Errorf("buffer keeping 100 bytes holds %d", n)
	}
	if !strings.HasSuffix(kept.String(), strings.Repeat("x", 9)+"\n") {
		t.Errorf("the last line written is not kept: %q", kept.String())
	}
}
