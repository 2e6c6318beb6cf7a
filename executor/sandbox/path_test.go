package sandbox_test

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

type normalizeCase struct {
	In   string `json:"in"`
	Hex  string `json:"hex"` // for inputs that are not valid UTF-8
	Want string `json:"want"`
	Rule string `json:"rule"`
}

func loadNormalizeCases(t testing.TB) []normalizeCase {
	t.Helper()
	var all []normalizeCase
	for _, name := range []string{"testdata/normalize.json", "testdata/normalize_bytes.json"} {
		raw, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		var cases []normalizeCase
		if err := json.Unmarshal(raw, &cases); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for i := range cases {
			if cases[i].Hex != "" {
				b, err := hex.DecodeString(cases[i].Hex)
				if err != nil {
					t.Fatal(err)
				}
				cases[i].In = string(b)
			}
		}
		all = append(all, cases...)
	}
	return all
}

func TestNormalize(t *testing.T) {
	for _, c := range loadNormalizeCases(t) {
		got, err := sandbox.Normalize(c.In)
		if c.Rule == "" {
			if err != nil || got != c.Want {
				t.Errorf("Normalize(%+q) = %q, %v; want %q", c.In, got, err, c.Want)
			}
			continue
		}
		var pe *sandbox.PathError
		if !errors.As(err, &pe) {
			t.Errorf("Normalize(%+q) = %q, %v; want rule %s", c.In, got, err, c.Rule)
			continue
		}
		if string(pe.Rule) != c.Rule || pe.Path != c.In || got != "" {
			t.Errorf("Normalize(%+q): rule %s, path %+q; want rule %s", c.In, pe.Rule, pe.Path, c.Rule)
		}
		if !errors.Is(err, sandbox.ErrInvalidPath) || !errors.Is(err, pe.Rule) {
			t.Errorf("Normalize(%+q): %v does not match ErrInvalidPath and its rule", c.In, err)
		}
	}
}

func TestNormalizeRuleSentinels(t *testing.T) {
	_, err := sandbox.Normalize("/sandbox/../etc/passwd")
	if !errors.Is(err, sandbox.RuleDotSegment) {
		t.Fatalf("%v is not RuleDotSegment", err)
	}
	if errors.Is(err, sandbox.RuleTrailingSlash) {
		t.Fatalf("%v matches another rule", err)
	}
}

func TestHasTextExt(t *testing.T) {
	for p, want := range map[string]bool{
		"/sandbox/a.txt":      true,
		"/sandbox/a.md":       true,
		"notes/b.md":          true,
		"x.txt":               true,
		"/sandbox/..txt":      true,
		"/sandbox/a.TXT":      false,
		"/sandbox/a.Md":       false,
		"/sandbox/.txt":       false,
		"/sandbox/.md":        false,
		"/sandbox/a.txt.sh":   false,
		"/sandbox/a.markdown": false,
		"/sandbox/a.txt/b":    false,
		"/sandbox/atxt":       false,
		"":                    false,
	} {
		if got := sandbox.HasTextExt(p); got != want {
			t.Errorf("HasTextExt(%q) = %v, want %v", p, got, want)
		}
	}
}

// A long path is cut in its error between two characters: the message
// quotes what it kept as characters (\u00e9, then \u2026 for the cut), never a lone byte of one
// cut in two (\xc3), which the old byte cut at 120 left.
func TestPathErrorCutsBetweenCharacters(t *testing.T) {
	p := "/outside/" + strings.Repeat("é", 100) // a é is two bytes; byte 120 is inside one
	_, err := sandbox.Normalize(p)
	var pe *sandbox.PathError
	if !errors.As(err, &pe) {
		t.Fatalf("Normalize(%q): %v, want a *PathError", p, err)
	}
	msg := pe.Error()
	if strings.Contains(msg, `\x`) || !strings.Contains(msg, `\u00e9\u2026"`) {
		t.Errorf("the message does not cut between characters: %s", msg)
	}
}
