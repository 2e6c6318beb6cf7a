package dbtext

import "strings"

// Clean returns s with each byte that is not UTF-8, and each NUL, made
// U+FFFD.
func Clean(s string) string {
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "\uFFFD")
}
