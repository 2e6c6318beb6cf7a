package executor_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
)

// thenNotes is a caller's table written by Then: one row per outcome.
type thenNotes struct {
	t *testing.T
	v *env
}

func newThenNotes(t *testing.T, v *env) *thenNotes {
	if _, err := v.db.W.ExecContext(context.Background(), `CREATE TABLE caller_outcomes (action_id TEXT NOT NULL, outcome TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	return &thenNotes{t: t, v: v}
}

// then records res's outcome, failing with fail when it is set.
func (n *thenNotes) then(fail error) executor.Then {
	return func(ctx context.Context, tx *sql.Tx, res *executor.Result) error {
		if _, err := tx.ExecContext(ctx, n.v.db.Dialect.Rebind(`INSERT INTO caller_outcomes (action_id, outcome) VALUES (?, ?)`),
			res.ActionID, string(res.Outcome)); err != nil {
			return err
		}
		return fail
	}
}

// of returns the outcomes recorded for actionID.
func (n *thenNotes) of(actionID string) string {
	rows, err := n.v.db.R.QueryContext(context.Background(), n.v.db.Dialect.Rebind(`SELECT outcome FROM caller_outcomes WHERE action_id = ?`), actionID)
	if err != nil {
		n.t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			n.t.Fatal(err)
		}
		out = append(out, s)
	}
	return strings.Join(out, " ")
}

func (n *thenNotes) count() int {
	var k int
	if err := n.v.db.R.QueryRowContext(context.Background(), `SELECT COUNT(*) FROM caller_outcomes`).Scan(&k); err != nil {
		n.t.Fatal(err)
	}
	return k
}

// Request.Then, ApproveThen and DenyThen join the call's last commit: the
// caller's record of every kind of outcome is written once, with the
// Result the call returns, and adds no commit of its own.
func TestThenJoinsLastCommit(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		n := newThenNotes(t, v)
		v.file("a.txt", "hello\n")
		v.file("b.txt", "bye\n")
		run := func(data []byte) *executor.Result {
			t.Helper()
			res, err := v.ex.Run(ctx, executor.Request{TaskID: "task-1", Requester: agent, Data: data, Then: n.then(nil)})
			if err != nil {
				t.Fatal(err)
			}
			return res
		}
		var held, held2 string
		for _, tc := range []struct {
			name    string
			do      func() *executor.Result
			want    executor.Outcome
			commits int64 // SQLite's, as TestCommitsPerStep counts them without Then
		}{
			{"WRITE_FILE promoted", func() *executor.Result {
				return run(prop("WRITE_FILE", map[string]string{"path": "/sandbox/w.txt", "content": "w\n"}))
			}, executor.Completed, 2},
			{"READ_FILE", func() *executor.Result { return run(prop("READ_FILE", map[string]string{"path": "/sandbox/a.txt"})) }, executor.Completed, 1},
			{"invalid proposal", func() *executor.Result { return run([]byte(`{"schema_version":"1.0.0"}`)) }, executor.Failed, 1},
			{"policy deny", func() *executor.Result { return run(prop("RUN_COMMAND", map[string]string{"command": "ls"})) }, executor.Failed, 1},
			{"sandbox refusal", func() *executor.Result {
				return run(prop("WRITE_FILE", map[string]string{"path": "/sandbox/../out.txt", "content": "x"}))
			}, executor.Failed, 1},
			{"DELETE_FILE held", func() *executor.Result {
				res := run(prop("DELETE_FILE", map[string]string{"path": "/sandbox/a.txt"}))
				held = res.ActionID
				return res
			}, executor.NeedsConfirmation, 1},
			{"approved", func() *executor.Result {
				res, err := v.ex.ApproveThen(ctx, held, operator, nil, n.then(nil))
				if err != nil {
					t.Fatal(err)
				}
				return res
			}, executor.Completed, 3},
			{"second DELETE_FILE held", func() *executor.Result {
				res := run(prop("DELETE_FILE", map[string]string{"path": "/sandbox/b.txt"}))
				held2 = res.ActionID
				return res
			}, executor.NeedsConfirmation, 1},
			{"denied", func() *executor.Result {
				res, err := v.ex.DenyThen(ctx, held2, operator, "no", n.then(nil))
				if err != nil {
					t.Fatal(err)
				}
				return res
			}, executor.Failed, 1},
		} {
			before, _ := v.db.GroupCommits()
			res := tc.do()
			after, _ := v.db.GroupCommits()
			wantOutcome(t, res, tc.want)
			want := string(tc.want)
			if tc.name == "approved" || tc.name == "denied" {
				want = string(executor.NeedsConfirmation) + " " + want // the hold's, then the decision's
			}
			if got := n.of(res.ActionID); got != want {
				t.Errorf("%s: Then recorded %q, want %q", tc.name, got, want)
			}
			if v.db.Dialect.Name() == "sqlite" && after-before != tc.commits {
				t.Errorf("%s: %d commits, want %d (Then joins one)", tc.name, after-before, tc.commits)
			}
		}
		v.verify()
	})
}

// Then's error fails the commit it joins: nothing of it stays, and the
// call returns the error.
func TestThenErrorFailsTheCommit(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		n := newThenNotes(t, v)
		v.file("a.txt", "hello\n")
		refused := errors.New("the caller refuses the outcome")
		for _, data := range [][]byte{
			prop("READ_FILE", map[string]string{"path": "/sandbox/a.txt"}),
			[]byte(`{"schema_version":"1.0.0"}`),
			prop("DELETE_FILE", map[string]string{"path": "/sandbox/a.txt"}),
		} {
			if _, err := v.ex.Run(ctx, executor.Request{TaskID: "task-1", Requester: agent, Data: data, Then: n.then(refused)}); !errors.Is(err, refused) {
				t.Fatalf("Run = %v, want the caller's error", err)
			}
		}
		if k := n.count(); k != 0 {
			t.Fatalf("%d outcomes recorded by failed commits", k)
		}
		if p, err := v.ex.Pending(ctx, "task-1"); err != nil || len(p) != 0 {
			t.Fatalf("a hold whose commit failed left %d held actions (%v)", len(p), err)
		}
		// A decision whose commit fails leaves the action held.
		res := v.run(agent, prop("DELETE_FILE", map[string]string{"path": "/sandbox/a.txt"}))
		wantOutcome(t, res, executor.NeedsConfirmation)
		if _, err := v.ex.DenyThen(ctx, res.ActionID, operator, "no", n.then(refused)); !errors.Is(err, refused) {
			t.Fatalf("DenyThen = %v, want the caller's error", err)
		}
		if _, err := v.ex.PendingAction(ctx, res.ActionID); err != nil {
			t.Fatalf("after a failed denial: %v, want the action still held", err)
		}
		if k := n.count(); k != 0 {
			t.Fatalf("%d outcomes recorded by failed commits", k)
		}
		v.verify()
	})
}
