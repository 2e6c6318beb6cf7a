package sqlstore

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// A message/send to an existing task whose write fails for a passing
// cause (the database busy, a connection lost before the commit) is
// answered 5001 and leaves its id unspent: the requester's retry of the
// same signed message is processed, the message appended once, and a
// retry after that is the duplicate, appended no second time. It holds
// for each write a message to a task makes: AppendHistory (a task
// submitted), Update (one waiting for input, working again) and
// AppendKeyed (a message with an idempotency key). Before, the record
// was written ahead of the append, and the retry was refused 2006 for the
// replay window though the message was never appended.
func TestAppendFailureLeavesIDUnspent(t *testing.T) {
	for _, shape := range []string{"submitted", "input_required", "keyed"} {
		t.Run(shape, func(t *testing.T) {
			dialects(t, func(t *testing.T, dsn string) {
				ctx := context.Background()
				node, err := identity.Generate()
				if err != nil {
					t.Fatal(err)
				}
				peer, err := identity.Generate()
				if err != nil {
					t.Fatal(err)
				}
				self, from := node.Address(identity.Mainnet), peer.Address(identity.Mainnet)
				s := open(t, dsn, Options{})
				v := snap.NewValidator(snap.Config{Self: self, Replay: s.ReplayStoreNoSync(), ClaimMethods: []string{"message/send"}})
				svc := tasks.NewService(s, tasks.ServiceOptions{KeepResults: v.Retention(), Logger: slog.New(slog.DiscardHandler)})
				router := snap.NewRouter()
				svc.Register(router, nil)
				srv := snap.NewServer(snap.ServerConfig{Key: node, Router: router, Validator: v,
					Results: s.ReplayStore(), Logger: slog.New(slog.DiscardHandler)})
				send := func(raw []byte) map[string]any {
					t.Helper()
					resp := srv.Respond(ctx, snap.Inbound{Raw: raw})
					var p map[string]any
					if resp == nil || json.Unmarshal(resp.Payload, &p) != nil {
						t.Fatalf("answer %v", resp)
					}
					return p
				}
				request := func(payload string) []byte {
					t.Helper()
					m := &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, Type: snap.TypeRequest, Method: "message/send",
						From: from, To: self, Timestamp: time.Now().Unix(), Payload: []byte(payload)}
					if err := m.Sign(peer); err != nil {
						t.Fatal(err)
					}
					raw, err := m.MarshalJSON()
					if err != nil {
						t.Fatal(err)
					}
					return raw
				}
				created := send(request(`{"message":{"messageId":"m1","role":"user","parts":[{"text":"one"}]}}`))
				task := created["task"].(map[string]any)["id"].(string)
				if shape == "input_required" {
					cur, err := s.Get(ctx, task)
					if err != nil {
						t.Fatal(err)
					}
					for _, st := range []tasks.State{tasks.StateWorking, tasks.StateInputRequired} {
						cur.Status = tasks.Status{State: st, Timestamp: time.Now()}
						if cur, err = s.Update(ctx, cur, cur.Version); err != nil {
							t.Fatal(err)
						}
					}
				}
				key := ""
				if shape == "keyed" {
					key = `"idempotencyKey":"k1",`
				}
				raw := request(fmt.Sprintf(`{"taskId":%q,%s"message":{"messageId":"m2","role":"user","parts":[{"text":"two"}]}}`, task, key))

				// Every change of a task fails, and its transaction with it.
				fail, heal := `CREATE TRIGGER fail_append BEFORE UPDATE ON tasks BEGIN SELECT RAISE(ABORT, 'database is locked'); END`, `DROP TRIGGER fail_append`
				if s.DB().Dialect == sqldb.Postgres {
					if _, err := s.DB().W.ExecContext(ctx, `CREATE FUNCTION fail_append() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'connection lost'; END $$`); err != nil {
						t.Fatal(err)
					}
					fail, heal = `CREATE TRIGGER fail_append BEFORE UPDATE ON tasks FOR EACH ROW EXECUTE FUNCTION fail_append()`, `DROP TRIGGER fail_append ON tasks`
				}
				if _, err := s.DB().W.ExecContext(ctx, fail); err != nil {
					t.Fatal(err)
				}
				if p := send(raw); errorCodeOf(p) != snap.CodeInternal {
					t.Fatalf("the failed append answered %v; want %d", p, snap.CodeInternal)
				}
				if _, err := s.DB().W.ExecContext(ctx, heal); err != nil {
					t.Fatal(err)
				}
				appended := func() int {
					t.Helper()
					got, err := s.Get(ctx, task)
					if err != nil {
						t.Fatal(err)
					}
					return len(got.History)
				}
				if n := appended(); n != 1 {
					t.Fatalf("the failed append left %d messages; want 1", n)
				}
				first := send(raw)
				if code := errorCodeOf(first); code != 0 || first["deduplicated"] != nil {
					t.Fatalf("the retry after 5001: %v; want the task, processed now", first)
				}
				if n := appended(); n != 2 {
					t.Fatalf("the retry appended: %d messages; want 2", n)
				}
				if again := send(raw); again["deduplicated"] != true {
					t.Fatalf("a second retry: %v; want the task, deduplicated", again)
				}
				if n := appended(); n != 2 {
					t.Fatalf("the second retry: %d messages; want 2", n)
				}
				if shape == "input_required" {
					if got, _ := s.Get(ctx, task); got.Status.State != tasks.StateWorking {
						t.Fatalf("the task is %s; want working again", got.Status.State)
					}
				}
			})
		})
	}
}

// errorCodeOf is the code of an error answer's payload p, or 0.
func errorCodeOf(p map[string]any) snap.Code {
	e, ok := p["error"].(map[string]any)
	if !ok {
		return 0
	}
	c, _ := e["code"].(float64)
	return snap.Code(c)
}
