package jsonenc

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
