package config

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// keyPosition returns the line and column (from 1) at which the TOML text
// defines key (a setting, or a table by its header), or 0, 0 when it does
// not find it. It reads the text line by line: a table header ([t] or
// [[t]]) sets the table of the keys after it, and a line starting with a
// key (bare, quoted or dotted) followed by = defines table.key; the
// lines of a multi-line string are skipped.
func keyPosition(text string, key toml.Key) (line, col int) {
	want := key.String()
	var table toml.Key
	inString := "" // the closing quotes of the multi-line string being read
	for i, l := range strings.Split(text, "\n") {
		if inString != "" {
			if strings.Count(l, inString)%2 == 1 {
				inString = ""
			}
			continue
		}
		rest := strings.TrimLeft(l, " \t")
		c := len(l) - len(rest) + 1
		switch {
		case strings.HasPrefix(rest, "["):
			header := strings.TrimLeft(rest, "[")
			parts, after, ok := dottedKey(header)
			if !ok || !strings.HasPrefix(after, "]") {
				continue
			}
			table = parts
			if table.String() == want {
				return i + 1, c
			}
		default:
			parts, after, ok := dottedKey(rest)
			if !ok || !strings.HasPrefix(after, "=") {
				continue
			}
			full := append(append(toml.Key{}, table...), parts...)
			if full.String() == want {
				return i + 1, c
			}
			for _, q := range []string{`"""`, `'''`} {
				if strings.Count(after, q)%2 == 1 {
					inString = q
				}
			}
		}
	}
	return 0, 0
}

// dottedKey reads the key at the start of s: bare or quoted parts joined
// by dots. It returns them and what follows, spaces trimmed.
func dottedKey(s string) (parts toml.Key, rest string, ok bool) {
	for {
		s = strings.TrimLeft(s, " \t")
		var part string
		switch {
		case strings.HasPrefix(s, `"`):
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return nil, "", false
			}
			part, _ = strconv.Unquote(q)
			s = s[len(q):]
		case strings.HasPrefix(s, "'"):
			end := strings.IndexByte(s[1:], '\'')
			if end < 0 {
				return nil, "", false
			}
			part, s = s[1:end+1], s[end+2:]
		default:
			n := strings.IndexFunc(s, func(r rune) bool {
				return !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' || r == '-')
			})
			if n < 0 {
				n = len(s)
			}
			if n == 0 {
				return nil, "", false
			}
			part, s = s[:n], s[n:]
		}
		parts = append(parts, part)
		s = strings.TrimLeft(s, " \t")
		if !strings.HasPrefix(s, ".") {
			return parts, s, true
		}
		s = s[1:]
	}
}

// at returns "FILE:LINE:COL" for key of the file named file holding text:
// where the key is defined, else where the nearest table holding it is (a
// key of an inline table, agent = { … }), else file alone.
func at(file, text string, key toml.Key) string {
	for k := key; len(k) > 0; k = k[:len(k)-1] {
		if line, col := keyPosition(text, k); line > 0 {
			return fmt.Sprintf("%s:%d:%d", file, line, col)
		}
	}
	return file
}

// tomlLine matches the errors of the TOML decoder that are not a
// toml.ParseError: a value of another type than its setting's.
var tomlLine = regexp.MustCompile(`^toml: line (\d+) \(last key "([^"]*)"\): (.*)$`)

// decodeError says err, an error of toml.Decode on text, as
// "config: FILE:LINE:COL: KEY: what is wrong".
func decodeError(file, text string, err error) error {
	var pe toml.ParseError
	if errors.As(err, &pe) {
		where := fmt.Sprintf("%s:%d:%d", file, pe.Position.Line, pe.Position.Col)
		if pe.LastKey != "" {
			return fmt.Errorf("config: %s: %s: %s", where, pe.LastKey, pe.Message)
		}
		return fmt.Errorf("config: %s: %s", where, pe.Message)
	}
	if m := tomlLine.FindStringSubmatch(err.Error()); m != nil {
		key := toml.Key(strings.Split(m[2], "."))
		where := file + ":" + m[1]
		if line, col := keyPosition(text, key); strconv.Itoa(line) == m[1] {
			where = fmt.Sprintf("%s:%d:%d", file, line, col)
		}
		return fmt.Errorf("config: %s: %s: %s", where, m[2], m[3])
	}
	return fmt.Errorf("config: %s: %w", file, err)
}

// sourceParen matches the flag or variable a message of Validate names
// after a setting, in parentheses: " (--agent-max-steps)".
var sourceParen = regexp.MustCompile(`^(\[\d+\])? \((--[a-z0-9-]+|SNAPNODE_[A-Z0-9_]+)\)`)

// locateErrors says in each error of Validate (err, joined) about a
// setting where its value comes from. where says it: the file, line and
// column (inFile), or the variable or flag; "" for the default. The place
// in the file prefixes the message, in place of the flag or variable the
// message names for the setting: "config: FILE:LINE:COL: workers 0: want
// at least 1". A variable or flag takes the place of the one the message
// names, "config: agent.max_steps (SNAPNODE_AGENT_MAX_STEPS): want 1…10000
// model calls; got 0", or prefixes a message that names none: "config:
// SNAPNODE_WORKERS: workers 0: want at least 1". The setting is the first
// the message's subject (up to its first ": ") names.
func locateErrors(err error, where func(key string) (w string, inFile bool)) error {
	var errs []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	} else {
		errs = []error{err}
	}
	out := make([]error, 0, len(errs))
	for _, e := range errs {
		out = append(out, locateOne(e, where))
	}
	return errors.Join(out...)
}

func locateOne(err error, where func(key string) (string, bool)) error {
	msg, ok := strings.CutPrefix(err.Error(), "config: ")
	if !ok {
		return err
	}
	subject, _, _ := strings.Cut(msg, ": ")
	for i := 0; i < len(subject); i++ {
		// A key starts a word: not within one, nor within a flag's
		// name ("agent" of --agent-max-steps).
		if i > 0 && (isKeyByte(subject[i-1]) || subject[i-1] == '.' || subject[i-1] == '-') {
			continue
		}
		n := i
		for n < len(subject) && (isKeyByte(subject[n]) || subject[n] == '.') {
			n++
		}
		key := subject[i:n]
		if key == "" {
			continue
		}
		w, inFile := where(key)
		if w == "" {
			continue
		}
		rest := msg[n:]
		m := sourceParen.FindStringSubmatchIndex(rest)
		switch {
		case m != nil && !inFile:
			// The variable or flag that gave it in place of the one
			// named.
			rest = rest[:m[4]] + w + rest[m[5]:]
			return &locatedError{msg: fmt.Sprintf("config: %s%s%s", msg[:i], key, rest), err: err}
		case m != nil:
			// The file gave it: the flag is not where it came from.
			index := ""
			if m[2] >= 0 {
				index = rest[m[2]:m[3]]
			}
			rest = index + rest[m[1]:]
		}
		return &locatedError{msg: fmt.Sprintf("config: %s: %s%s%s", w, msg[:i], key, rest), err: err}
	}
	return err
}

func isKeyByte(b byte) bool { return b >= 'a' && b <= 'z' || b >= '0' && b <= '9' || b == '_' }

// locatedError is an error of Validate with the place in the file of the
// setting it is about.
type locatedError struct {
	msg string
	err error
}

func (e *locatedError) Error() string { return e.msg }
func (e *locatedError) Unwrap() error { return e.err }
