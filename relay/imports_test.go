package relay

import (
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/testutil"
)

// The relay layer knows Nostr events, not what they carry: SNAP over Nostr
// is package snapnostr, which imports this one, never the reverse.
func TestRelayKnowsNothingOfSNAP(t *testing.T) {
	forbidden := []string{
		"github.com/snapnode/snapnode/snap",
		"github.com/snapnode/snapnode/snapnostr",
		"github.com/snapnode/snapnode/tasks",
	}
	for _, imp := range testutil.ProductionImports(t) {
		for _, bad := range forbidden {
			if imp.Path == bad || strings.HasPrefix(imp.Path, bad+"/") {
				t.Errorf("%s imports %s: relay must not depend on SNAP", imp.File, imp.Path)
			}
		}
	}
}
