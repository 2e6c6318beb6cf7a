package node_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
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
		failing(t, n, "tasks", "INSERT", false)
		if p := postSNAP(t, n, raw); errorCode(p) != snap.CodeInternal {
			t.Fatalf("the failed write answered %v; want %d", p, snap.CodeInternal)
		}
		healed(t, n, "tasks", false)
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

// The other methods that may fail for a passing cause leave their ids
// unspent as message/send does: a message/stream whose task's insert
// fails, a tasks/cancel whose write fails, a tasks/get whose read fails,
// each answered 5001, are processed when the requester retries the same
// message once the database is back, and a copy after that is the
// duplicate (2006). Before, their replay records were written before
// their handlers ran, and the retry was refused 2006 though nothing had
// been done.
func TestTransientFailureLeavesIDUnspentOtherMethods(t *testing.T) {
	for _, method := range []string{"message/stream", "tasks/cancel", "tasks/get"} {
		t.Run(strings.ReplaceAll(method, "/", "_"), func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, dsn string) {
				n := startNodeWith(t, func(c *config.Config) { c.HTTPListen = "127.0.0.1:0"; c.Database = dsn })
				k, err := identity.Generate()
				if err != nil {
					t.Fatal(err)
				}
				from := k.Address(identity.Mainnet)
				msg := func(method string, payload any) *snap.Message {
					b, err := json.Marshal(payload)
					if err != nil {
						t.Fatal(err)
					}
					m := &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, From: from, To: n.Address(),
						Type: snap.TypeRequest, Method: method, Payload: b, Timestamp: time.Now().Unix()}
					if err := m.Sign(k); err != nil {
						t.Fatal(err)
					}
					return m
				}
				// A task for tasks/get and tasks/cancel: a proposal held
				// for an operator, input_required.
				var taskID string
				if method != "message/stream" {
					if w := taskOf(t, postSNAP(t, n, signed(t, msg("message/send", proposal("WRITE_FILE", map[string]any{"path": "/sandbox/a.txt", "content": "x\n"})), k))); w.Status.State != "completed" {
						t.Fatalf("write: %s %q", w.Status.State, w.Status.Message)
					}
					held := taskOf(t, postSNAP(t, n, signed(t, msg("message/send", proposal("DELETE_FILE", map[string]any{"path": "/sandbox/a.txt"})), k)))
					if held.Status.State != "input_required" {
						t.Fatalf("delete: %s %q", held.Status.State, held.Status.Message)
					}
					taskID = held.ID
				}
				var (
					m            *snap.Message
					table, event = "tasks", "INSERT"
				)
				switch method {
				case "message/stream":
					m = msg(method, text("streamed"))
				case "tasks/cancel":
					m, event = msg(method, map[string]any{"taskId": taskID}), "UPDATE"
				case "tasks/get":
					m = msg(method, map[string]any{"taskId": taskID})
				}
				ctx := context.Background()
				failing(t, n, table, event, method == "tasks/get")
				if p := callOnce(t, n, k, m); errorCode(p) != snap.CodeInternal {
					t.Fatalf("the failed %s answered %v; want %d", method, p, snap.CodeInternal)
				}
				healed(t, n, table, method == "tasks/get")
				first := callOnce(t, n, k, m)
				if code := errorCode(first); code != 0 {
					t.Fatalf("the retry after 5001: %v; want the task, processed now", first)
				}
				got := taskOf(t, first)
				if method == "tasks/cancel" && got.Status.State != "canceled" {
					t.Fatalf("the retried cancel left the task %s", got.Status.State)
				}
				if again := callOnce(t, n, k, m); errorCode(again) != snap.CodeDuplicateMessage {
					t.Fatalf("a second retry: %v; want %d", again, snap.CodeDuplicateMessage)
				}
				all, err := n.Tasks.List(ctx, tasks.Filter{Owner: from})
				if err != nil {
					t.Fatal(err)
				}
				if want := map[bool]int{true: 1, false: 2}[method == "message/stream"]; len(all) != want {
					t.Fatalf("%d tasks; want %d", len(all), want)
				}
			})
		})
	}
}

// callOnce sends the signed m to n over HTTP (a stream over SSE) as it
// is, and returns the payload of the answer.
func callOnce(t *testing.T, n *node.Node, k *identity.Key, m *snap.Message) map[string]any {
	t.Helper()
	if !snap.IsStreamMethod(m.Method) {
		b, err := m.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		return postSNAP(t, n, b)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := *m
	final, err := newHTTPClientWith(t, k).Stream(ctx, n.HTTPURL()+"/snap", &c, nil)
	if err != nil {
		t.Fatalf("%s: %v", m.Method, err)
	}
	var p map[string]any
	if err := json.Unmarshal(final.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

// failing makes every event (INSERT, UPDATE) on table fail, or with
// reads every use of it (the table renamed away), for a passing cause
// (the database busy, a connection lost), until healed.
func failing(t *testing.T, n *node.Node, table, event string, reads bool) {
	t.Helper()
	if reads {
		if _, err := n.DB.W.ExecContext(context.Background(), `ALTER TABLE `+table+` RENAME TO `+table+`_away`); err != nil {
			t.Fatal(err)
		}
		return
	}
	failingWhen(t, n, table, event, "")
}

// failingWhen is failing for the rows (NEW) that meet when ("": every
// row), an SQL condition, until healed.
func failingWhen(t *testing.T, n *node.Node, table, event, when string) {
	t.Helper()
	var stmts []string
	switch {
	case n.DB.Dialect != sqldb.Postgres:
		if when != "" {
			when = ` WHEN ` + when
		}
		stmts = []string{`CREATE TRIGGER fail_` + table + ` BEFORE ` + event + ` ON ` + table + when + ` BEGIN SELECT RAISE(ABORT, 'database is locked'); END`}
	default:
		if when != "" {
			when = ` WHEN (` + when + `)`
		}
		stmts = []string{`CREATE OR REPLACE FUNCTION fail_` + table + `() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'connection lost'; END $$`,
			`CREATE TRIGGER fail_` + table + ` BEFORE ` + event + ` ON ` + table + ` FOR EACH ROW` + when + ` EXECUTE FUNCTION fail_` + table + `()`}
	}
	for _, s := range stmts {
		if _, err := n.DB.W.ExecContext(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
}

// healed undoes failing.
func healed(t *testing.T, n *node.Node, table string, reads bool) {
	t.Helper()
	var stmts []string
	switch {
	case reads:
		stmts = []string{`ALTER TABLE ` + table + `_away RENAME TO ` + table}
	case n.DB.Dialect != sqldb.Postgres:
		stmts = []string{`DROP TRIGGER fail_` + table}
	default:
		stmts = []string{`DROP TRIGGER fail_` + table + ` ON ` + table}
	}
	for _, s := range stmts {
		if _, err := n.DB.W.ExecContext(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
}
