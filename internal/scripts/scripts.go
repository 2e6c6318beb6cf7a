// Package scripts finds the words that mix letters of several Unicode
// scripts: "pаssword" whose а is Cyrillic (U+0430) reads as password, but
// is another word, another file. It rewrites the letters beyond ASCII of
// such a word, so that a look-alike cannot pass for the letter it
// imitates:
//
//	scripts.Mark("/sandbox/p\u0430ssword.txt", scripts.Spelled)
//	// "/sandbox/p⟨U+0430 Cyrillic⟩ssword.txt"
//
// A word is a run of letters, digits and combining marks; only its letters
// count (digits, punctuation and marks belong to no one script). A word
// in one script is left as it is, whichever script: "итоги" in Cyrillic,
// or "отчёт.txt", where the dot parts two words. Han, Hiragana, Katakana,
// Hangul and Bopomofo count as one script, as Japanese and Korean mix
// them. Whole-script look-alikes ("раураl" all in Cyrillic) are not caught:
// that takes a table of confusables (Unicode TS #39), which the standard
// library does not carry.
package scripts

import (
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
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

// Has reports whether a word of s mixes scripts.
func Has(s string) bool {
	found := false
	words(s, func(part string, word bool) bool {
		found = word && Mixed(part)
		return !found
	})
	return found
}

// Mark returns s with every letter beyond ASCII of each of its words that
// mixes scripts written as mark(r); s itself when no word does.
func Mark(s string, mark func(r rune) string) string {
	if !Has(s) {
		return s
	}
	var b strings.Builder
	words(s, func(part string, word bool) bool {
		if !word || !Mixed(part) {
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
