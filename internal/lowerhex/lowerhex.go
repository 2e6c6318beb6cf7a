// Package lowerhex checks the lowercase hexadecimal strings of the
// protocol and of the audit log: signatures, public keys, event ids and
// SHA-256 digests, which are never written in upper case.
package lowerhex

// Valid reports whether s is exactly n digits 0-9 or a-f.
func Valid(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}
