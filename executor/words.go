package executor

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/snapnode/snapnode/internal/invisible"
	"github.com/snapnode/snapnode/internal/scripts"
)

// MaxRequesterWords is how many characters (runes) of a requester's own
// words an operator is shown, after RequesterWords has made them safe.
const MaxRequesterWords = 200

// RequesterLabel introduces a requester's own words wherever they are
// shown to an operator: what follows is the requester's claim, not a
// fact the host checked.
const RequesterLabel = "requester says (unverified): "

// RequesterWords makes a requester's free text (a descriptor's
// confirmation.reason or intent_summary) safe to show an operator, who
// must be able to read it for what it is:
//
//   - invalid UTF-8 becomes U+FFFD;
//   - the text is put in Unicode NFKC, so compatibility look-alikes read as
//     what they are (fullwidth ｓｕｄｏ is sudo, mathematical 𝐀 is A, the
//     ligature ﬁ is fi, ① is 1);
//   - control characters, line and paragraph separators and every kind of
//     space become one space, runs of spaces one, trimmed at both ends;
//   - invisible characters go: format characters (bidi overrides and
//     isolates, zero-width spaces and joiners, soft hyphen, BOM, tags),
//     private-use and unassigned code points, variation selectors, and
//     combining marks beyond two on one character;
//   - a word that mixes letters of several scripts (Latin "pаypal" with a
//     Cyrillic а), or a word in one other script wholly of look-alikes of
//     Latin letters ("раураӏ", all Cyrillic), shows its non-ASCII letters
//     as <U+0430>, so a look-alike cannot pass for the letter it imitates;
//     Han, Hiragana, Katakana, Hangul and Bopomofo count as one script, as
//     Japanese and Korean mix them;
//   - at most MaxRequesterWords characters are kept, "…" marking a cut.
//
// NFKC is golang.org/x/text's; the look-alike rule above is package
// internal/scripts (the standard library's script tables and the skeletons
// of Unicode's confusables, UTS #39), which marks the paths an operator is
// shown too. Every text of a requester that reaches an operator goes
// through this one function.
func RequesterWords(s string) string {
	s = norm.NFKC.String(strings.ToValidUTF8(s, "\uFFFD"))
	var b strings.Builder
	marks, space, n := 0, false, 0
	for _, r := range s {
		switch {
		case unicode.IsSpace(r) || unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp, unicode.Zs):
			space = b.Len() > 0
			continue
		case invisible.Is(r):
			continue
		case unicode.In(r, unicode.Mn, unicode.Me):
			if marks++; marks > 2 || b.Len() == 0 {
				continue
			}
		default:
			marks = 0
		}
		if n == MaxRequesterWords {
			b.WriteString("…")
			break
		}
		if space {
			b.WriteByte(' ')
			space = false
			if n++; n == MaxRequesterWords {
				b.WriteString("…")
				break
			}
		}
		b.WriteRune(r)
		n++
	}
	return flagMixedScripts(b.String())
}

// flagMixedScripts writes the non-ASCII letters of every word of s that
// mixes scripts, or is wholly of look-alikes of Latin letters, as
// <U+XXXX> (scripts.Mark).
func flagMixedScripts(s string) string {
	return scripts.Mark(s, func(r rune) string { return fmt.Sprintf("<U+%04X>", r) })
}

// quoteWords shows requester text under RequesterLabel, quoted so that
// nothing in it can pass for the host's words after it.
func quoteWords(s string) string {
	return RequesterLabel + strconv.Quote(RequesterWords(s))
}

// Visible returns a requester's text whole, for showing it as it arrived
// (a message, a descriptor's JSON): nothing is cut or normalized, but every
// invisible character (see invisible.Is: controls among them) but newline and
// tab is shown as ⟨U+XXXX⟩, so that what an operator reads is what is
// there. Invalid UTF-8 is shown as U+FFFD.
func Visible(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	var b strings.Builder
	for _, r := range s {
		if v := visibleRune(r); v != "" {
			b.WriteString(v)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// spelled out can take twelve bytes for one, ⟨U+0001⟩): the
// spelled out takes twelve bytes for one, ⟨U+0001⟩): the
// longest prefix of s that fits, never cut inside a character or a
// marker, and used, the bytes of s it shows (len(s) when all of it
// fits). With marked, the letters of its look-alike words are spelled
// out too, as scripts.Mark(s, scripts.Spelled) writes them, within the
// same n bytes. A byte that is not UTF-8 is shown as U+FFFD, each one
// (Visible writes one for a run of them).
func VisiblePrefix(s string, n int, marked bool) (shown string, used int) {
	var mark func(rune) string
	if marked {
		mark = scripts.Spelled
	}
	return scripts.ShowPrefix(s, n, mark, visibleRune)
}

// visibleRune is how Visible shows r: "" for r as it is, else its
// marker, ⟨U+XXXX⟩ (U+FFFD for utf8.RuneError, a byte that is not
// UTF-8).
func visibleRune(r rune) string {
	switch {
	case r == utf8.RuneError:
		return "\uFFFD"
	case r == '\n' || r == '\t' || r == ' ':
		return ""
	case invisible.Is(r) || (unicode.IsSpace(r) && r != ' '):
		return fmt.Sprintf("⟨U+%04X⟩", r)
	}
	return ""
}
