package sandbox

import (
	"github.com/snapnode/snapnode/internal/textcut"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// Prefix is the virtual folder every proposal path starts with. The
// sandbox's own root is spelled "/sandbox/" (Normalize returns "" for it).
const Prefix = "/sandbox/"

// Bounds on a path, checked by Normalize.
const (
	MaxPathBytes = 4096 // the whole virtual path, "/sandbox/" included
	MaxNameBytes = 255  // one segment
	MaxDepth     = 32   // segments below /sandbox/
)

// ReservedPrefix starts the names of the sandbox's own temporary files. No
// proposal may name such a file, in any letter case (see reservedName),
// and List never shows one.
const ReservedPrefix = ".snapnode-"

// reservedName reports whether the name seg starts with ReservedPrefix
// in any letter case. On a file system that folds names,
// ".SNAPNODE-COUNT" and ".\u017Fnapnode-count" (LONG S folds to s) are
// the sandbox's CountFile; where that file is missing at the time, no
// spelling check (ErrSpelling) finds it, and a folder made under such a
// name would stand where the sandbox writes its own file. The rule is
// the same whatever the file system, as every rule of Normalize.
func reservedName(seg string) bool {
	n := utf8.RuneCountInString(ReservedPrefix) // ASCII: one byte a rune
	i := 0
	for range n {
		if i == len(seg) {
			return false
		}
		_, size := utf8.DecodeRuneInString(seg[i:])
		i += size
	}
	return strings.EqualFold(seg[:i], ReservedPrefix)
}

// Rule names the rule a path broke. A Rule is itself an error, so a
// rejection can be tested with errors.Is(err, sandbox.RuleDotSegment); every
// rejection also matches ErrInvalidPath.
type Rule string

// The rules of Normalize, in the order they are checked.
const (
	RuleTooLong       Rule = "too_long"       // path over MaxPathBytes, or a segment over MaxNameBytes
	RuleInvalidUTF8   Rule = "invalid_utf8"   // not valid UTF-8 (overlong forms included)
	RuleControlChar   Rule = "control_char"   // NUL, C0, DEL or C1 control
	RuleBackslash     Rule = "backslash"      // '\' anywhere
	RuleFormatChar    Rule = "format_char"    // invisible or bidi formatting (Unicode Cf), private use, noncharacters
	RuleLookalike     Rule = "lookalike"      // a character that reads as '.', '/', '\' or a space but is not one
	RuleNotNFC        Rule = "not_nfc"        // not in Unicode Normalization Form C
	RuleNotInSandbox  Rule = "not_in_sandbox" // does not start with "/sandbox/"
	RuleTrailingSlash Rule = "trailing_slash" // ends in '/' (except "/sandbox/" itself)
	RuleEmptySegment  Rule = "empty_segment"  // "//"
	RuleDotSegment    Rule = "dot_segment"    // a segment made of dots only: ".", "..", "..."
	RuleSpace         Rule = "space"          // a segment that starts or ends with a space
	RuleReserved      Rule = "reserved"       // a segment that starts with ReservedPrefix, in any letter case
	RuleTooDeep       Rule = "too_deep"       // more than MaxDepth segments
)

func (r Rule) Error() string { return "sandbox: path rule " + string(r) }

// PathError is a path Normalize rejected, with the rule it broke. It
// matches ErrInvalidPath and its Rule with errors.Is.
type PathError struct {
	Path   string // the path as given
	Rule   Rule
	Detail string // what exactly broke the rule, for people
}

func (e *PathError) Error() string {
	msg := "sandbox: path " + strconv.QuoteToASCII(textcut.Shorten(e.Path, 120, "…")) + " rejected (" + string(e.Rule) + ")"
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap gives ErrInvalidPath and the Rule.
func (e *PathError) Unwrap() []error { return []error{ErrInvalidPath, e.Rule} }

// Normalize turns a proposal path into the clean relative slash path it
// names inside the sandbox: "/sandbox/notes/a.txt" gives "notes/a.txt",
// and "/sandbox/" gives "" (the sandbox itself). Nothing is decoded and
// nothing is cleaned: a path that is not already in its one canonical form
// is rejected with a *PathError naming the Rule it broke, so what was
// judged is exactly what runs. In particular:
//
//   - "/sandbox" (no slash) is rejected like every path outside "/sandbox/";
//     list the root as "/sandbox/".
//   - Percent signs are ordinary characters: "%2e%2e" is a name of six
//     characters inside the sandbox, never "..".
//   - Segments made only of dots (".", "..", "...") are rejected.
//   - Unicode: the path must be NFC; Cc (controls), Cf (bidi controls,
//     zero-width characters, soft hyphen, BOM), private-use characters and
//     noncharacters are rejected; so are characters that read as a dot, a
//     slash, a backslash or a space without being one: anything whose NFKC
//     form contains '.', '/', '\' or a space (ONE DOT LEADER U+2024,
//     FULLWIDTH SOLIDUS U+FF0F, NO-BREAK SPACE U+00A0, …) and the slash-like
//     signs that have no such form (DIVISION SLASH U+2215, FRACTION SLASH
//     U+2044, BIG SOLIDUS U+29F8, …; see lookalikes). Letters of every
//     script stay allowed.
//
// The result never starts with '/', never contains an empty, "." or ".."
// segment, and Normalize(Prefix+result) returns result again.
func Normalize(p string) (string, error) {
	bad := func(r Rule, detail string) (string, error) {
		return "", &PathError{Path: p, Rule: r, Detail: detail}
	}
	if len(p) > MaxPathBytes {
		return bad(RuleTooLong, strconv.Itoa(len(p))+" bytes, at most "+strconv.Itoa(MaxPathBytes))
	}
	if !utf8.ValidString(p) {
		return bad(RuleInvalidUTF8, "")
	}
	ascii := true
	for i, r := range p {
		if r < utf8.RuneSelf {
			if r < 0x20 || r == 0x7f {
				return bad(RuleControlChar, "byte "+strconv.Itoa(i))
			}
			if r == '\\' {
				return bad(RuleBackslash, "byte "+strconv.Itoa(i))
			}
			continue
		}
		ascii = false
		if rule, ok := badRune(r); !ok {
			return bad(rule, "byte "+strconv.Itoa(i)+" "+strconv.QuoteRuneToASCII(r))
		}
	}
	if !ascii && !norm.NFC.IsNormalString(p) {
		return bad(RuleNotNFC, "")
	}
	if !strings.HasPrefix(p, Prefix) {
		return bad(RuleNotInSandbox, "must start with "+Prefix)
	}
	rest := p[len(Prefix):]
	if rest == "" {
		return "", nil
	}
	if strings.HasSuffix(rest, "/") {
		return bad(RuleTrailingSlash, "")
	}
	depth := 0
	for seg := range strings.SplitSeq(rest, "/") {
		depth++
		switch {
		case seg == "":
			return bad(RuleEmptySegment, "")
		case strings.Trim(seg, ".") == "":
			return bad(RuleDotSegment, strconv.Quote(seg))
		case len(seg) > MaxNameBytes:
			return bad(RuleTooLong, "segment of "+strconv.Itoa(len(seg))+" bytes, at most "+strconv.Itoa(MaxNameBytes))
		case seg[0] == ' ' || seg[len(seg)-1] == ' ':
			return bad(RuleSpace, strconv.Quote(seg))
		case reservedName(seg):
			return bad(RuleReserved, strconv.Quote(seg))
		}
	}
	if depth > MaxDepth {
		return bad(RuleTooDeep, strconv.Itoa(depth)+" segments, at most "+strconv.Itoa(MaxDepth))
	}
	return rest, nil
}

// lookalikes are characters that read as a path separator or a dot but that
// NFKC does not map to one, so the NFKC test of badRune misses them.
var lookalikes = map[rune]bool{
	0x2044: true, // FRACTION SLASH
	0x2215: true, // DIVISION SLASH
	0x2216: true, // SET MINUS
	0x27CB: true, // MATHEMATICAL RISING DIAGONAL
	0x27CD: true, // MATHEMATICAL FALLING DIAGONAL
	0x29F5: true, // REVERSE SOLIDUS OPERATOR
	0x29F8: true, // BIG SOLIDUS
	0x29F9: true, // BIG REVERSE SOLIDUS
	0x2571: true, // BOX DRAWINGS LIGHT DIAGONAL UPPER RIGHT TO LOWER LEFT
	0x2572: true, // BOX DRAWINGS LIGHT DIAGONAL UPPER LEFT TO LOWER RIGHT
	0x3033: true, // VERTICAL KANA REPEAT MARK UPPER HALF
	0x2027: true, // HYPHENATION POINT
	0x2E31: true, // WORD SEPARATOR MIDDLE DOT
	0x0338: true, // COMBINING LONG SOLIDUS OVERLAY
	0x0337: true, // COMBINING SHORT SOLIDUS OVERLAY
	0x3002: true, // IDEOGRAPHIC FULL STOP
	0x06D4: true, // ARABIC FULL STOP
	0x0701: true, // SYRIAC SUPRALINEAR FULL STOP
	0x0702: true, // SYRIAC SUBLINEAR FULL STOP
	0xA4F8: true, // LISU LETTER TONE MYA TI (a dot)
	0xA60E: true, // VAI FULL STOP
}

// badRune reports the rule a non-ASCII rune breaks, if any.
func badRune(r rune) (Rule, bool) {
	switch {
	case unicode.Is(unicode.Cc, r):
		return RuleControlChar, false
	case unicode.Is(unicode.Cf, r), unicode.Is(unicode.Co, r), isNoncharacter(r):
		return RuleFormatChar, false
	case unicode.IsSpace(r), unicode.In(r, unicode.Zs, unicode.Zl, unicode.Zp):
		return RuleLookalike, false
	case lookalikes[r]:
		return RuleLookalike, false
	}
	if strings.ContainsAny(norm.NFKC.String(string(r)), "./\\ ") {
		return RuleLookalike, false
	}
	return "", true
}

func isNoncharacter(r rune) bool {
	return (r >= 0xFDD0 && r <= 0xFDEF) || r&0xFFFE == 0xFFFE
}

// HasTextExt reports whether a path names a text file the write, delete and
// rename rules allow: its last segment ends in ".txt" or ".md", in lower
// case exactly (".TXT" is not text), after a name of at least one
// character (".md" alone is not). It takes a virtual or a relative path.
func HasTextExt(p string) bool {
	base := p[strings.LastIndexByte(p, '/')+1:]
	for _, ext := range []string{".txt", ".md"} {
		if len(base) > len(ext) && strings.HasSuffix(base, ext) {
			return true
		}
	}
	return false
}

// Virtual turns a relative sandbox path back into its proposal form:
// "notes/a.txt" gives "/sandbox/notes/a.txt", "" gives "/sandbox/".
func Virtual(rel string) string { return Prefix + rel }
