// Package scripts finds the words that can pass for a Latin word they
// are not: "pаssword" whose а is Cyrillic (U+0430) reads as password, but
// is another word, another file. It rewrites the letters beyond ASCII of
// such a word, so that a look-alike cannot pass for the letter it
// imitates:
//
//	scripts.Mark("/sandbox/p\u0430ssword.txt", scripts.Spelled)
//	// "/sandbox/p⟨U+0430 Cyrillic⟩ssword.txt"
//
// A word is a run of letters, digits and combining marks; only its letters
// count (digits, punctuation and marks belong to no one script). Three
// kinds of word are marked:
//
//   - a word that mixes the letters of several scripts (Mixed);
//   - a word in one script other than Latin whose every letter imitates a
//     Latin one (LooksLatin): "ѕсоре", all Cyrillic, reads as scope;
//   - a word of Latin letters with a letter or mark no living orthography
//     writes, or a mark that hides (Restricted): "pɑypɑl" with the Latin
//     alpha U+0251, fullwidth "ｐａｙｐａｌ", "ʀoot" with a small capital,
//     "i\u0307mportant" whose dot above vanishes on the i's own.
//
// Any other word in one script is left as it is, whichever script:
// "итоги" in Cyrillic (и and т imitate no Latin letter), or "отчёт.txt",
// where the dot parts two words; "café", "Straße", "İstanbul", "Łódź",
// "tiếng Việt" in Latin. Han, Hiragana, Katakana, Hangul and Bopomofo
// count as one script, as Japanese and Korean mix them. The confusables
// are Unicode 13's (github.com/mtibben/confusables); the letters and marks
// an orthography writes, UTS #39's Identifier_Status Allowed (Unicode 17).
// The Turkish dotless ı is such a letter: "ımportant" is left as it is,
// as "kapı" and "ılık" are.

package scripts

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtibben/confusables"
	"golang.org/x/text/unicode/norm"

	"github.com/snapnode/snapnode/internal/textcut"
)

// Mixed reports whether the letters of word come from more than one
// script.
func Mixed(word string) bool {
	_, mixed := scriptOf(word)
	return mixed
}

// scriptOf returns the script of the letters of word ("" for none), or
// mixed true when they come from more than one.
func scriptOf(word string) (script string, mixed bool) {
	for _, r := range word {
		if !unicode.IsLetter(r) {
			continue
		}
		sc := Of(r)
		if script == "" {
			script = sc
		} else if sc != script {
			return "", true
		}
	}
	return script, false
}

// LooksLatin reports whether word, its letters all of one script other
// than Latin, could be read as a Latin word: its skeleton (Unicode TS #39,
// the letters it could be mistaken for, github.com/mtibben/confusables)
// is ASCII, accents on its letters aside. The Cyrillic "раураӏ" and
// "ѕсоре" read as paypal and scope; "привет" does not (п and и imitate no
// Latin letter), nor "ΑΘΗΝΑ" (Θ is an O with a bar, no Latin letter). A
// word wholly of look-alikes is one whatever it means in its own script:
// the Russian "сахар" reads as caxap, and a single а as a.
func LooksLatin(word string) bool {
	script, mixed := scriptOf(word)
	if mixed || script == "" || script == "Latin" {
		return false // Mixed's, no letter, or Restricted's
	}
	return looksLatin(word)
}

// looksLatin is LooksLatin for a word of one script other than Latin.
func looksLatin(word string) bool {
	skeleton := confusables.Skeleton(word)
	for _, r := range skeleton {
		if r >= utf8.RuneSelf && !unicode.Is(unicode.Mn, r) {
			return false
		}
	}
	// The marks of the skeleton (it is in NFD) are accents only if each
	// composes with its ASCII letter into one (e and U+0308 make ë; O and
	// the stroke U+0335 of Θ make none).
	for _, r := range norm.NFC.String(skeleton) {
		if unicode.Is(unicode.Mn, r) {
			return false
		}
	}
	return skeleton != word
}

// Restricted reports whether word, its letters all Latin, holds a letter
// or combining mark that no living orthography writes, or a mark that
// hides. Its precomposed letters are taken apart (NFD): ţ is a t and a
// cedilla. A letter or mark is one an orthography writes when UTS #39
// allows it in identifiers (Identifier_Status Allowed): é, ß, œ, ł, ı, ə,
// ɛ, ơ and the accents of the world's Latin orthographies are; the Latin
// alpha ɑ, fullwidth ｐ, small capitals ʀ and ɪ, the ligature ﬁ, the long
// ſ, the click ǀ, superscripts ˢ and overlays such as the stroke U+0335
// are not. A mark hides (UTS #39, section 5.4) when it repeats the mark
// before it, or is a dot above (U+0307) on an i, j or dotless ı: the word
// reads as the one without it. A word of another script, or of several,
// is not Restricted.
func Restricted(word string) bool {
	if isASCII(word) {
		return false
	}
	if script, mixed := scriptOf(word); mixed || script != "Latin" {
		return false
	}
	return restricted(word)
}

// restricted is Restricted for a word whose letters are all Latin.
func restricted(word string) bool {
	var prev rune
	for i, r := range word {
		if r < utf8.RuneSelf {
			prev = r
			continue
		}
		d := norm.NFD.PropertiesString(word[i:]).Decomposition()
		if d == nil {
			if restrictedAfter(prev, r) {
				return true
			}
			prev = r
			continue
		}
		for _, c := range string(d) {
			if restrictedAfter(prev, c) {
				return true
			}
			prev = c
		}
	}
	return false
}

// restrictedAfter reports whether r, a letter, digit or mark of a Latin
// word in NFD and prev the one before it, is restricted or hides.
func restrictedAfter(prev, r rune) bool {
	if r < utf8.RuneSelf {
		return false
	}
	mark := unicode.In(r, unicode.Mn, unicode.Me)
	if !mark && !unicode.IsLetter(r) {
		return false // a digit: no script's
	}
	if !unicode.Is(latinAllowed, r) {
		return true
	}
	if !mark {
		return false
	}
	return r == prev || r == '\u0307' && (prev == 'i' || prev == 'j' || prev == '\u0131')
}

// latinAllowed holds the letters and combining marks beyond ASCII of the
// Latin script that UTS #39 allows in identifiers (IdentifierStatus.txt,
// Unicode 17, Identifier_Status Allowed): those of the modern
// orthographies written in Latin letters. Written here by hand: neither
// golang.org/x/text nor the confusables module carries UTS #39's
// identifier status, and only its Latin letters beyond ASCII are needed;
// TestLatinAllowedDecomposes keeps the letters and the marks they come
// apart into in step.
var latinAllowed = &unicode.RangeTable{
	R16: []unicode.Range16{
		{0x00C0, 0x00D6, 1}, {0x00D8, 0x00F6, 1}, {0x00F8, 0x0113, 1},
		{0x0116, 0x012B, 1}, {0x012E, 0x0131, 1}, {0x0134, 0x0137, 1},
		{0x0139, 0x013E, 1}, {0x0141, 0x0148, 1}, {0x014A, 0x014D, 1},
		{0x0150, 0x0155, 1}, {0x0158, 0x0161, 1}, {0x0164, 0x017E, 1},
		{0x0181, 0x0181, 1}, {0x0186, 0x0186, 1}, {0x0189, 0x018A, 1},
		{0x018E, 0x0192, 1}, {0x0194, 0x0194, 1}, {0x0196, 0x0199, 1},
		{0x019D, 0x019D, 1}, {0x01A0, 0x01A1, 1}, {0x01AF, 0x01B0, 1},
		{0x01B2, 0x01B4, 1}, {0x01B7, 0x01B7, 1}, {0x01CD, 0x01D4, 1},
		{0x01DD, 0x01DD, 1}, {0x01E6, 0x01E9, 1}, {0x01EE, 0x01EF, 1},
		{0x01F8, 0x01F9, 1}, {0x0218, 0x021B, 1}, {0x0244, 0x0244, 1},
		{0x024C, 0x024D, 1}, {0x0253, 0x0254, 1}, {0x0256, 0x0257, 1},
		{0x0259, 0x0259, 1}, {0x025B, 0x025B, 1}, {0x0263, 0x0263, 1},
		{0x0268, 0x0269, 1}, {0x0272, 0x0272, 1}, {0x0289, 0x0289, 1},
		{0x028B, 0x028B, 1}, {0x0292, 0x0292, 1}, {0x02BB, 0x02BC, 1},
		// Combining marks.
		{0x0300, 0x0304, 1}, {0x0306, 0x030C, 1}, {0x031B, 0x031B, 1},
		{0x0323, 0x0323, 1}, {0x0326, 0x0328, 1}, {0x032D, 0x032D, 1},
		{0x0331, 0x0331, 1},
		// Latin Extended Additional.
		{0x1E0C, 0x1E0D, 1}, {0x1E12, 0x1E13, 1}, {0x1E20, 0x1E21, 1},
		{0x1E24, 0x1E25, 1}, {0x1E36, 0x1E37, 1}, {0x1E3C, 0x1E3F, 1},
		{0x1E42, 0x1E4B, 1}, {0x1E5A, 0x1E5B, 1}, {0x1E62, 0x1E63, 1},
		{0x1E6C, 0x1E6D, 1}, {0x1E70, 0x1E71, 1}, {0x1E8C, 0x1E8D, 1},
		{0x1E92, 0x1E93, 1}, {0x1E9E, 0x1E9E, 1}, {0x1EA0, 0x1EF9, 1},
		{0xA78D, 0xA78D, 1}, {0xA7AA, 0xA7AA, 1},
	},
}

// suspect reports whether word is to be marked: it mixes scripts, is
// wholly made of look-alikes of Latin letters, or is Restricted. A word
// all of ASCII is none of them: its letters are all Latin and allowed.
func suspect(word string) bool {
	if isASCII(word) {
		return false
	}
	switch script, mixed := scriptOf(word); {
	case mixed:
		return true
	case script == "Latin":
		return restricted(word)
	case script == "":
		return false
	default:
		return looksLatin(word)
	}
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// Has reports whether a word of s mixes scripts, looks Latin in letters
// of another script, or is Restricted.
func Has(s string) bool {
	if isASCII(s) {
		return false
	}
	found := false
	words(s, func(part string, word bool) bool {
		found = word && suspect(part)
		return !found
	})
	return found
}

// Mark returns s with every letter and combining mark beyond ASCII of
// each of its words that mixes scripts, looks Latin in letters of another
// script, or is Restricted (Has) written as mark(r); s itself when no word
// is.
func Mark(s string, mark func(r rune) string) string {
	if !Has(s) {
		return s
	}
	var b strings.Builder
	words(s, func(part string, word bool) bool {
		if !word || !suspect(part) {
			b.WriteString(part)
			return true
		}
		for _, r := range part {
			if r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.In(r, unicode.Mn, unicode.Me)) {
				b.WriteString(mark(r))
			} else {
				b.WriteRune(r)
			}
		}
		return true
	})
	return b.String()
}

// MarkPrefix is Mark cut to at most n bytes, for a text shown within a
// bound: a marked letter can take ten times its bytes (⟨U+0430
// Cyrillic⟩ for а), so a text cut at n and then marked could take ten
// times n. It returns the marked form of the longest prefix of s that
// fits in n bytes, never cut inside a character or a mark, and used, the
// bytes of s that prefix holds (len(s) when all of s fits). A word that
// the cut splits is marked as its part shown reads: "сахарпривет" is
// left as it is, but its "сахар", alone, reads as caxap.
func MarkPrefix(s string, n int, mark func(r rune) string) (marked string, used int) {
	return ShowPrefix(s, n, mark, nil)
}

// ShowPrefix is MarkPrefix with every other character of s also written
// as show(r) when that is not "" (show nil: none is), for a text whose
// characters are spelled out besides its look-alike letters (an invisible
// character as ⟨U+200B⟩): the bound holds as shown, and neither a mark
// nor what show writes is cut. show is called with utf8.RuneError for
// each byte of s that is not UTF-8. mark nil marks no letter.
func ShowPrefix(s string, n int, mark, show func(r rune) string) (shown string, used int) {
	if show == nil && (mark == nil || len(s) <= n && !Has(s)) {
		kept := textcut.Prefix(s, n)
		return kept, len(kept)
	}
	var b strings.Builder
	words(s, func(part string, word bool) bool {
		left := n - b.Len()
		cut := len(part) > left
		if cut {
			part = textcut.Prefix(part, left)
		}
		marked := mark != nil && word && suspect(part)
		if !marked && show == nil {
			b.WriteString(part)
			used += len(part)
			return !cut
		}
		for len(part) > 0 {
			r, size := utf8.DecodeRuneInString(part)
			m := part[:size]
			switch {
			case marked && r >= utf8.RuneSelf && (unicode.IsLetter(r) || unicode.In(r, unicode.Mn, unicode.Me)):
				m = mark(r)
			case show != nil:
				if v := show(r); v != "" {
					m = v
				}
			}
			if b.Len()+len(m) > n {
				return false
			}
			b.WriteString(m)
			used += size
			part = part[size:]
		}
		return !cut
	})
	return b.String(), used
}

// Spelled is a mark for an operator's eyes: ⟨U+0430 Cyrillic⟩, the code
// point and its script.
func Spelled(r rune) string {
	return fmt.Sprintf("⟨U+%04X %s⟩", r, Of(r))
}

// words calls yield with each part of s in turn, the words (word true)
// and what lies between them, until yield returns false.
func words(s string, yield func(part string, word bool) bool) {
	for len(s) > 0 {
		i := strings.IndexFunc(s, isWordRune)
		if i < 0 {
			yield(s, false)
			return
		}
		if i > 0 && !yield(s[:i], false) {
			return
		}
		s = s[i:]
		j := strings.IndexFunc(s, func(r rune) bool { return !isWordRune(r) })
		if j < 0 {
			j = len(s)
		}
		if !yield(s[:j], true) {
			return
		}
		s = s[j:]
	}
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.In(r, unicode.Mn, unicode.Me)
}

// Of names the script of the letter r (a name of unicode.Scripts), the
// scripts of East Asian writing as one, "CJK".
func Of(r rune) string {
	if r < utf8.RuneSelf {
		return "Latin"
	}
	for _, name := range [...]string{"Latin", "Cyrillic", "Greek"} {
		if unicode.Is(unicode.Scripts[name], r) {
			return name
		}
	}
	if unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul, unicode.Bopomofo) {
		return "CJK"
	}
	for name, t := range unicode.Scripts {
		if unicode.Is(t, r) {
			return name
		}
	}
	return "U+" + strconv.FormatInt(int64(r), 16)
}
