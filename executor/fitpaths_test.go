package executor

import (
	"fmt"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// However many paths an action has, of whatever length, its validated and
// touched details fit in an entry with as many paths as fit: before, many
// short paths of one length overflowed by the bytes of the paths member
// and of the count of those cut, and the entry became {"truncated":true},
// naming none.
func TestFittedDetailsFit(t *testing.T) {
	for _, n := range []int{200, 500, 1500} {
		for _, l := range []int{20, 33, 47, 60} {
			t.Run(fmt.Sprintf("%d paths of %d bytes", n, l), func(t *testing.T) {
				paths := make([]string, n)
				diffs := make([]sandbox.Diff, n)
				for i := range paths {
					name := fmt.Sprintf("%0*d", l-len("/sandbox/"), i)
					paths[i] = "/sandbox/" + name
					diffs[i] = sandbox.Diff{Path: paths[i]}
				}
				v := validatedDetail{Risk: "high", Paths: paths, Intent: strings.Repeat("i", 2000), AuditLevel: "DETAILED"}.fitted()
				if b := mustJSON(v); len(b) > maxDetail || len(v.Paths) == 0 || len(v.Paths)+v.PathsCut != n {
					t.Errorf("validated: %d bytes (of at most %d), %d paths and %d cut of %d", len(b), maxDetail, len(v.Paths), v.PathsCut, n)
				}
				d := touched(diffs)
				if b := mustJSON(d); len(b) > maxDetail || len(d.Paths) == 0 || len(d.Paths)+d.PathsCut != n {
					t.Errorf("touched: %d bytes (of at most %d), %d paths and %d cut of %d", len(b), maxDetail, len(d.Paths), d.PathsCut, n)
				}
			})
		}
	}
}
