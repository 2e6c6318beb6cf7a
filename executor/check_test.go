package executor_test

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/internal/testdb"
)

// TestCheckAgreesWithRun judges every proposal of testdata/seeds offline
// with Check and then runs it, under several policies and for a plain
// agent and an operator: Check's verdict must be what Run does — the same
// refusal, the same policy error, confirmation exactly when Run holds the
// action, and a Permit never held or refused by the policy.
func TestCheckAgreesWithRun(t *testing.T) {
	files, err := filepath.Glob("testdata/seeds/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no proposals in testdata/seeds: %v", err)
	}
	policies := map[string]*policy.Engine{"default": policy.Default()}
	for _, name := range []string{"read-only", "operator", "confirm"} {
		e, err := policy.Load(filepath.Join("policy", "testdata", "policies", name+".cedar"))
		if err != nil {
			t.Fatal(err)
		}
		policies[name] = e
	}
	seen := map[policy.Effect]bool{}
	refusals := 0
	for pname, pol := range policies {
		for _, who := range []string{agent, operator} {
			for _, f := range files {
				data, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				name := pname + "/" + who[:8] + "/" + filepath.Base(f)
				t.Run(name, func(t *testing.T) {
					v, err := executor.Check(pol, proposal.NewDefaults(), who, who == operator, data)
					if err != nil {
						t.Fatal(err)
					}
					env := newEnv(t, testdb.SQLite(t))
					env.holder.Swap(pol)
					env.file("a.txt", "a note\n")
					if !bytes.Contains(data, []byte("CREATE_DIRECTORY")) {
						env.file("notes/log.txt", "a log\n")
					}
					res, err := env.ex.Run(context.Background(), executor.Request{TaskID: "task-1", Requester: who, Data: data})
					if err != nil {
						t.Fatal(err)
					}
					switch {
					case v.Refusal != nil:
						refusals++
						want, _ := json.Marshal(v.Refusal)
						if res.Outcome != executor.Failed || !bytes.Equal(res.Output, want) {
							t.Fatalf("Check refused with %s; Run: %s %s", want, res.Outcome, res.Output)
						}
					case v.Decision.Effect == policy.Confirm:
						if res.Outcome != executor.NeedsConfirmation {
							t.Fatalf("Check says confirm (%v); Run: %s %s", v.Decision.Reasons, res.Outcome, res.Output)
						}
					case v.Decision.Effect == policy.Deny:
						if res.Outcome != executor.Failed || !strings.Contains(string(res.Output), policyRefusal) {
							t.Fatalf("Check says deny (%v); Run: %s %s", v.Decision.Reasons, res.Outcome, res.Output)
						}
					default:
						if res.Outcome == executor.NeedsConfirmation || strings.Contains(string(res.Output), policyRefusal) {
							t.Fatalf("Check says permit; Run: %s %s", res.Outcome, res.Output)
						}
					}
					if v.Refusal == nil {
						seen[v.Decision.Effect] = true
						if got := v.Explain(pol); !strings.Contains(got, "decision: "+strings.ToUpper(v.Decision.Effect.String())) || !strings.Contains(got, v.Action) {
							t.Errorf("explanation lacks the decision or the action:\n%s", got)
						}
					}
				})
			}
		}
	}
	if !seen[policy.Permit] || !seen[policy.Confirm] || !seen[policy.Deny] || refusals == 0 {
		t.Errorf("the table does not reach every verdict: %v, %d refusals", seen, refusals)
	}
}

func TestCheckRejectsBadRequester(t *testing.T) {
	if _, err := executor.Check(policy.Default(), proposal.NewDefaults(), "", false, []byte(`{}`)); err == nil {
		t.Fatal("an empty requester was accepted")
	}
}

// policyRefusal is the message of the output of an action the policy denies.
const policyRefusal = "The policy does not allow this action."
