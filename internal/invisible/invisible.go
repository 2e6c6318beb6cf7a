package invisible

import (
	"fmt"
	"io"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Is reports whether r is a character a reader cannot see or that changes
// how the text around it reads: format characters (category Cf: bidi
// overrides and isolates, zero-width characters, soft hyphen, BOM, tags),
// private-use and surrogate code points, variation selectors, line and
// paragraph separators, the other characters Unicode says are shown as
// nothing (Other_Default_Ignorable_Code_Point: the combining grapheme
// joiner U+034F, the Hangul fillers U+115F, U+1160, U+3164 and U+FFA0,
// the Khmer inherent vowels U+17B4 and U+17B5…), and anything else that
// is not graphic (controls among them). The ASCII space is graphic.
func Is(r rune) bool {
	return unicode.In(r, unicode.Cf, unicode.Co, unicode.Cs, unicode.Variation_Selector, unicode.Zl, unicode.Zp, unicode.Other_Default_Ignorable_Code_Point) ||
		!unicode.IsGraphic(r)
}

// EscapeJSON returns b, JSON text, with every character beyond ASCII that
// Is reports (and DEL) written as a \uXXXX escape, a surrogate pair beyond
// the Basic Multilingual Plane. It is the same JSON, meaning the same
// values: in JSON text such a character can only stand inside a string,
// where its escape stands for it. ASCII controls are left to the encoder
// (which must escape them in strings), and bytes that are not UTF-8 are
// left as they are. b itself is returned when nothing needs escaping.
func EscapeJSON(b []byte) []byte {
	return escape(b, false)
}

// EscapeText returns s, plain text such as a file's, with every character
// Is reports written as EscapeJSON writes it, ASCII controls and DEL
// among them, except the line feed (and a carriage return just before
// one: CRLF) and the tab, which keep its lines and columns. A backslash of s stays as it is, so the text can be read back
// only by one who knows it had none; it is for a model or a person to
// read, not to parse. Bytes that are not UTF-8 are left as they are.
func EscapeText(s string) string {
	return string(escape([]byte(s), true))
}

// escape returns b with each character Is reports written as a \uXXXX
// escape (a surrogate pair beyond the Basic Multilingual Plane), but for
// ASCII controls other than DEL, kept in JSON, and the line feed, CRLF
// and tab, kept in text: b itself when nothing needs escaping.
func escape(b []byte, text bool) []byte {
	var out []byte
	last := 0
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf && c != 0x7f && (c >= 0x20 || !text || c == '\n' || c == '\t' || c == '\r' && i+1 < len(b) && b[i+1] == '\n') {
			i++
			continue
		}
		r, n := utf8.DecodeRune(b[i:])
		if (r == utf8.RuneError && n == 1) || !Is(r) {
			i += n
			continue
		}
		out = append(out, b[last:i]...)
		if r1, r2 := utf16.EncodeRune(r); r1 != unicode.ReplacementChar {
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += n
		last = i
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

// NewWriter returns a writer that writes to w what it is given through
// EscapeJSON, for a command's output of JSON lines: text that is not JSON
// gets the same escapes, which spell out what they stand for. Each Write
// is escaped by itself: a character split between two writes passes as it
// is (fmt and the JSON encoders write a line at once).
func NewWriter(w io.Writer) io.Writer { return writer{w: w} }

// NewTextWriter returns a writer that writes to w what it is given through
// EscapeText, for a command's messages to a person (its standard error):
// an escape sequence, a carriage return or a bell in a peer's text
// reaches the terminal as its \u escape, where it would retitle the
// window, clear the screen, set the clipboard or hide what was written
// before it. Lines and tabs are kept. Each Write is escaped by itself, as
// NewWriter's.
func NewTextWriter(w io.Writer) io.Writer { return writer{w: w, text: true} }

type writer struct {
	w    io.Writer
	text bool // EscapeText, else EscapeJSON
}

func (x writer) Write(p []byte) (int, error) {
	q := escape(p, x.text)
	if _, err := x.w.Write(q); err != nil {
		// Which of p's bytes went out is not known once they were
		// rewritten: none is claimed.
		return 0, err
	}
	return len(p), nil
}
