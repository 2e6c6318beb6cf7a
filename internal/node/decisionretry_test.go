package node_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/snap"
)

// An operator's signed decision whose write fails for a passing cause
// (the database busy: here every audit entry's insert fails, and the
// decision's commit with it) is answered 5001 and leaves its id unspent:
// the operator's retry of the same message, as SNAP's 5001 asks, is
// carried out once the database is back, and a copy after that is the
// duplicate, carrying out nothing. Before, the decision's replay record
// was written before it acted, and the retry was refused 2006 though
// nothing had been decided.
func TestDecisionRetryAfterTransientFailure(t *testing.T) {
	for _, approve := range []bool{true, false} {
		name := map[bool]string{true: "approve", false: "deny"}[approve]
		t.Run(name, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, dsn string) {
				r := newHeldRig(t, dsn)
				n, held := r.n, r.held
				raw := r.send(t, r.op, decisionMsg(held.ID, map[string]any{"decision": name}))

				// Every audit entry's insert fails, and the decision's commit
				// with it.
				ctx := context.Background()
				failing(t, n, "audit_log", "INSERT", false)
				if p := postSNAP(t, n, raw); errorCode(p) != snap.CodeInternal {
					t.Fatalf("the failed decision answered %v; want %d", p, snap.CodeInternal)
				}
				healed(t, n, "audit_log", false)
				want := map[bool]string{true: "completed", false: "failed"}[approve]
				first := postSNAP(t, n, raw)
				if code := errorCode(first); code != 0 || first["deduplicated"] != nil {
					t.Fatalf("the retry after 5001: %v; want the task, decided now", first)
				}
				if got := taskOf(t, first); got.ID != held.ID || got.Status.State != want {
					t.Fatalf("the retry left task %s %s; want %s %s", got.ID, got.Status.State, held.ID, want)
				}
				if again := postSNAP(t, n, raw); again["deduplicated"] != true && errorCode(again) != snap.CodeDuplicateMessage {
					t.Fatalf("a second copy: %v; want the duplicate", again)
				}
				_, err := os.Stat(filepath.Join(r.dataDir, "sandbox", "a.txt"))
				if gone := os.IsNotExist(err); gone != approve {
					t.Fatalf("the file gone: %v (%v); want %v", gone, err, approve)
				}
				var decided int
				if err := n.DB.R.QueryRowContext(ctx, n.DB.Dialect.Rebind(`SELECT COUNT(*) FROM audit_log WHERE step IN ('confirmed', 'denied')`)).Scan(&decided); err != nil {
					t.Fatal(err)
				}
				if decided != 1 {
					t.Fatalf("%d decisions audited; want 1", decided)
				}
			})
		})
	}
}

// An operator's signed approval whose first commit stood (the decision
// recorded, its replay record with it, the file deleted) and whose last
// commit then fails for a passing cause (here the audit entry of the
// promotion) is not answered 5001: its id is spent, and the retry SNAP
// asks for would be refused as a duplicate while the operator was told
// nothing was done. It is answered with the task as it stands, and the
// node's recovery settles the action it left promoting (its promotion
// undone, the action failed), as after a stop.
func TestApprovalFailingAfterItsFirstCommit(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newHeldRig(t, dsn)
		n, held := r.n, r.held
		raw := r.send(t, r.op, decisionMsg(held.ID, map[string]any{"decision": "approve"}))

		failingWhen(t, n, "audit_log", "INSERT", "NEW.step = 'promoted'")
		p := postSNAP(t, n, raw)
		healed(t, n, "audit_log", false)
		if code := errorCode(p); code != 0 {
			t.Fatalf("the approval failing after its first commit answered %v; want the task", p)
		}
		if got := taskOf(t, p); got.ID != held.ID || got.Status.State != "input_required" {
			t.Fatalf("answered task %s %s; want %s as it stands, input_required", got.ID, got.Status.State, held.ID)
		}
		if again := postSNAP(t, n, raw); again["deduplicated"] != true && errorCode(again) != snap.CodeDuplicateMessage {
			t.Fatalf("a copy: %v; want the duplicate", again)
		}
	})
}
