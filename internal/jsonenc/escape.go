package jsonenc

import "unicode/utf8"

// AppendASCIIEscape appends the JSON escape of c, which must be the
// quotation mark, the reverse solidus or a control character (below
// 0x20): the two-character forms \" \\ \b \t \n \f \r where JSON has one,
// else \u00XX in lower-case hex. RFC 8785 (the canonical form snapnode
// signs), NIP-01's serialization of an event for its id and
// encoding/json all escape these bytes so; each writer of strings adds
// its own rules for the other characters.
func AppendASCIIEscape(dst []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(dst, '\\', c)
	case '\b':
		return append(dst, '\\', 'b')
	case '\t':
		return append(dst, '\\', 't')
	case '\n':
		return append(dst, '\\', 'n')
	case '\f':
		return append(dst, '\\', 'f')
	case '\r':
		return append(dst, '\\', 'r')
	}
	const hexDigits = "0123456789abcdef"
	return append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
}

// StringForm is how AppendString writes what a JSON string may hold
// unescaped.
type StringForm uint8

const (
	// GoJSON is encoding/json's form without HTML escaping: U+2028 and
	// U+2029 escaped, each byte of invalid UTF-8 written as \ufffd.
	GoJSON StringForm = iota
	// Canonical is RFC 8785's: every character written as it is but
	// those AppendASCIIEscape takes, each byte of invalid UTF-8 written
	// as U+FFFD itself (what canonicalizing encoding/json's \ufffd gives).
	Canonical
)

// AppendString appends s as a JSON string in form; valid is false when s
// is not valid UTF-8 (each bad byte is then written as U+FFFD).
func AppendString(dst []byte, s string, form StringForm) (_ []byte, valid bool) {
	const hexDigits = "0123456789abcdef"
	valid = true
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			dst = AppendASCIIEscape(dst, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			valid = false
			dst = append(dst, s[start:i]...)
			if form == Canonical {
				dst = append(dst, "\ufffd"...)
			} else {
				dst = append(dst, `\ufffd`...)
			}
		case (r == '\u2028' || r == '\u2029') && form == GoJSON:
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xf])
		default:
			i += size
			continue
		}
		i += size
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"'), valid
}
