package node_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/sqldb"
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
				proposer, err := identity.Generate()
				if err != nil {
					t.Fatal(err)
				}
				op, err := identity.Generate()
				if err != nil {
					t.Fatal(err)
				}
				dataDir := filepath.Join(t.TempDir(), "data")
				n := startNodeWith(t, func(c *config.Config) {
					c.HTTPListen, c.Database, c.DataDir = "127.0.0.1:0", dsn, dataDir
					c.Operators = []string{op.Address(identity.Mainnet)}
				})
				send := func(k *identity.Key, payload any) []byte {
					b, err := json.Marshal(payload)
					if err != nil {
						t.Fatal(err)
					}
					return signed(t, &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, From: k.Address(identity.Mainnet), To: n.Address(),
						Type: snap.TypeRequest, Method: "message/send", Payload: b, Timestamp: time.Now().Unix()}, k)
				}
				if w := taskOf(t, postSNAP(t, n, send(proposer, proposal("WRITE_FILE", map[string]any{"path": "/sandbox/a.txt", "content": "x\n"})))); w.Status.State != "completed" {
					t.Fatalf("write: %s %q", w.Status.State, w.Status.Message)
				}
				held := taskOf(t, postSNAP(t, n, send(proposer, proposal("DELETE_FILE", map[string]any{"path": "/sandbox/a.txt"}))))
				if held.Status.State != "input_required" {
					t.Fatalf("delete: %s %q", held.Status.State, held.Status.Message)
				}
				raw := send(op, decisionMsg(held.ID, map[string]any{"decision": name}))

				ctx := context.Background()
				fail, heal := `CREATE TRIGGER fail_audit BEFORE INSERT ON audit_log BEGIN SELECT RAISE(ABORT, 'database is locked'); END`, `DROP TRIGGER fail_audit`
				if n.DB.Dialect == sqldb.Postgres {
					if _, err := n.DB.W.ExecContext(ctx, `CREATE FUNCTION fail_audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'connection lost'; END $$`); err != nil {
						t.Fatal(err)
					}
					fail, heal = `CREATE TRIGGER fail_audit BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION fail_audit()`, `DROP TRIGGER fail_audit ON audit_log`
				}
				if _, err := n.DB.W.ExecContext(ctx, fail); err != nil {
					t.Fatal(err)
				}
				if p := postSNAP(t, n, raw); errorCode(p) != snap.CodeInternal {
					t.Fatalf("the failed decision answered %v; want %d", p, snap.CodeInternal)
				}
				if _, err := n.DB.W.ExecContext(ctx, heal); err != nil {
					t.Fatal(err)
				}
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
				_, err = os.Stat(filepath.Join(dataDir, "sandbox", "a.txt"))
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
