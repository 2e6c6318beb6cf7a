package executor_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/internal/testdb"
)

// cooldownCase is one row of testdata/cooldown.json: after the agent's
// action First (default: a write of /sandbox/x.md) is promoted and rolled
// back, Requester sends Action AfterMinutes later (the cooldown is 10
// minutes); the outcome it gets, and whether the cooldown is among the
// reasons.
type cooldownCase struct {
	Name  string `json:"name"`
	First *struct {
		Action string            `json:"action"`
		Args   map[string]string `json:"args"`
	} `json:"first"`
	Requester    string            `json:"requester"`
	AfterMinutes int               `json:"after_minutes"`
	Action       string            `json:"action"`
	Args         map[string]string `json:"args"`
	Want         executor.Outcome  `json:"want"`
	Cooldown     bool              `json:"cooldown"`
}

// TestRollbackCooldown: the cooldown after a rollback is kept for the
// paths the rollback restored, not for the requester: any identity's
// action that changes one of them within the cooldown needs
// confirmation; other paths, reads, and the same paths after the cooldown
// do not.
func TestRollbackCooldown(t *testing.T) {
	var cases []cooldownCase
	readTable(t, "cooldown.json", &cases)
	identities := map[string]string{"agent": agent, "other": other, "operator": operator}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, dsn string) {
				v := newEnv(t, dsn)
				ctx := context.Background()
				v.file("x.md", "original\n")
				v.file("a.txt", "a\n")
				first := prop("WRITE_FILE", map[string]string{"path": "/sandbox/x.md", "content": "agent's\n"})
				if c.First != nil {
					first = prop(c.First.Action, c.First.Args)
				}
				res := v.run(agent, first)
				if res.Outcome == executor.NeedsConfirmation {
					var err error
					if res, err = v.ex.Approve(ctx, res.ActionID, operator); err != nil {
						t.Fatal(err)
					}
				}
				wantOutcome(t, res, executor.Completed)
				if err := v.ex.Rollback(ctx, res.ActionID); err != nil {
					t.Fatal(err)
				}

				v.clock.Advance(time.Duration(c.AfterMinutes) * time.Minute)
				who, ok := identities[c.Requester]
				if !ok {
					t.Fatalf("unknown requester %q", c.Requester)
				}
				got := v.run(who, prop(c.Action, c.Args))
				wantOutcome(t, got, c.Want)
				if has := strings.Contains(got.Reason, policy.RuleRollbackCooldown); has != c.Cooldown {
					t.Errorf("reason %q: mentions the cooldown %v, want %v", got.Reason, has, c.Cooldown)
				}
				v.verify()
			})
		})
	}
}
