package policy_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor/policy"
)

// TestOperatorGuideExamplePolicy loads the policy the operator guide
// gives as an example of one's own (docs/operator.md, "The policy") and
// checks that it does what the guide says it does, and that an agent
// working under it can end its task: a policy of one's own replaces the
// built-in one, so one that permits no FINISH leaves every agent job
// STUCK on "no policy permits FINISH".
func TestOperatorGuideExamplePolicy(t *testing.T) {
	b, err := os.ReadFile("../../docs/operator.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "```cedar\n")
	if !ok {
		t.Fatal("docs/operator.md has no cedar block")
	}
	src, _, ok := strings.Cut(rest, "```")
	if !ok {
		t.Fatal("docs/operator.md's cedar block does not end")
	}
	engine, err := policy.Parse("operator.md", []byte(src))
	if err != nil {
		t.Fatalf("the guide's example policy does not load: %v", err)
	}
	const reporter, other = "bc1p0unpqnmh5l8ywa2xe502nxmvnx67kpu78myj8pvrx98ve6sqgs9qr99mvr", "bc1pother"
	for _, c := range []struct {
		who, action, path string
		want              policy.Effect
	}{
		{reporter, policy.ActionWriteFile, "/sandbox/reports/a.md", policy.Permit},
		{reporter, policy.ActionWriteFile, "/sandbox/a.md", policy.Deny},
		{other, policy.ActionWriteFile, "/sandbox/a.md", policy.Confirm},
		{other, policy.ActionReadFile, "/sandbox/a.md", policy.Permit},
		{other, policy.ActionThink, "", policy.Permit},
		{other, policy.ActionFinish, "", policy.Permit},
		{reporter, policy.ActionFinish, "", policy.Permit},
	} {
		req := policy.Request{Principal: c.who, Action: c.action, Risk: policy.RiskLow, RollbackSupported: true}
		if c.path != "" {
			req.Paths = []string{c.path}
		}
		if c.action == policy.ActionWriteFile {
			req.Risk, req.Size = policy.RiskMedium, 5
		}
		if d := engine.Decide(context.Background(), req); d.Effect != c.want {
			t.Errorf("%s %s %s: %s by %v, want %s", c.who, c.action, c.path, d.Effect, d.DecidedBy, c.want)
		}
	}
}
