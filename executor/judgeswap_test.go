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
	e := &Executor{policy: holder, defaults: defaults, isOperator: func(string) bool { return false },
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
		if d := e.judge(context.Background(), it, requester, false); d.Effect == policy.Permit {
			t.Fatalf("judging %d permitted the composite that neither policy permits (version %s): %+v", i, d.PolicyVersion, d)
		}
	}
}
