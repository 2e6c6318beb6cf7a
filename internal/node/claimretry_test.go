package node_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// A message/send whose write (the task with its replay record) fails for
// a passing cause — the database busy, a connection lost before the
// commit — is answered 5001 and leaves its id unspent: the requester's
// retry of the same message, as SNAP's 5001 asks, is processed once the
// database is back, and a retry after that is the duplicate. Before, the
// server wrote the record after the failed write, as for a refusal, and
// the retry was refused 2006 for the replay window though the message
// was never processed.
func TestTransientFailureLeavesIDUnspent(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		n := startNodeWith(t, func(c *config.Config) { c.HTTPListen = "127.0.0.1:0"; c.Database = dsn })
		k, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		from := k.Address(identity.Mainnet)
		b, err := json.Marshal(text("transient"))
		if err != nil {
			t.Fatal(err)
		}
		raw := signed(t, &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, From: from, To: n.Address(),
			Type: snap.TypeRequest, Method: "message/send", Payload: b, Timestamp: time.Now().Unix()}, k)

		// Every insert of a task fails, and its transaction with it.
		ctx := context.Background()
		fail, heal := `CREATE TRIGGER fail_tasks BEFORE INSERT ON tasks BEGIN SELECT RAISE(ABORT, 'database is locked'); END`, `DROP TRIGGER fail_tasks`
		if n.DB.Dialect == sqldb.Postgres {
			if _, err := n.DB.W.ExecContext(ctx, `CREATE FUNCTION fail_tasks() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'connection lost'; END $$`); err != nil {
				t.Fatal(err)
			}
			fail, heal = `CREATE TRIGGER fail_tasks BEFORE INSERT ON tasks FOR EACH ROW EXECUTE FUNCTION fail_tasks()`, `DROP TRIGGER fail_tasks ON tasks`
		}
		if _, err := n.DB.W.ExecContext(ctx, fail); err != nil {
			t.Fatal(err)
		}
		if p := postSNAP(t, n, raw); errorCode(p) != snap.CodeInternal {
			t.Fatalf("the failed write answered %v; want %d", p, snap.CodeInternal)
		}
		if _, err := n.DB.W.ExecContext(ctx, heal); err != nil {
			t.Fatal(err)
		}
		first := postSNAP(t, n, raw)
		if code := errorCode(first); code != 0 || first["deduplicated"] != nil {
			t.Fatalf("the retry after 5001: %v; want the task, processed now", first)
		}
		task := taskOf(t, first).ID
		if again := postSNAP(t, n, raw); again["deduplicated"] != true || taskOf(t, again).ID != task {
			t.Fatalf("a second retry: %v; want task %s, deduplicated", again, task)
		}
		all, err := n.Tasks.List(ctx, tasks.Filter{Owner: from})
		if err != nil {
			t.Fatal(err)
		}
		if len(all) != 1 {
			t.Fatalf("%d tasks; want 1", len(all))
		}
	})
}
