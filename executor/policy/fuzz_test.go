package policy_test

import (
	"bytes"
	"errors"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor/policy"
)

// addPolicyFiles seeds a fuzz target with every policy text of testdata.
func addPolicyFiles(f *testing.F, add func(src []byte)) {
	f.Helper()
	for _, dir := range []string{"policies", "parse-errors"} {
		files, err := filepath.Glob(filepath.Join("testdata", dir, "*.cedar"))
		if err != nil {
			f.Fatal(err)
		}
		for _, file := range files {
			src, err := os.ReadFile(file)
			if err != nil {
				f.Fatal(err)
			}
			add(src)
		}
	}
	add([]byte(nil))
}

// probes are requests every parsed policy is asked about.
var probes = []policy.Request{
	{Principal: "bc1pagent", Action: "WRITE_FILE", Paths: []string{"/sandbox/a.md"}, Risk: "MEDIUM", Size: 10, RollbackSupported: true},
	{Principal: "bc1pop", Operator: true, Action: "RENAME_FILE", Paths: []string{"/sandbox/docs/a.md", "/sandbox/b.md"}, Risk: "HIGH", RollbackSupported: true, RecentlyRolledBack: true},
	{Principal: "tb1px", Action: "THINK", Risk: "LOW", RollbackSupported: true},
	{Principal: "bc1pagent", Action: "DELETE_FILE", Paths: []string{"/sandbox/../etc/passwd"}, Risk: "CRITICAL"},
}

// FuzzParse feeds arbitrary text to Parse. It must not panic; a refusal is
// a *ParseError with a position inside the text; an accepted
// policy judges the probes without failing, never permits what the host
// rules deny, and Explain states what Decide decided.
func FuzzParse(f *testing.F) {
	addPolicyFiles(f, func(src []byte) { f.Add(src) })
	f.Add([]byte(`@confirm permit (principal, action, resource) when { context.size > 0 };`))
	f.Add([]byte(`forbid (principal, action, resource) unless { resource in Path::"/sandbox/docs/" };`))
	f.Add([]byte("permit (principal, action, resource) when { \"\\u{110000}\" like \"*\" };"))
	f.Fuzz(func(t *testing.T, src []byte) {
		e, err := policy.Parse("fuzz.cedar", src)
		if err != nil {
			var pe *policy.ParseError
			if !errors.As(err, &pe) || !errors.Is(err, policy.ErrInvalidPolicy) {
				t.Fatalf("error %v (%T) is not a *ParseError", err, err)
			}
			lines := bytes.Count(src, []byte("\n")) + 1
			if pe.File != "fuzz.cedar" || pe.Line < 1 || pe.Line > lines || pe.Column < 1 || pe.Msg == "" {
				t.Fatalf("bad ParseError %+v for %d lines", pe, lines)
			}
			return
		}
		for _, r := range probes {
			d := e.Decide(t.Context(), r)
			checkHostInvariants(t, r, d)
			x := e.Explain(r)
			if !strings.Contains(x, "decision: "+strings.ToUpper(d.Effect.String())) {
				t.Fatalf("Explain does not state %s:\n%s", d.Effect, x)
			}
		}
	})
}

// FuzzHostRules is the property that no policy text and no request can get
// past the host rules: a path outside /sandbox/ (or not clean), CRITICAL
// risk, or rollback unsupported is always denied, a repeat after a
// rollback is never simply permitted, and HIGH or CRITICAL always asks for
// the sandbox. When the fuzzed text does not parse, a policy that permits
// everything is used.
func FuzzHostRules(f *testing.F) {
	f.Add(`permit (principal, action, resource);`, "WRITE_FILE", "/sandbox/../etc/passwd", "", uint8(1), "MEDIUM", int64(1), true, false, false)
	f.Add(`permit (principal, action, resource);`, "rename_file", "/sandbox/a.md", "/tmp/a.md", uint8(2), "high", int64(0), true, true, false)
	f.Add(`permit (principal, action, resource);`, "DELETE_FILE", "/sandbox/a.md", "", uint8(1), "CRITICAL", int64(0), true, false, false)
	f.Add(`permit (principal, action, resource);`, "WRITE_FILE", "/sandbox/a.md", "", uint8(1), "LOW", int64(0), false, false, true)
	f.Add(`permit (principal, action, resource) when { resource in Path::"/" };`, "MULTI_STEP_COMPOSITE", "/sandbox/", "/sandbox", uint8(2), "LOW", int64(5), true, false, false)
	f.Add(`permit (principal in Role::"operator", action, resource);`, "LIST_FILES", "/sandbox//x", "", uint8(1), "LOW", int64(0), true, true, false)
	f.Fuzz(func(t *testing.T, src, action, p1, p2 string, n uint8, risk string, size int64, rollback, operator, cooldown bool) {
		e, err := policy.Parse("fuzz.cedar", []byte(src))
		if err != nil {
			if e, err = policy.Parse("permissive.cedar", []byte(`permit (principal, action, resource);`)); err != nil {
				t.Fatal(err)
			}
		}
		r := policy.Request{Principal: "bc1pfuzz", Operator: operator, Action: action, Paths: []string{p1, p2}[:n%3],
			Risk: risk, Size: size, RollbackSupported: rollback, RecentlyRolledBack: cooldown}
		checkHostInvariants(t, r, e.Decide(t.Context(), r))
	})
}

// checkHostInvariants checks a decision against the host rules with an
// oracle of its own (path.Clean), not the engine's code.
func checkHostInvariants(t *testing.T, r policy.Request, d policy.Decision) {
	t.Helper()
	if slices.Contains(d.DecidedBy, policy.RuleEvaluation) {
		t.Fatalf("evaluation failed: %q", d.Reasons)
	}
	if len(d.Reasons) == 0 || len(d.DecidedBy) == 0 {
		t.Fatalf("decision without reasons: %+v", d)
	}
	risk := strings.ToUpper(r.Risk)
	if (risk == "HIGH" || risk == "CRITICAL") && !d.Sandbox {
		t.Fatalf("%s risk without the sandbox flag: %+v", risk, d)
	}
	if d.Effect == policy.Deny {
		for _, p := range r.Paths {
			if escapes(p) && !slices.Contains(d.DecidedBy, policy.RuleSandboxOnly) {
				t.Fatalf("%q escapes but %s is not named: %+v", p, policy.RuleSandboxOnly, d)
			}
		}
		return
	}
	for _, p := range r.Paths {
		if escapes(p) {
			t.Fatalf("%s of %q (outside /sandbox/): %+v", d.Effect, p, d)
		}
	}
	switch {
	case risk == "CRITICAL":
		t.Fatalf("CRITICAL risk got %s: %+v", d.Effect, d)
	case !r.RollbackSupported:
		t.Fatalf("rollback unsupported got %s: %+v", d.Effect, d)
	case r.RecentlyRolledBack && d.Effect == policy.Permit:
		t.Fatalf("a repeat after a rollback got permit: %+v", d)
	}
}

// escapes is true for a path that is not, as written, a clean path inside
// /sandbox/ (a trailing slash allowed).
func escapes(p string) bool {
	c := path.Clean(p)
	if c != "/sandbox" && !strings.HasPrefix(c, "/sandbox/") {
		return true
	}
	return !strings.HasPrefix(p, "/sandbox/") || (p != c && p != c+"/")
}
