package relay

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// The relay layer knows Nostr events, not what they carry: SNAP over Nostr
// is package snapnostr, which imports this one, never the reverse.
func TestRelayKnowsNothingOfSNAP(t *testing.T) {
	forbidden := []string{
		"github.com/snapnode/snapnode/snap",
		"github.com/snapnode/snapnode/snapnostr",
		"github.com/snapnode/snapnode/tasks",
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), f, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range parsed.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			for _, bad := range forbidden {
				if path == bad || strings.HasPrefix(path, bad+"/") {
					t.Errorf("%s imports %s: relay must not depend on SNAP", f, path)
				}
			}
		}
	}
}
