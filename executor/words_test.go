package executor_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	udiff "github.com/aymanbagabas/go-udiff"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/internal/scripts"
	"github.com/snapnode/snapnode/internal/testdb"
)

// readTable decodes a JSON table of testdata/.
func readTable(t *testing.T, name string, v any) {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
}

// TestRequesterWords: a requester's text, as an operator is shown it
// (testdata/requester-words.json).
func TestRequesterWords(t *testing.T) {
	var cases []struct{ Name, In, Want string }
	readTable(t, "requester-words.json", &cases)
	cases = append(cases, struct{ Name, In, Want string }{"invalid UTF-8", "a\xffb\xc0", "a\uFFFDb\uFFFD"})
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if got := executor.RequesterWords(c.In); got != c.Want {
				t.Errorf("RequesterWords(%+q)\n got %+q\nwant %+q", c.In, got, c.Want)
			}
		})
	}
}

// FuzzRequesterWords: whatever a requester writes, what an operator sees
// is valid UTF-8 without an invisible or reordering character, bounded.
func FuzzRequesterWords(f *testing.F) {
	f.Add("plain words")
	f.Add("p\u0430ypal \u202eevil\u202c\u200b")
	f.Add(strings.Repeat("\uff41\u0301\u0302\u0303", 90))
	f.Fuzz(func(t *testing.T, s string) {
		got := executor.RequesterWords(s)
		if !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8: %+q", got)
		}
		for _, r := range got {
			if unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co, unicode.Cs, unicode.Zl, unicode.Zp, unicode.Variation_Selector) ||
				(unicode.IsSpace(r) && r != ' ') || !unicode.IsGraphic(r) {
				t.Fatalf("%+q left in %+q", r, got)
			}
		}
		// Each kept character is at most one <U+XXXXX> escape.
		if n := utf8.RuneCountInString(got); n > executor.MaxRequesterWords*len("<U+10FFFF>")+1 {
			t.Fatalf("%d characters", n)
		}
		if strings.HasPrefix(got, " ") || strings.HasSuffix(got, " ") || strings.Contains(got, "  ") {
			t.Fatalf("spaces not collapsed: %+q", got)
		}
	})
}

// confirmCase is one row of testdata/confirmations.json: an action sent
// as a proposal, as a peer's descriptor (with its own intent_summary and
// confirmation.reason), or as a composite of descriptors; what the
// reason shown to an operator must contain, and must not.
type confirmCase struct {
	Name       string            `json:"name"`
	Action     string            `json:"action"`
	Args       map[string]string `json:"args"`
	Descriptor bool              `json:"descriptor"`
	Intent     string            `json:"intent"`
	Reason     string            `json:"reason"`
	Composite  []confirmCase     `json:"composite"`
	Want       []string          `json:"want"`
	Absent     []string          `json:"absent"`
}

// descriptor is the peer's descriptor of c, asking for confirmation with
// c's words when it has some.
func (c confirmCase) descriptor(t *testing.T) *proposal.Descriptor {
	d := leaf(t, c.Action, c.Args)
	if c.Intent != "" {
		d.IntentSummary = c.Intent
	}
	if c.Reason != "" {
		d.Confirmation.Required, d.Confirmation.Reason = true, c.Reason
	}
	return d
}

// TestConfirmationReason: the reason an operator reads about a held
// action is the host's account (action, paths, risk, size of the diff,
// why it is held); a peer's own words come after it, under the
// "requester says (unverified)" label, cleaned and cut. Pending and
// Approve's renewed question say the same.
func TestConfirmationReason(t *testing.T) {
	var cases []confirmCase
	readTable(t, "confirmations.json", &cases)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			v := newEnv(t, testdb.SQLite(t))
			v.file("a.txt", "hello world\n")
			var data []byte
			switch {
			case c.Composite != nil:
				var ch []*proposal.Descriptor
				for _, s := range c.Composite {
					ch = append(ch, s.descriptor(t))
				}
				data = composite(t, ch...)
			case c.Descriptor:
				data = descriptorJSON(t, c.descriptor(t))
			default:
				data = prop(c.Action, c.Args)
			}
			res := v.run(agent, data)
			wantOutcome(t, res, executor.NeedsConfirmation)
			check := func(where, reason string) {
				t.Helper()
				for _, w := range c.Want {
					if !strings.Contains(reason, w) {
						t.Errorf("%s lacks %+q:\n%+q", where, w, reason)
					}
				}
				for _, a := range c.Absent {
					if strings.Contains(reason, a) {
						t.Errorf("%s has %+q:\n%+q", where, a, reason)
					}
				}
			}
			check("Result.Reason", res.Reason)
			p, err := v.ex.PendingAction(context.Background(), res.ActionID)
			if err != nil {
				t.Fatal(err)
			}
			check("Pending.Reason", p.Reason)
		})
	}
}

// TestVisible: a requester's text is kept whole, with every invisible or
// control character but newline and tab shown by its code point.
func TestVisible(t *testing.T) {
	for in, want := range map[string]string{
		"plain text\nsecond line\tok": "plain text\nsecond line\tok",
		"evil \u202Efdp.exe\u202C":    "evil ⟨U+202E⟩fdp.exe⟨U+202C⟩",
		"zero\u200Bwidth\uFEFF":       "zero⟨U+200B⟩width⟨U+FEFF⟩",
		"bell\a and \x1b[31mred":      "bell⟨U+0007⟩ and ⟨U+001B⟩[31mred",
		"nbsp\u00a0here":              "nbsp⟨U+00A0⟩here",
		"ｆｕｌｌｗｉｄｔｈ stays":             "ｆｕｌｌｗｉｄｔｈ stays",
		"bad \xff byte":               "bad \uFFFD byte",
	} {
		if got := executor.Visible(in); got != want {
			t.Errorf("Visible(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestMarkDiffPaths: the paths of a diff that mix scripts, or have a
// word wholly of look-alikes of Latin letters, are marked in its file
// headers and its lines of other changes; the lines of the files' text
// are left as they are, a removed line that reads like a header among
// them.
func TestMarkDiffPaths(t *testing.T) {
	const mixed, spelled = "/sandbox/p\u0430ssword.txt", "/sandbox/p⟨U+0430 Cyrillic⟩ssword.txt"
	before := "one\n-- p\u0430ss\nthree\n"
	after := "one\n++ p\u0430ss\nthree\n"
	diff := udiff.Unified(mixed, mixed, before, after) +
		udiff.Unified("/dev/null", "/sandbox/итоги.txt", "", "--- c\u03BFnfig\n") +
		udiff.Unified(mixed+"2", "/dev/null", "x\ny", "") +
		"binary " + mixed + ".bin: absent -> file (3 bytes, sha256 00)\n" +
		"changed /sandbox/c\u03BFnfig: absent -> directory\n"
	want := udiff.Unified(spelled, spelled, before, after) +
		udiff.Unified("/dev/null", "/sandbox/итоги.txt", "", "--- c\u03BFnfig\n") +
		strings.ReplaceAll(udiff.Unified(mixed+"2", "/dev/null", "x\ny", ""), mixed, spelled) +
		"binary " + spelled + ".bin: absent -> file (3 bytes, sha256 00)\n" +
		"changed /sandbox/c⟨U+03BF Greek⟩nfig: absent -> directory\n"
	if got := executor.MarkDiffPaths(diff); got != want {
		t.Errorf("MarkDiffPaths\n%s\ngot\n%s\nwant\n%s", diff, got, want)
	}
	// A word wholly of Cyrillic look-alikes: "ѕсоре" reads as scope.
	scope := udiff.Unified("/dev/null", "/sandbox/\u0455\u0441\u043e\u0440\u0435/run.sh", "", "\u0455\u0441\u043e\u0440\u0435\n")
	if got, want := executor.MarkDiffPaths(scope), strings.Replace(scope, "\u0455\u0441\u043e\u0440\u0435/", "⟨U+0455 Cyrillic⟩⟨U+0441 Cyrillic⟩⟨U+043E Cyrillic⟩⟨U+0440 Cyrillic⟩⟨U+0435 Cyrillic⟩/", 1); got != want {
		t.Errorf("MarkDiffPaths\n%s\ngot\n%s\nwant\n%s", scope, got, want)
	}
	if d := udiff.Unified("/sandbox/итоги.txt", "/sandbox/итоги.txt", "a\n", "b\n"); executor.MarkDiffPaths(d) != d {
		t.Errorf("MarkDiffPaths marked a path in one script:\n%s", executor.MarkDiffPaths(d))
	}
}

// TestMarkDiffPathsPrefix: a diff marked within n bytes is cut before
// a marker that does not fit, not inside it, and says how much of the
// diff it shows.
func TestMarkDiffPathsPrefix(t *testing.T) {
	const mixed, spelled = "/sandbox/p\u0430ssword.txt", "/sandbox/p⟨U+0430 Cyrillic⟩ssword.txt"
	diff := udiff.Unified(mixed, mixed, "a\n", "b\n")
	whole := executor.MarkDiffPaths(diff)
	if got, used := executor.MarkDiffPathsPrefix(diff, len(whole)); got != whole || used != len(diff) {
		t.Errorf("MarkDiffPathsPrefix(diff, %d) = %q, %d; want all of it, %d", len(whole), got, used, len(diff))
	}
	// Room for the first header's marker, not the second's.
	n := len("--- "+spelled+"\n+++ ") + 12
	got, used := executor.MarkDiffPathsPrefix(diff, n)
	if want := "--- " + spelled + "\n+++ /sandbox/p"; got != want || used != len("--- "+mixed+"\n+++ /sandbox/p") {
		t.Errorf("MarkDiffPathsPrefix(diff, %d) = %q, %d; want %q, %d", n, got, used, want, len("--- "+mixed+"\n+++ /sandbox/p"))
	}
	plain := udiff.Unified("/sandbox/a.txt", "/sandbox/a.txt", "é\n", "b\n")
	if got, used := executor.MarkDiffPathsPrefix(plain, 5); got != "--- /" || used != 5 {
		t.Errorf("MarkDiffPathsPrefix(plain, 5) = %q, %d", got, used)
	}
}

// TestVisiblePrefix: a text shown within n bytes is cut before a marker
// that does not fit, not inside it, counts the bytes of the text it
// shows, and is Visible (and, marked, Mark too) when all of it fits.
func TestVisiblePrefix(t *testing.T) {
	for _, c := range []struct {
		in     string
		n      int
		marked bool
		want   string
		used   int
	}{
		{"ab\x01cd", 100, false, "ab⟨U+0001⟩cd", 5},
		{"ab\x01cd", 15, false, "ab⟨U+0001⟩c", 4},
		{"ab\x01cd", 13, false, "ab", 2}, // ⟨U+0001⟩ is 12 bytes
		{"ab\x01cd", 14, false, "ab⟨U+0001⟩", 3},
		{"é\u200Bx", 2, false, "é", 2},
		{"bad \xff", 7, false, "bad \uFFFD", 5},
		{"bad \xff", 6, false, "bad ", 4},
		{"p\u0430ss\x01", 100, false, "p\u0430ss⟨U+0001⟩", 6},
		{"p\u0430ss\x01", 100, true, "p⟨U+0430 Cyrillic⟩ss⟨U+0001⟩", 6},
		{"p\u0430ss\x01", 20, true, "p", 1},
		{"\x01\x01\x01", 25, false, "⟨U+0001⟩⟨U+0001⟩", 2},
	} {
		got, used := executor.VisiblePrefix(c.in, c.n, c.marked)
		if got != c.want || used != c.used {
			t.Errorf("VisiblePrefix(%+q, %d, %v) = %+q, %d; want %+q, %d", c.in, c.n, c.marked, got, used, c.want, c.used)
		}
		if len(got) > c.n {
			t.Errorf("VisiblePrefix(%+q, %d, %v) takes %d bytes", c.in, c.n, c.marked, len(got))
		}
	}
	s := "evil \u202Efdp.exe\u202C p\u0430ss\tok\n"
	if got, _ := executor.VisiblePrefix(s, len(s)*30, true); got != executor.Visible(scripts.Mark(s, scripts.Spelled)) {
		t.Errorf("VisiblePrefix(%+q) = %+q, want Visible(Mark(s))", s, got)
	}
}

// TestVisibleDiffPrefix: a diff shown within n bytes spells out its
// invisible characters, in its lines of text too, and the look-alike
// letters of its paths, never cut inside a marker.
func TestVisibleDiffPrefix(t *testing.T) {
	const mixed = "/sandbox/p\u0430ssword.txt"
	diff := udiff.Unified(mixed, mixed, "a\x01\n", "b\r\n")
	want := executor.Visible(executor.MarkDiffPaths(diff))
	if got, used := executor.VisibleDiffPrefix(diff, len(want)); got != want || used != len(diff) {
		t.Errorf("VisibleDiffPrefix(diff, %d) = %q, %d; want %q, %d", len(want), got, used, want, len(diff))
	}
	i := strings.Index(want, "⟨U+0001⟩")
	if got, used := executor.VisibleDiffPrefix(diff, i+5); got != want[:i] || used != strings.Index(diff, "\x01") {
		t.Errorf("VisibleDiffPrefix(diff, %d) = %q, %d; want %q, %d", i+5, got, used, want[:i], strings.Index(diff, "\x01"))
	}
}
