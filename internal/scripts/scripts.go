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
// count (digits, punctuation and marks belong to no one script). Two kinds
// of word are marked:
//
//   - a word that mixes the letters of several scripts (Mixed);
//   - a word in one script other than Latin whose every letter imitates a
//     Latin one (LooksLatin): "ѕсоре", all Cyrillic, reads as scope.
//
// Any other word in one script is left as it is, whichever script:
// "итоги" in Cyrillic (и and т imitate no Latin letter), or "отчёт.txt",
// where the dot parts two words. Han, Hiragana, Katakana, Hangul and
// Bopomofo count as one script, as Japanese and Korean mix them. The
// confusables are Unicode 13's (github.com/mtibben/confusables). A word of
// the Latin script is not compared with ASCII: "café" is left as it is,
// and so is a word whose only look-alikes are Latin letters themselves
// (fullwidth "ｐａｙｐａｌ", or "pɑypɑl" with the Latin alpha U+0251).
package scripts

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/mtibben/confusables"
	"golang.org/x/text/unicode/norm"
)

// Mixed reports whether the letters of word come from more than one
// script.
func Mixed(word string) bool {
	first := ""
	for _, r := range word {
		if !unicode.IsLetter(r) {
			continue
		}
		sc := Of(r)
		if first == "" {
			first = sc
		} else if sc != first {
			return true
		}
	}
	return false
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
	script := ""
	for _, r := range word {
		if !unicode.IsLetter(r) {
			continue
		}
		if sc := Of(r); script == "" {
			script = sc
		} else if sc != script {
			return false // Mixed's
		}
	}
	if script == "" || script == "Latin" {
		return false
	}
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

// suspect reports whether word is to be marked: it mixes scripts, or is
// wholly made of look-alikes of Latin letters. A word all of ASCII is
// neither: its letters are all Latin.
func suspect(word string) bool { return !isASCII(word) && (Mixed(word) || LooksLatin(word)) }

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// Has reports whether a word of s mixes scripts or looks Latin in letters
// of another script.
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

// Mark returns s with every letter beyond ASCII of each of its words that
// mixes scripts or looks Latin in letters of another script (Has) written
// as mark(r); s itself when no word does.
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
			if r >= utf8.RuneSelf && unicode.IsLetter(r) {
				b.WriteString(mark(r))
			} else {
				b.WriteRune(r)
			}
		}
		return true
	})
	return b.String()
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
