package sandbox_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// FuzzParseSnapshot feeds ParseSnapshot what a rollback reads from the
// executor's records. It never panics, refuses only with ErrBadSnapshot,
// and a snapshot it accepts keeps the rules Rollback relies on (paths
// below the root and unrepeated, a file's hash 64 lowercase hex digits,
// as Image.same compares it with what a file has now) and, written again
// as JSON, parses to the same snapshot.
func FuzzParseSnapshot(f *testing.F) {
	const empty = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	for _, s := range []string{
		`{"version":1,"entries":[]}`,
		`{"version":1,"entries":[{"path":"/sandbox/a.txt","pre":{"kind":"absent"},"post":{"kind":"file","size":3,"sha256":"` + strings.Repeat("ab", 32) + `","mode":"0644"}}]}`,
		`{"version":1,"entries":[{"path":"/sandbox/a.txt","pre":{"kind":"file","sha256":"` + empty + `","mode":"0600"},"post":{"kind":"absent"}}]}`,
		`{"version":1,"entries":[{"path":"/sandbox/d","pre":{"kind":"dir"},"post":{"kind":"absent"}},{"path":"/sandbox/d/x","pre":{"kind":"file","size":1,"sha256":"ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb","content":"YQ=="},"post":{"kind":"absent"}}]}`,
		`{"version":1,"entries":[{"path":"/sandbox/a","pre":{"kind":"absent"},"post":{"kind":"file","sha256":"` + strings.ToUpper(empty) + `"}}]}`,
		`{"version":1,"entries":[{"path":"/sandbox/a","pre":{"kind":"absent"},"post":{"kind":"absent"}},{"path":"/sandbox/./a","pre":{"kind":"absent"},"post":{"kind":"absent"}}]}`,
		`{"version":2}`, `null`, `{"Version":1,"ENTRIES":null}`, `{"version":1,"entries":[{"path":"/sandbox/a","pre":{"kind":"file","mode":"1777"}}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		snap, err := sandbox.ParseSnapshot(data)
		if err != nil {
			if !errors.Is(err, sandbox.ErrBadSnapshot) {
				t.Fatalf("%v is not ErrBadSnapshot", err)
			}
			return
		}
		seen := map[string]bool{}
		for i, e := range snap.Entries {
			rel, err := sandbox.Normalize(e.Path)
			if err != nil || rel == "" || seen[rel] {
				t.Fatalf("entry %d: path %q accepted (%v)", i, e.Path, err)
			}
			seen[rel] = true
			for _, img := range []sandbox.Image{e.Pre, e.Post} {
				if img.Kind == sandbox.KindFile && (len(img.SHA256) != 64 || strings.Trim(img.SHA256, "0123456789abcdef") != "") {
					t.Fatalf("entry %d: a file's sha256 %q accepted", i, img.SHA256)
				}
			}
		}
		b, err := json.Marshal(snap)
		if err != nil {
			t.Fatalf("an accepted snapshot does not marshal: %v", err)
		}
		again, err := sandbox.ParseSnapshot(b)
		if err != nil {
			t.Fatalf("an accepted snapshot, written again, is refused: %v\n%s", err, b)
		}
		if b2, _ := json.Marshal(again); !bytes.Equal(b, b2) {
			t.Fatalf("written again:\n%s\nthen:\n%s", b, b2)
		}
	})
}
