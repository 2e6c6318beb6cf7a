package policy_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor/policy"
)

// evalErrorPolicy has policies whose conditions fail to evaluate (a Long
// overflow) for a write of more than about 9.2 MB: the size, and so the
// failure, is the proposer's to choose.
const evalErrorPolicy = `
@id("writes") permit (principal, action in Action::"write", resource);
@id("big-writes") @confirm("a large write")
permit (principal, action in Action::"write", resource) when { context.size * 1000000000000 > 1000000000000000 };
@id("no-huge") forbid (principal, action == Action::"CREATE_DIRECTORY", resource) when { context.size * 1000000000000 > 0 };
`

// TestEvaluationErrorFailsClosed: a policy whose condition fails to
// evaluate never makes a decision less careful than the policy meant. A
// forbid that fails denies. A @confirm permit that fails grants nothing,
// and its confirmation still applies to what other permits grant: before,
// the plain permit "writes" alone decided and the write was promoted
// without the confirmation "big-writes" asks for, the proposer choosing a
// size that makes that policy fail.
func TestEvaluationErrorFailsClosed(t *testing.T) {
	e, err := policy.Parse("evalerror.cedar", []byte(evalErrorPolicy))
	if err != nil {
		t.Fatal(err)
	}
	overflow := int64(10_000_000) // × 10¹² is beyond a Long
	req := writeReq
	req.Paths = []string{"/sandbox/a.md"}

	req.Size = 2000 // the confirm permit holds, without error
	if d := e.Decide(t.Context(), req); d.Effect != policy.Confirm || !slices.Contains(d.DecidedBy, "big-writes") {
		t.Errorf("size %d: %+v, want Confirm by big-writes", req.Size, d)
	}
	req.Size = 10 // neither holds: the plain permit grants
	if d := e.Decide(t.Context(), req); d.Effect != policy.Permit {
		t.Errorf("size %d: %+v, want Permit", req.Size, d)
	}
	req.Size = overflow
	d := e.Decide(t.Context(), req)
	if d.Effect != policy.Confirm || !slices.Contains(d.DecidedBy, "big-writes") ||
		!slices.ContainsFunc(d.Reasons, func(r string) bool { return strings.Contains(r, "big-writes") && strings.Contains(r, "failed") }) {
		t.Errorf("size %d (big-writes fails): %+v, want Confirm naming the failing big-writes", req.Size, d)
	}

	mk := req
	mk.Action = policy.ActionCreateDirectory
	if d := e.Decide(t.Context(), mk); d.Effect != policy.Deny || !slices.Contains(d.DecidedBy, "no-huge") {
		t.Errorf("failing forbid: %+v, want Deny by no-huge", d)
	}
}
