package executor_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/internal/testdb"
)

// TestDescriptorCreatedAt: a peer descriptor's created_at, and each
// child's, is held to the executor's clock with the SNAP timestamp window
// (60 s by default): inside it the action runs, outside it the descriptor
// is refused naming the field, rule clockSkew.
func TestDescriptorCreatedAt(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	v.file("a.txt", "a note\n")
	now := v.clock.Now()
	read := func(at time.Time) *proposal.Descriptor {
		d := leaf(t, "READ_FILE", map[string]string{"path": "/sandbox/a.txt"})
		d.CreatedAt = at
		return d
	}
	think := leaf(t, "THINK", nil)
	for _, tc := range []struct {
		name  string
		data  []byte
		field string // "" when the action runs
	}{
		{"now", descriptorJSON(t, read(now)), ""},
		{"60 s ahead", descriptorJSON(t, read(now.Add(time.Minute))), ""},
		{"60 s behind", descriptorJSON(t, read(now.Add(-time.Minute))), ""},
		{"61 s ahead", descriptorJSON(t, read(now.Add(61*time.Second))), "/created_at"},
		{"61 s behind", descriptorJSON(t, read(now.Add(-61*time.Second))), "/created_at"},
		{"in 2099", descriptorJSON(t, read(time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC))), "/created_at"},
		{"in 1970", descriptorJSON(t, read(time.Unix(0, 0))), "/created_at"},
		{"another zone, same instant", descriptorJSON(t, read(now.In(time.FixedZone("", 5*3600)))), ""},
		{"composite in 2099", func() []byte {
			c, err := proposal.Compose([]*proposal.Descriptor{think, think}, peerDefaults())
			if err != nil {
				t.Fatal(err)
			}
			c.CreatedAt = time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
			return descriptorJSON(t, c)
		}(), "/created_at"},
		{"composite, second child in 2099", func() []byte {
			late := leaf(t, "THINK", nil)
			late.CreatedAt = time.Date(2099, 1, 1, 0, 0, 0, 0, time.UTC)
			return composite(t, think, late)
		}(), "/children/1/created_at"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := v.run(agent, tc.data)
			if tc.field == "" {
				wantOutcome(t, res, executor.Completed)
				return
			}
			wantOutcome(t, res, executor.Failed)
			var got struct {
				Code  string `json:"error_code"`
				Field string `json:"field"`
				Rule  string `json:"rule"`
			}
			if err := json.Unmarshal(res.Output, &got); err != nil || got.Code != "VALIDATION_ERROR" || got.Field != tc.field || got.Rule != "clockSkew" {
				t.Fatalf("output %s, want VALIDATION_ERROR on %s (clockSkew)", res.Output, tc.field)
			}
		})
	}
}

// TestLateApprovalOfDescriptor: created_at is checked when the descriptor
// arrives, not when an operator gets to it: a peer's DELETE_FILE held for
// confirmation is carried out when approved ten minutes later.
func TestLateApprovalOfDescriptor(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	v.file("old.txt", "old\n")
	res := v.run(agent, descriptorJSON(t, leaf(t, "DELETE_FILE", map[string]string{"path": "/sandbox/old.txt"})))
	wantOutcome(t, res, executor.NeedsConfirmation)
	v.clock.Advance(10 * time.Minute)
	got, err := v.ex.Approve(context.Background(), res.ActionID, operator)
	if err != nil {
		t.Fatal(err)
	}
	if got.Outcome != executor.Completed {
		t.Fatalf("approved ten minutes later: %s %s", got.Outcome, got.Output)
	}
	if _, err := os.Stat(filepath.Join(v.dir, "old.txt")); !os.IsNotExist(err) {
		t.Fatalf("old.txt after the approval: %v", err)
	}
}
