package scripts

import (
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// TestLatinAllowedDecomposes: Restricted judges a word's letters taken
// apart (NFD), so every precomposed letter latinAllowed holds must come
// apart into ASCII and what latinAllowed holds; a mark missing from the
// table marks every word of an orthography that writes the letter.
func TestLatinAllowedDecomposes(t *testing.T) {
	for _, r16 := range latinAllowed.R16 {
		for r := rune(r16.Lo); r <= rune(r16.Hi); r += rune(r16.Stride) {
			for _, c := range norm.NFD.String(string(r)) {
				if c >= utf8.RuneSelf && !unicode.Is(latinAllowed, c) {
					t.Errorf("%U %c is allowed, but %U, a part of it, is not", r, r, c)
				}
			}
		}
	}
}
