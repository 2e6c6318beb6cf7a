package executor

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/proposal"
)

// A composite is judged by one policy, the one in force when its judging
// began, even while a reload swaps the policy: each of two policies here
// permits one of its steps and not the other, so neither permits the
// whole, and no judging may find it permitted. Before, each request of
// the composite loaded the policy in force anew, and a swap between two
// of them permitted a composite that neither policy permits, recorded
// under the first's version.
func TestJudgeOnePolicyWhileSwapped(t *testing.T) {
	only := func(dir string) *policy.Engine {
		t.Helper()
		e, err := policy.Parse(dir+".cedar", []byte(`@id("composite")
permit (principal, action == Action::"`+policy.ActionComposite+`", resource);
@id("`+dir+`")
permit (principal, action in Action::"write", resource in Path::"/sandbox/`+dir+`/");
`))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	pa, pb := only("a"), only("b")
	defaults := proposal.NewDefaults()
	var children []*proposal.Descriptor
	for _, path := range []string{"/sandbox/a/x.txt", "/sandbox/b/y.txt"} {
		b, _ := json.Marshal(map[string]any{"schema_version": "1.0.0", "id": "6a1f0c3e-2b4d-4e5f-8a9b-0c1d2e3f4a5b",
			"reasoning": "a test proposal", "action": "WRITE_FILE", "args": map[string]string{"path": path, "content": "x"}})
		p, err := proposal.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		children = append(children, proposal.Describe(p, defaults))
	}
	c, err := proposal.Compose(children, defaults)
	if err != nil {
		t.Fatal(err)
	}
	data, err := jsonv2.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	const requester = "bc1p5d7rjq7g6rdk2yhzks9smlaqtedr4dekq08ge8ztwac72sfr9rusxg3297"
	for _, pol := range []*policy.Engine{pa, pb} {
		if v, err := Check(pol, defaults, requester, false, data); err != nil || v.Refusal != nil || v.Decision.Effect == policy.Permit {
			t.Fatalf("under %s alone: %+v %v", pol.Name(), v, err)
		}
	}

	holder := policy.NewHolder(pa)
	e := &Executor{policy: holder, defaults: defaults,
		levels: DefaultAuditLevels(), cpu: threadCPU, now: time.Now}
	it, err := e.parse(data, "00000000-0000-4000-8000-000000000000")
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			holder.Swap([]*policy.Engine{pa, pb}[i%2])
		}
	})
	defer wg.Wait()
	defer close(stop)
	for i := range 20000 {
		if d, _ := e.judge(context.Background(), it, requester, false); d.Effect == policy.Permit {
			t.Fatalf("judging %d permitted the composite that neither policy permits (version %s): %+v", i, d.PolicyVersion, d)
		}
	}
}

// A request is judged by the operators and the policy in force together,
// even when a reload sets both while it is judged: the old policy permits
// the operators everything; the new one makes bob an operator and forbids
// him everything. Neither permits bob, and no judging may find him
// permitted by the new operators under the old policy. Here the reload
// back to the old two lands while the new operators are asked about bob,
// between the reading of the operators and that of the policy were they
// read apart.
func TestJudgeOperatorsWithTheirPolicyWhileSet(t *testing.T) {
	const (
		alice = "bc1p5d7rjq7g6rdk2yhzks9smlaqtedr4dekq08ge8ztwac72sfr9rusxg3297"
		bob   = "bc1ps8wkka66lnxtdkac5fd9365ygfcmhmawaf7trkguz6raw3g0s5xqm72e9v"
	)
	parse := func(name, src string) *policy.Engine {
		t.Helper()
		e, err := policy.Parse(name, []byte(src))
		if err != nil {
			t.Fatal(err)
		}
		return e
	}
	operatorsOnly := `permit (principal in Role::"operator", action, resource);` + "\n"
	holder := &policy.Holder{}
	before := policy.InForce{Engine: parse("old.cedar", operatorsOnly), Operator: policy.Operators([]string{alice})}
	newOperators := policy.Operators([]string{alice, bob})
	after := policy.InForce{Engine: parse("new.cedar", operatorsOnly+`forbid (principal == Agent::"`+bob+`", action, resource);`),
		Operator: func(addr string) bool {
			holder.Set(before) // a reload, while the new operators are asked
			return newOperators(addr)
		}}
	data := []byte(`{"schema_version":"1.0.0","id":"6a1f0c3e-2b4d-4e5f-8a9b-0c1d2e3f4a5b","reasoning":"r","action":"LIST_FILES","args":{"path":"/sandbox/"}}`)
	e := &Executor{policy: holder, defaults: proposal.NewDefaults(), levels: DefaultAuditLevels(), cpu: threadCPU, now: time.Now}
	it, err := e.parse(data, "00000000-0000-4000-8000-000000000000")
	if err != nil {
		t.Fatal(err)
	}

	holder.Set(before)
	if d, operator := e.judge(context.Background(), it, alice, false); d.Effect != policy.Permit || !operator {
		t.Fatalf("alice, an operator: %+v (operator %t)", d, operator)
	}
	if d, operator := e.judge(context.Background(), it, bob, false); d.Effect != policy.Deny || operator {
		t.Fatalf("bob, no operator, under the old policy: %+v (operator %t)", d, operator)
	}
	holder.Set(after)
	d, operator := e.judge(context.Background(), it, bob, false)
	if d.Effect != policy.Deny || !operator || d.PolicyVersion != after.Engine.Version() {
		t.Fatalf("bob, an operator forbidden everything by the new policy: %v under version %s (operator %t), want a deny under the new version %s: %+v",
			d.Effect, d.PolicyVersion, operator, after.Engine.Version(), d)
	}
}
