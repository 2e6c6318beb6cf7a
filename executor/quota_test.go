package executor_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/testdb"
)

// quotaCase is one case of testdata/quotas.json: steps run in order on a
// fresh node with the quotas, then the ledger of each requester.
type quotaCase struct {
	Name   string            `json:"name"`
	Quotas executor.Quotas   `json:"quotas"`
	Files  map[string]string `json:"files"`
	Steps  []struct {
		As     string            `json:"as"` // "agent", "other", or in another case
		Action string            `json:"action"`
		Args   map[string]string `json:"args"`
		// Confirm sends the step as a peer descriptor asking for
		// confirmation.
		Confirm bool `json:"confirm"`
		// Composite sends these steps as one composite descriptor.
		Composite []struct {
			Action string            `json:"action"`
			Args   map[string]string `json:"args"`
		} `json:"composite"`
		Rollback *int `json:"rollback"` // index of the step rolled back
		Approve  *int `json:"approve"`  // index of the step the host approves
		Want     struct {
			Outcome executor.Outcome `json:"outcome"`
			Limit   string           `json:"limit"`
			Max     int64            `json:"max"`
			Got     int64            `json:"got"`
		} `json:"want"`
	} `json:"steps"`
	Usage map[string]sandbox.Counts `json:"usage"`
}

var identities = map[string]string{"agent": agent, "AGENT": strings.ToUpper(agent), "other": other}

// TestQuotas: each requester's bytes, files and directories are counted
// at promotion and rollback, and an action that would take its requester
// past a quota fails with LIMIT_EXCEEDED naming it, at Run and at
// approval.
func TestQuotas(t *testing.T) {
	b, err := os.ReadFile("testdata/quotas.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []quotaCase
	if err := json.Unmarshal(b, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, dsn string) {
				ctx := context.Background()
				v := newEnv(t, dsn)
				v.quotas = c.Quotas
				v.reopen()
				for p, content := range c.Files {
					v.file(p, content)
				}
				ids := make([]string, len(c.Steps))
				for i, s := range c.Steps {
					var res *executor.Result
					switch {
					case s.Rollback != nil:
						if err := v.ex.Rollback(ctx, ids[*s.Rollback]); err != nil {
							t.Fatalf("step %d: %v", i, err)
						}
						continue
					case s.Approve != nil:
						if res, err = v.ex.Approve(ctx, ids[*s.Approve], executor.Host); err != nil {
							t.Fatalf("step %d: %v", i, err)
						}
					case s.Composite != nil:
						var leaves []*proposal.Descriptor
						for _, l := range s.Composite {
							leaves = append(leaves, leaf(t, l.Action, l.Args))
						}
						res = v.run(identities[s.As], composite(t, leaves...))
					case s.Confirm:
						d := leaf(t, s.Action, s.Args)
						d.Confirmation.Required, d.Confirmation.Reason = true, "check with me"
						res = v.run(identities[s.As], descriptorJSON(t, d))
					default:
						res = v.run(identities[s.As], prop(s.Action, s.Args))
					}
					ids[i] = res.ActionID
					if res.Outcome != s.Want.Outcome {
						t.Fatalf("step %d: outcome %s, want %s (output %s)", i, res.Outcome, s.Want.Outcome, res.Output)
					}
					if s.Want.Limit == "" {
						continue
					}
					var f executor.Failure
					if err := json.Unmarshal(res.Output, &f); err != nil {
						t.Fatal(err)
					}
					if f.Code != executor.CodeLimitExceeded || f.Limit != s.Want.Limit || f.Max != s.Want.Max || f.Got != s.Want.Got {
						t.Fatalf("step %d: output %s, want LIMIT_EXCEEDED %s max %d got %d", i, res.Output, s.Want.Limit, s.Want.Max, s.Want.Got)
					}
				}
				for who, want := range c.Usage {
					got, err := v.ex.Usage(ctx, identities[who])
					if err != nil {
						t.Fatal(err)
					}
					if got != want {
						t.Errorf("usage of %s = %+v, want %+v", who, got, want)
					}
				}
				v.verify()
			})
		})
	}
}

// TestQuotaConcurrent: actions of one requester staged at the same time
// cannot together pass its quota; each is checked again, one at a time,
// in the commit that records it promoting.
func TestQuotaConcurrent(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) { quotaConcurrent(t, dsn) })
}

func quotaConcurrent(t *testing.T, dsn string) {
	const n, quota = 12, 3
	v := newEnv(t, dsn)
	v.quotas = executor.Quotas{Files: quota}
	v.reopen()
	var wg sync.WaitGroup
	results := make([]*executor.Result, n)
	for i := range n {
		wg.Go(func() {
			res, err := v.ex.Run(context.Background(), executor.Request{TaskID: "task-1", Requester: agent,
				Data: prop("WRITE_FILE", map[string]string{"path": fmt.Sprintf("/sandbox/f%d.txt", i), "content": "x"})})
			if err != nil {
				t.Error(err)
			}
			results[i] = res
		})
	}
	wg.Wait()
	done := 0
	for _, r := range results {
		if r != nil && r.Outcome == executor.Completed {
			done++
		}
	}
	files := 0
	for _, k := range workspace(t, v.dir) {
		if k != "<dir>" {
			files++
		}
	}
	if done != quota || files != quota {
		t.Fatalf("%d completed, %d files in the workspace; want %d", done, files, quota)
	}
}
