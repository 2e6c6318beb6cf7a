package snap_test

import (
	"slices"
	"testing"

	"github.com/snapnode/snapnode/snap"
)

// TestSupportedVersionsIsACopy: what a caller does with the list (a
// card built on it, say) does not change the next caller's.
func TestSupportedVersionsIsACopy(t *testing.T) {
	v := snap.SupportedVersions()
	v[0] = "9.9"
	_ = append(v, "0.2")
	if got := snap.SupportedVersions(); !slices.Equal(got, []string{snap.ProtocolVersion}) {
		t.Fatalf("SupportedVersions() = %q after a caller changed its copy", got)
	}
}
