package policy

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	cedar "github.com/cedar-policy/cedar-go"
)

// ErrInvalidPolicy is matched (errors.Is) by every *ParseError.
var ErrInvalidPolicy = errors.New("invalid policy")

// ErrOtherNetwork is matched (errors.Is) by the *ParseError of a policy
// naming an Agent of another network than the one it judges for (see
// WithNetwork), beside ErrInvalidPolicy: a caller can say how to choose
// the network.
var ErrOtherNetwork = errors.New("an agent of another network")

// ParseError is a policy text the engine refuses: a Cedar syntax error, or
// a rule of this package (a duplicate @id, an id starting with "host:",
// @confirm on a forbid). Line and Column count from 1; both are 0 when the
// position could not be found.
type ParseError struct {
	File   string
	Line   int
	Column int
	Msg    string
	// Err, when not nil, is what the refusal is beside ErrInvalidPolicy
	// (ErrOtherNetwork), for errors.Is; Msg says it.
	Err error
}

// Error returns "file:line:column: message".
func (e *ParseError) Error() string {
	if e.Line == 0 {
		return fmt.Sprintf("%s: %s", e.File, e.Msg)
	}
	return fmt.Sprintf("%s:%d:%d: %s", e.File, e.Line, e.Column, e.Msg)
}

// Is makes errors.Is(err, ErrInvalidPolicy) true, and errors.Is(err,
// e.Err) when Err is set.
func (e *ParseError) Is(target error) bool {
	return target == ErrInvalidPolicy || (e.Err != nil && target == e.Err)
}

// cedarPos finds "<input>:L:C" and the message after it in cedar-go's
// parser errors, with or without a quoted token between them.
var cedarPos = regexp.MustCompile(`<input>:(\d+):(\d+):?\s*(?:"(?:[^"\\]|\\.)*":\s*)?(.*)$`)

// cedarExact is cedar-go's message for a token other than the one required.
var cedarExact = regexp.MustCompile(`^exact got (.*) want (.*)$`)

// late matches cedar-go's messages that are reported one token late.
var late = regexp.MustCompile(`^(?:exact got |invalid primary$|unexpected effect: |duplicate annotation: |expected ident|expected string)`)

// syntaxError turns an error of cedar-go's parser into a *ParseError with
// the position in src.
func syntaxError(file string, src []byte, err error) *ParseError {
	msg := err.Error()
	pe := &ParseError{File: file, Msg: msg}
	if m := cedarPos.FindStringSubmatch(msg); m != nil {
		pe.Line, _ = strconv.Atoi(m[1])
		pe.Column, _ = strconv.Atoi(m[2])
		pe.Msg = m[3]
		// cedar-go reports these errors at the token after the culprit,
		// once it has consumed it: point at the culprit.
		if late.MatchString(pe.Msg) {
			if off := offsetOf(src, pe.Line, pe.Column); off >= 0 && off < len(src) {
				if at := tokenBefore(src, off); at >= 0 {
					pe.Line, pe.Column = lineColumn(src, at)
				}
			}
		}
	}
	// Some errors come without a position, or with a wrong one: find the
	// culprit ourselves.
	off := -1
	switch {
	case strings.Contains(msg, "invalid UTF-8"):
		off = firstInvalidUTF8(src)
	case strings.Contains(msg, "invalid character NUL"):
		off = bytes.IndexByte(src, 0)
	case pe.Line == 0:
		number := ""
		if m := cedarNumber.FindStringSubmatch(msg); m != nil {
			number = m[1]
			pe.Msg = "integer " + number + " does not fit in 64 bits"
		}
		off = badToken(src, number)
	}
	if off >= 0 {
		pe.Line, pe.Column = lineColumn(src, off)
	}
	pe.Msg = strings.TrimPrefix(pe.Msg, "parser error: ")
	if m := cedarExact.FindStringSubmatch(pe.Msg); m != nil {
		if m[1] == "" {
			pe.Msg = fmt.Sprintf("expected %q, but the text ends", m[2])
		} else {
			pe.Msg = fmt.Sprintf("expected %q, found %q", m[2], m[1])
		}
	}
	if pe.Msg == "" {
		pe.Msg = "syntax error"
	}
	return pe
}

// lineColumn converts a byte offset to a 1-based line and column, the
// column counting characters as cedar-go does.
func lineColumn(src []byte, off int) (line, col int) {
	line = 1 + bytes.Count(src[:off], []byte("\n"))
	start := bytes.LastIndexByte(src[:off], '\n') + 1
	return line, 1 + utf8.RuneCount(src[start:off])
}

// firstInvalidUTF8 returns the offset of the first byte that is not
// valid UTF-8, or -1.
func firstInvalidUTF8(src []byte) int {
	for i := 0; i < len(src); {
		r, n := utf8.DecodeRune(src[i:])
		if r == utf8.RuneError && n <= 1 {
			return i
		}
		i += n
	}
	return -1
}

// cedarNumber finds the integer cedar-go could not read.
var cedarNumber = regexp.MustCompile(`parsing "(-?\d+)": value out of range`)

// badToken returns the offset, outside comments, of the integer number
// (when it is not empty), or of the first string literal cedar-go cannot
// unquote, or -1.
func badToken(src []byte, number string) int {
	prevWord := ""
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '"':
			end := i + 1
			for end < len(src) && src[end] != '"' {
				if src[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(src) {
				return i // unterminated
			}
			if !validLiteral(src[i:end+1], prevWord == "like") {
				return i
			}
			prevWord = ""
			i = end + 1
		case c >= '0' && c <= '9':
			start := i
			for i < len(src) && src[i] >= '0' && src[i] <= '9' {
				i++
			}
			if digits := string(src[start:i]); digits == number {
				return start
			} else if "-"+digits == number {
				return bytes.LastIndexByte(src[:start], '-')
			}
			prevWord = ""
		case isWordByte(c):
			start := i
			for i < len(src) && isWordByte(src[i]) {
				i++
			}
			prevWord = string(src[start:i])
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		default:
			prevWord = ""
			i++
		}
	}
	return -1
}

func isWordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// validLiteral asks cedar-go whether a quoted literal (with its quotes) is
// a valid string, or a valid pattern after `like`.
func validLiteral(lit []byte, pattern bool) bool {
	var probe []byte
	if pattern {
		probe = append(append([]byte(`permit(principal,action,resource) when { "" like `), lit...), " };"...)
	} else {
		probe = append(append([]byte(`@a(`), lit...), ") permit(principal,action,resource);"...)
	}
	_, err := cedar.NewPolicyListFromBytes("", probe)
	return err == nil
}

// offsetOf converts a 1-based line and column (in characters) to a byte
// offset, or -1.
func offsetOf(src []byte, line, col int) int {
	off := 0
	for l := 1; l < line; l++ {
		i := bytes.IndexByte(src[off:], '\n')
		if i < 0 {
			return -1
		}
		off += i + 1
	}
	for c := 1; c < col; c++ {
		if off >= len(src) || src[off] == '\n' {
			return -1
		}
		_, n := utf8.DecodeRune(src[off:])
		off += n
	}
	return off
}

// tokenBefore returns the start of the Cedar token before the one that
// starts at off, or -1 if no token starts there.
func tokenBefore(src []byte, off int) int {
	prev := -1
	for i := 0; i < len(src); {
		c := src[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
			continue
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
			continue
		}
		if i == off {
			return prev
		}
		if i > off {
			return -1
		}
		prev = i
		switch {
		case c == '"':
			i++
			for i < len(src) && src[i] != '"' {
				if src[i] == '\\' {
					i++
				}
				i++
			}
			i++
		case isWordByte(c):
			for i < len(src) && isWordByte(src[i]) {
				i++
			}
		case i+1 < len(src) && slices.Contains(twoCharOps, string(src[i:i+2])):
			i += 2
		default:
			_, n := utf8.DecodeRune(src[i:])
			i += n
		}
	}
	return -1
}

// twoCharOps are Cedar's operators of two characters.
var twoCharOps = []string{"==", "!=", "<=", ">=", "&&", "||", "::"}
