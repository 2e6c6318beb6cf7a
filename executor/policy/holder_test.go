package policy_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/snapnode/snapnode/executor/policy"
)

var writeReq = policy.Request{Principal: "bc1pagent", Action: policy.ActionWriteFile,
	Paths: []string{"/sandbox/a.md"}, Risk: policy.RiskMedium, Size: 3, RollbackSupported: true}

func TestHolderReload(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "policy.cedar")
	write := func(s string) {
		t.Helper()
		if err := os.WriteFile(file, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(`@id("w") permit (principal, action == Action::"WRITE_FILE", resource);`)
	h := policy.NewHolder(policy.Default())
	first, err := h.Reload(file)
	if err != nil {
		t.Fatal(err)
	}
	if d := h.Decide(t.Context(), writeReq); d.Effect != policy.Permit || d.PolicyVersion != first.Version() {
		t.Fatalf("after the first load: %+v", d)
	}

	write(`permit (principal, action == Action::"WRITE_FILE" resource);`) // broken
	if _, err := h.Reload(file); !errors.Is(err, policy.ErrInvalidPolicy) {
		t.Fatalf("reload of a broken file: %v", err)
	}
	if h.Engine() != first {
		t.Fatal("a failed reload replaced the engine in force")
	}

	write(`@id("no") forbid (principal, action, resource);`)
	second, err := h.Reload(file)
	if err != nil {
		t.Fatal(err)
	}
	d := h.Decide(t.Context(), writeReq)
	if d.Effect != policy.Deny || !slices.Equal(d.DecidedBy, []string{"no"}) || d.PolicyVersion != second.Version() {
		t.Fatalf("after the second load: %+v", d)
	}
	if second.Version() == first.Version() {
		t.Fatal("two texts, one version")
	}
}

func TestHolderSwap(t *testing.T) {
	var h policy.Holder
	if d := h.Decide(t.Context(), writeReq); d.Effect != policy.Deny || !slices.Equal(d.DecidedBy, []string{policy.RuleEvaluation}) {
		t.Fatalf("an empty holder decided %+v", d)
	}
	a := policy.Default()
	if old := h.Swap(a); old != nil {
		t.Fatalf("Swap on an empty holder returned %p", old)
	}
	if old := h.Swap(nil); old != nil || h.Engine() != a {
		t.Fatal("Swap(nil) changed the holder")
	}
	b, err := policy.Parse("b.cedar", nil)
	if err != nil {
		t.Fatal(err)
	}
	if old := h.Swap(b); old != a || h.Engine() != b {
		t.Fatal("Swap did not return the engine it replaced")
	}
}

// TestConcurrentDecide judges from many goroutines while the policy is
// swapped; run with -race. Each decision must be one of the two policies'
// whole answers, never a mix.
func TestConcurrentDecide(t *testing.T) {
	permit := policy.Default()
	deny, err := policy.Parse("deny.cedar", []byte(`@id("no") forbid (principal, action, resource);`))
	if err != nil {
		t.Fatal(err)
	}
	h := policy.NewHolder(permit)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 300 {
				if g == 0 && i%10 == 0 {
					if i%20 == 0 {
						h.Swap(deny)
					} else {
						h.Swap(permit)
					}
				}
				d := h.Decide(context.Background(), writeReq)
				switch {
				case d.Effect == policy.Permit && d.PolicyVersion == permit.Version() && slices.Equal(d.DecidedBy, []string{"write"}):
				case d.Effect == policy.Deny && d.PolicyVersion == deny.Version() && slices.Equal(d.DecidedBy, []string{"no"}):
				default:
					errs <- errors.New("mixed decision: " + d.Effect.String() + " " + d.PolicyVersion)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestDecideFailsClosed(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e := policy.Default()
	d := e.Decide(ctx, writeReq)
	if d.Effect != policy.Deny || !slices.Equal(d.DecidedBy, []string{policy.RuleEvaluation}) || d.PolicyVersion != e.Version() {
		t.Errorf("done context: %+v", d)
	}
	var nilEngine *policy.Engine
	if d := nilEngine.Decide(t.Context(), writeReq); d.Effect != policy.Deny {
		t.Errorf("nil engine: %+v", d)
	}
}

func TestCombine(t *testing.T) {
	permit := policy.Decision{Effect: policy.Permit, Reasons: []string{"p"}, DecidedBy: []string{"write"}, PolicyVersion: "v"}
	confirm := policy.Decision{Effect: policy.Confirm, Reasons: []string{"c"}, DecidedBy: []string{"destructive", policy.RuleHighRiskSandbox}, Sandbox: true, PolicyVersion: "v"}
	deny := policy.Decision{Effect: policy.Deny, Reasons: []string{"d"}, DecidedBy: []string{policy.DenyByDefault}, PolicyVersion: "v"}
	for _, tc := range []struct {
		name string
		in   []policy.Decision
		want policy.Decision
	}{
		{"all permit", []policy.Decision{permit, permit}, permit},
		{"confirm wins over permit", []policy.Decision{permit, confirm, permit}, confirm},
		{"deny wins", []policy.Decision{confirm, deny, permit},
			policy.Decision{Effect: policy.Deny, Reasons: []string{"d"}, DecidedBy: []string{policy.DenyByDefault}, Sandbox: true, PolicyVersion: "v"}},
		{"nothing", nil, policy.Decision{Effect: policy.Deny, Reasons: []string{"nothing to decide"}, DecidedBy: []string{policy.RuleWellFormed}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := policy.Combine(tc.in...)
			if got.Effect != tc.want.Effect || !slices.Equal(got.Reasons, tc.want.Reasons) ||
				!slices.Equal(got.DecidedBy, tc.want.DecidedBy) || got.Sandbox != tc.want.Sandbox || got.PolicyVersion != tc.want.PolicyVersion {
				t.Errorf("Combine = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestRequestNotModified checks that Decide leaves the caller's request
// alone (it upper-cases a copy).
func TestRequestNotModified(t *testing.T) {
	r := writeReq
	r.Action, r.Risk = "write_file", "medium"
	r.Paths = []string{"/sandbox/a.md"}
	d := policy.Default().Decide(t.Context(), r)
	if d.Effect != policy.Permit {
		t.Fatalf("lower-case request: %+v", d)
	}
	if r.Action != "write_file" || r.Risk != "medium" || r.Paths[0] != "/sandbox/a.md" {
		t.Fatalf("request changed: %+v", r)
	}
}

// TestDeepPath judges paths near the length limit against policies whose
// `in` holds and fails (a failing `in` walks the whole hierarchy), and one
// byte over the limit.
func TestDeepPath(t *testing.T) {
	deep := "/sandbox" + strings.Repeat("/a", (policy.MaxPathLen-len("/sandbox/x.md"))/2) + "/x.md"
	if len(deep) > policy.MaxPathLen {
		t.Fatalf("test path of %d bytes", len(deep))
	}
	e, err := policy.Parse("deep.cedar", []byte(`
@id("a") permit (principal, action, resource in Path::"/sandbox/a/a/a/");
@id("b") forbid (principal, action, resource in Path::"/sandbox/b/");
@id("c") forbid (principal, action, resource in Path::"/sandbox/a/b/");`))
	if err != nil {
		t.Fatal(err)
	}
	r := writeReq
	r.Paths = []string{deep}
	if d := e.Decide(t.Context(), r); d.Effect != policy.Permit || !slices.Equal(d.DecidedBy, []string{"a"}) {
		t.Errorf("deep path: %+v", d)
	}
	r.Paths = []string{deep[:len(deep)-len("/x.md")] + "/b/x.md"}
	if d := e.Decide(t.Context(), r); d.Effect != policy.Deny || !slices.Equal(d.DecidedBy, []string{policy.RuleWellFormed}) {
		t.Errorf("one byte over the limit: %+v", d)
	}
	r.Paths = []string{"/sandbox/a/b" + strings.Repeat("/b", 2000)}
	if d := e.Decide(t.Context(), r); d.Effect != policy.Deny || !slices.Equal(d.DecidedBy, []string{"c"}) {
		t.Errorf("deep forbidden path: %+v", d)
	}
}

// Set puts a policy and its operators in force in one step; Swap and
// Reload change the policy alone, keeping the operators in force.
func TestHolderSetKeepsPolicyAndOperatorsTogether(t *testing.T) {
	const alice, bob = "bc1palice", "bc1pbob"
	var h policy.Holder
	if f := h.InForce(); f.Engine != nil || f.IsOperator(alice) {
		t.Fatalf("an empty holder holds %+v", f)
	}
	a := policy.Default()
	if old := h.Set(policy.InForce{Engine: a, Operator: policy.Operators([]string{alice})}); old.Engine != nil {
		t.Fatalf("Set on an empty holder returned %+v", old)
	}
	if old := h.Set(policy.InForce{Operator: policy.Operators([]string{bob})}); old.Engine != nil || h.Engine() != a || !h.InForce().IsOperator(alice) {
		t.Fatal("Set with no engine changed the holder")
	}
	b, err := policy.Parse("b.cedar", nil)
	if err != nil {
		t.Fatal(err)
	}
	if old := h.Swap(b); old != a {
		t.Fatal("Swap did not return the engine it replaced")
	}
	if f := h.InForce(); f.Engine != b || !f.IsOperator(alice) || f.IsOperator(bob) {
		t.Fatal("Swap did not keep the operators in force")
	}
	old := h.Set(policy.InForce{Engine: a, Operator: policy.Operators([]string{bob})})
	if old.Engine != b || !old.IsOperator(alice) {
		t.Fatalf("Set did not return what it replaced: %+v", old)
	}
	if f := h.InForce(); f.Engine != a || f.IsOperator(alice) || !f.IsOperator(bob) {
		t.Fatal("Set did not put the policy and the operators in force")
	}
}
