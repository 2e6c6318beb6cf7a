package docs

import (
	"regexp"
	"strings"
	"testing"
)

// internalMaterial names what the project's own working material looks
// like: the paths of the machine it is built on, its notes on the
// specification and its design, the files its work started from. A user
// has none of them, so the documents a user reads cite none.
var internalMaterial = []struct {
	what string
	re   *regexp.Regexp
}{
	{"a path of the build machine", regexp.MustCompile("(^|[^\\w./-])/work(/|\\b)")},
	{"the notes on the specification", regexp.MustCompile(`(?i)spec-notes`)},
	{"the design document", regexp.MustCompile(`(?i)\bdesign\.md\b`)},
	{"a seed file", regexp.MustCompile(`\b\d{3}_[0-9a-f]{16}\.txt\b|\bseeds/`)},
}

// The README and docs/*.md cite no internal material: no path of the
// machine the project is built on, no notes or seed files a user does not
// have.
func TestDocsCiteNoInternalMaterial(t *testing.T) {
	for _, d := range userDocs(t) {
		n := 0
		for line := range strings.Lines(readDoc(t, d)) {
			n++
			for _, m := range internalMaterial {
				if m.re.MatchString(line) {
					t.Errorf("%s:%d: %s: %q", d, n, m.what, strings.TrimSpace(line))
				}
			}
		}
	}
}

func TestInternalMaterialPatterns(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{
		{"see /work/shared/SPEC-NOTES.md", true},
		{"under `/work` (same file system)", true},
		{"the SPEC-NOTES say", true},
		{"as DESIGN.md has it", true},
		{"from 003_3f11cd7203e74dc3.txt", true},
		{"the workspace under /sandbox/work/a.txt", false},
		{"https://example.org/work/x", false},
		{"the agents' workspace", false},
		{"a design document of the project", false},
		{"/tmp/snap-reference", false},
	} {
		got := false
		for _, m := range internalMaterial {
			got = got || m.re.MatchString(tc.line)
		}
		if got != tc.want {
			t.Errorf("%q: matched %v, want %v", tc.line, got, tc.want)
		}
	}
}
