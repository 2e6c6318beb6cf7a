package sandbox_test

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// FuzzNormalize checks Normalize against the documented rules: what it
// accepts breaks none of them and comes back unchanged below the prefix
// (no decoding, no cleaning, no "." or ".." segment, no leading '/'), and
// is accepted again with the prefix; what it rejects breaks the rule it
// names, as found by an independent check of each rule.
func FuzzNormalize(f *testing.F) {
	for _, c := range loadNormalizeCases(f) {
		f.Add(c.In)
	}
	f.Fuzz(func(t *testing.T, p string) {
		out, err := sandbox.Normalize(p)
		broken := rulesBroken(p)
		if err != nil {
			var pe *sandbox.PathError
			if !errors.As(err, &pe) || !errors.Is(err, sandbox.ErrInvalidPath) {
				t.Fatalf("Normalize(%+q): untyped error %T %v", p, err, err)
			}
			if !slices.Contains(broken, pe.Rule) {
				t.Fatalf("Normalize(%+q) names rule %s, but the path breaks only %v", p, pe.Rule, broken)
			}
			return
		}
		if len(broken) > 0 {
			t.Fatalf("Normalize(%+q) accepted a path that breaks %v", p, broken)
		}
		if out != strings.TrimPrefix(p, sandbox.Prefix) {
			t.Fatalf("Normalize(%+q) = %q: rewritten", p, out)
		}
		if strings.HasPrefix(out, "/") {
			t.Fatalf("Normalize(%+q) = %q starts with /", p, out)
		}
		if out != "" {
			for _, seg := range strings.Split(out, "/") {
				if seg == "" || seg == "." || seg == ".." {
					t.Fatalf("Normalize(%+q) = %q has segment %q", p, out, seg)
				}
			}
		}
		again, err := sandbox.Normalize(sandbox.Prefix + out)
		if err != nil || again != out {
			t.Fatalf("Normalize(Prefix+%q) = %q, %v: not idempotent", out, again, err)
		}
	})
}

// rulesBroken checks every rule of Normalize on its own.
func rulesBroken(p string) []sandbox.Rule {
	var broken []sandbox.Rule
	add := func(cond bool, r sandbox.Rule) {
		if cond {
			broken = append(broken, r)
		}
	}
	rest, inside := strings.CutPrefix(p, sandbox.Prefix)
	segs := strings.Split(rest, "/")
	if rest == "" {
		segs = nil
	}
	anySeg := func(pred func(string) bool) bool { return slices.ContainsFunc(segs, pred) }
	anyRune := func(pred func(rune) bool) bool { return strings.ContainsFunc(p, pred) }

	add(len(p) > sandbox.MaxPathBytes || inside && anySeg(func(s string) bool { return len(s) > sandbox.MaxNameBytes }), sandbox.RuleTooLong)
	add(!utf8.ValidString(p), sandbox.RuleInvalidUTF8)
	add(anyRune(func(r rune) bool { return r < 0x20 || r >= 0x7f && r <= 0x9f }), sandbox.RuleControlChar)
	add(strings.Contains(p, `\`), sandbox.RuleBackslash)
	add(anyRune(func(r rune) bool {
		return unicode.In(r, unicode.Cf, unicode.Co) || r >= 0xFDD0 && r <= 0xFDEF || r&0xFFFE == 0xFFFE && r <= unicode.MaxRune
	}), sandbox.RuleFormatChar)
	add(anyRune(func(r rune) bool {
		if r < utf8.RuneSelf || r == utf8.RuneError {
			return false
		}
		// The rule is per character: the same character alone in a name
		// must be a look-alike too.
		_, err := sandbox.Normalize(sandbox.Prefix + "x" + string(r))
		return errors.Is(err, sandbox.RuleLookalike)
	}), sandbox.RuleLookalike)
	add(utf8.ValidString(p) && !norm.NFC.IsNormalString(p), sandbox.RuleNotNFC)
	add(!inside, sandbox.RuleNotInSandbox)
	add(inside && strings.HasSuffix(rest, "/"), sandbox.RuleTrailingSlash)
	add(inside && anySeg(func(s string) bool { return s == "" }), sandbox.RuleEmptySegment)
	add(inside && anySeg(func(s string) bool { return s != "" && strings.Trim(s, ".") == "" }), sandbox.RuleDotSegment)
	add(inside && anySeg(func(s string) bool { return strings.HasPrefix(s, " ") || strings.HasSuffix(s, " ") }), sandbox.RuleSpace)
	add(inside && anySeg(func(s string) bool {
		r := []rune(s)
		n := len([]rune(sandbox.ReservedPrefix))
		return len(r) >= n && strings.EqualFold(string(r[:n]), sandbox.ReservedPrefix)
	}), sandbox.RuleReserved)
	add(inside && len(segs) > sandbox.MaxDepth, sandbox.RuleTooDeep)
	return broken
}
