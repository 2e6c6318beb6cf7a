package policy

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

// check is the outcome of one host rule on one request.
type check struct {
	rule   string // one of the Rule constants
	effect Effect // Deny, Confirm, or Permit for "passed"
	flag   bool   // a note that does not change the effect (sandbox)
	reason string // why, in words
}

// hostChecks runs every host rule on a normalised request, in the order
// they are documented, and returns each outcome (passed ones included, for
// Explain). The request is denied if any outcome is a Deny.
func hostChecks(r Request) []check {
	var cs []check
	add := func(rule string, e Effect, reason string) {
		cs = append(cs, check{rule: rule, effect: e, reason: reason})
	}

	// Well-formed: something the rest can judge.
	var bad []string
	if r.Principal == "" {
		bad = append(bad, "no principal")
	}
	want, known := knownAction(r.Action)
	switch {
	case !known:
		bad = append(bad, fmt.Sprintf("unknown action %q", r.Action))
	case want >= 0 && len(r.Paths) != want:
		bad = append(bad, fmt.Sprintf("%s takes %d path(s), got %d", r.Action, want, len(r.Paths)))
	}
	if riskRank(r.Risk) == 0 {
		bad = append(bad, fmt.Sprintf("unknown risk level %q", r.Risk))
	}
	for _, p := range r.Paths {
		if len(p) > MaxPathLen {
			bad = append(bad, fmt.Sprintf("a path of %d bytes (at most %d)", len(p), MaxPathLen))
			break
		}
	}
	if r.Size < 0 {
		bad = append(bad, fmt.Sprintf("negative size %d", r.Size))
	}
	if len(bad) > 0 {
		add(RuleWellFormed, Deny, "malformed request: "+strings.Join(bad, "; "))
	} else {
		add(RuleWellFormed, Permit, "request is well formed")
	}

	// Sandbox only.
	var outside []string
	for _, p := range r.Paths {
		if !inSandbox(p) {
			outside = append(outside, fmt.Sprintf("%q", p))
		}
	}
	if len(outside) > 0 {
		add(RuleSandboxOnly, Deny, "outside "+SandboxRoot+": "+strings.Join(outside, ", "))
	} else {
		add(RuleSandboxOnly, Permit, "every path is inside "+SandboxRoot)
	}

	if r.RollbackSupported {
		add(RuleRollbackRequired, Permit, "rollback is supported")
	} else {
		add(RuleRollbackRequired, Deny, "rollback is not supported: the action is blocked")
	}

	if r.Risk == RiskCritical {
		add(RuleCriticalBlocked, Deny, "CRITICAL risk is blocked")
	} else {
		add(RuleCriticalBlocked, Permit, "risk is not CRITICAL")
	}

	if riskRank(r.Risk) >= riskRank(RiskHigh) {
		cs = append(cs, check{rule: RuleHighRiskSandbox, effect: Permit, flag: true,
			reason: r.Risk + " risk: must run in the sandbox"})
	} else {
		add(RuleHighRiskSandbox, Permit, "risk below HIGH: sandbox not mandatory")
	}

	if r.RecentlyRolledBack {
		add(RuleRollbackCooldown, Confirm, "repeated within the cooldown after a rollback: confirmation required")
	} else {
		add(RuleRollbackCooldown, Permit, "not a repeat after a rollback")
	}
	return cs
}

// inSandbox reports whether p is a clean path inside the workspace:
// "/sandbox/" itself or "/sandbox/" followed by non-empty segments other
// than "." and "..", separated by single slashes, with at most one trailing
// slash (a directory), in valid UTF-8 without control characters. It is a
// check on the text only; the sandbox resolves the path through os.Root.
func inSandbox(p string) bool {
	rest, ok := strings.CutPrefix(p, SandboxRoot)
	if !ok || !utf8.ValidString(p) {
		return false
	}
	for _, c := range p {
		if c < 0x20 || c == 0x7f || (c >= 0x80 && c < 0xa0) {
			return false
		}
	}
	if rest == "" {
		return true // the workspace root
	}
	if r, dir := strings.CutSuffix(rest, "/"); dir {
		if r == "" {
			return false // "/sandbox//"
		}
		rest = r
	}
	for seg := range strings.SplitSeq(rest, "/") {
		if seg == "" || seg == "." || seg == ".." {
			return false
		}
	}
	return true
}
