package docs

import (
	"fmt"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// userDocs are the documents a user reads: the README and docs/*.md.
func userDocs(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	names := []string{"README.md"}
	for _, d := range docs {
		rel, err := filepath.Rel(root, d)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, filepath.ToSlash(rel))
	}
	if len(names) < 7 {
		t.Fatalf("only %d documents found: %v", len(names), names)
	}
	return names
}

var (
	// inlineLink is [text](target) or ![alt](target), the target without
	// spaces (a title after it is left out).
	inlineLink = regexp.MustCompile(`!?\[[^\]]*\]\(\s*([^)\s]+)(?:\s+"[^"]*")?\)`)
	// refLink is a reference definition: [label]: target.
	refLink  = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s+(\S+)`)
	codeSpan = regexp.MustCompile("`+[^`]*`+")
	heading  = regexp.MustCompile(`^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$`)
	htmlID   = regexp.MustCompile(`<a\s+(?:name|id)="([^"]+)"`)
	mdLink   = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	// underline is _emphasis_ or __strong__ between words (an '_'
	// inside a word is kept, as in relay_max_conns).
	underline = regexp.MustCompile(`(^|\s)_{1,3}([^_]+)_{1,3}(\s|$)`)
	schemeURL = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// A docLink is one link a document gives, at a line.
type docLink struct {
	line   int
	target string
}

// scan reads a Markdown document's links and the anchors its headings
// (and <a name> or <a id> tags) make, outside fenced code blocks and
// code spans. A link may run over the lines of its paragraph.
func scan(text string) (links []docLink, anchors map[string]bool) {
	anchors = map[string]bool{}
	seen := map[string]int{}
	var (
		fence string
		para  strings.Builder // the paragraph read so far, its lines joined
		start int             // the line it starts at
	)
	flush := func() {
		plain := codeSpan.ReplaceAllString(para.String(), "")
		for _, m := range inlineLink.FindAllStringSubmatch(plain, -1) {
			links = append(links, docLink{line: start, target: m[1]})
		}
		para.Reset()
	}
	n := 0
	for line := range strings.Lines(text) {
		n++
		line = strings.TrimRight(line, "\r\n")
		trimmed := strings.TrimLeft(line, " ")
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			flush()
			fence = trimmed[:3]
			continue
		}
		for _, m := range htmlID.FindAllStringSubmatch(line, -1) {
			anchors[m[1]] = true
		}
		if m := heading.FindStringSubmatch(line); m != nil {
			flush()
			slug := slugOf(m[2])
			if k := seen[slug]; k > 0 {
				anchors[fmt.Sprintf("%s-%d", slug, k)] = true
			} else {
				anchors[slug] = true
			}
			seen[slug]++
		}
		if m := refLink.FindStringSubmatch(line); m != nil {
			links = append(links, docLink{line: n, target: m[1]})
		}
		if trimmed == "" || strings.HasPrefix(trimmed, "|") {
			flush() // a table's rows are each their own
		}
		if trimmed == "" {
			continue
		}
		if para.Len() == 0 {
			start = n
		}
		para.WriteString(line)
		para.WriteByte('\n')
	}
	flush()
	return links, anchors
}

// slugOf is the anchor GitHub gives a heading: its text without markup,
// in lower case, with every character but letters, digits, '_', '-' and
// spaces removed, and spaces made '-'.
func slugOf(h string) string {
	h = mdLink.ReplaceAllString(h, "$1")
	h = underline.ReplaceAllString(h, "$1$2$3")
	h = strings.NewReplacer("`", "", "*", "").Replace(h)
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case unicode.IsLetter(r), unicode.IsDigit(r), unicode.IsMark(r), r == '_', r == '-':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

// Every relative link of the README and of docs/*.md reaches a file of
// the repository, and every anchor (#…) a heading of the document it
// points into, so a reader who follows one lands where it says.
func TestDocLinksResolve(t *testing.T) {
	docs := userDocs(t)
	anchorsOf := map[string]map[string]bool{}
	linksOf := map[string][]docLink{}
	for _, d := range docs {
		linksOf[d], anchorsOf[d] = scan(readDoc(t, d))
	}
	total := 0
	for _, d := range docs {
		for _, l := range linksOf[d] {
			if schemeURL.MatchString(l.target) || strings.HasPrefix(l.target, "//") {
				continue // an address outside the repository
			}
			total++
			file, anchor, _ := strings.Cut(l.target, "#")
			target := d
			if file != "" {
				target = path.Clean(path.Join(path.Dir(d), file))
				if strings.HasPrefix(target, "../") {
					t.Errorf("%s:%d: %s points outside the repository", d, l.line, l.target)
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(target))); err != nil {
					t.Errorf("%s:%d: %s: no file %s", d, l.line, l.target, target)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			anchors, ok := anchorsOf[target]
			if !ok {
				if !strings.HasSuffix(target, ".md") {
					t.Errorf("%s:%d: %s: an anchor into %s, which is not a document", d, l.line, l.target, target)
					continue
				}
				_, anchors = scan(readDoc(t, target))
				anchorsOf[target] = anchors
			}
			if !anchors[anchor] {
				t.Errorf("%s:%d: %s: %s has no heading with the anchor #%s%s", d, l.line, l.target, target, anchor, nearest(anchors, anchor))
			}
		}
	}
	if total < 20 {
		t.Fatalf("only %d relative links found in %v: the reading of the documents is broken", total, docs)
	}
}

// nearest names the anchors that share the first word of a missing one,
// to help whoever mends the link.
func nearest(anchors map[string]bool, missing string) string {
	word, _, _ := strings.Cut(missing, "-")
	var near []string
	for a := range anchors {
		if strings.HasPrefix(a, word) {
			near = append(near, a)
		}
	}
	if len(near) == 0 || len(near) > 8 {
		return ""
	}
	slices.Sort(near)
	return " (near: " + strings.Join(near, ", ") + ")"
}

func TestSlugOf(t *testing.T) {
	for h, want := range map[string]string{
		"Quick start":                          "quick-start",
		"`snapnode relay`: the relay alone":    "snapnode-relay-the-relay-alone",
		"What [the node](x.md) keeps, and why": "what-the-node-keeps-and-why",
		"Limits (every one)":                   "limits-every-one",
		"Reload — SIGHUP":                      "reload--sighup",
		"relay_max_conns_per_peer":             "relay_max_conns_per_peer",
		"**Bold** words":                       "bold-words",
		"_Emphasis_ here":                      "emphasis-here",
	} {
		if got := slugOf(h); got != want {
			t.Errorf("slugOf(%q) = %q, want %q", h, got, want)
		}
	}
}
