// Package shellword writes a value as one word of a POSIX shell command
// line: what a hint printed for an operator to run (a page of the
// console, a command's note) names a data folder, a task or an action by,
// so that the command, copied as printed, gets the value as it is.
package shellword

import "strings"

// plain are the bytes a word is written with as it is.
const plain = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_./:@%+=,-"

// Quote returns s as one shell word: as it is when it is not empty and
// has only letters, digits and _./:@%+=,-; else in single quotes, each
// single quote of s closing them, escaped with a backslash, and opening
// them again.
func Quote(s string) string {
	if s != "" && strings.Trim(s, plain) == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
