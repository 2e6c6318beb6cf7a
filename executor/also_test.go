package executor_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
)

// Request.Also joins Run's first commit: what the caller writes there is
// durable with the executor's first record of the proposal, and its error
// stops the proposal before anything has an effect.
func TestRequestAlso(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		if _, err := v.db.W.ExecContext(ctx, `CREATE TABLE caller_notes (note TEXT NOT NULL)`); err != nil {
			t.Fatal(err)
		}
		note := func(text string) func(context.Context, *sql.Tx) error {
			return func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, v.db.Dialect.Rebind(`INSERT INTO caller_notes (note) VALUES (?)`), text)
				return err
			}
		}
		notes := func() []string {
			rows, err := v.db.R.QueryContext(ctx, `SELECT note FROM caller_notes ORDER BY note`)
			if err != nil {
				t.Fatal(err)
			}
			defer rows.Close()
			var out []string
			for rows.Next() {
				var s string
				rows.Scan(&s)
				out = append(out, s)
			}
			return out
		}
		for _, tc := range []struct {
			name, action string
			args         map[string]string
		}{
			{"write", "WRITE_FILE", map[string]string{"path": "/sandbox/w.txt", "content": "w\n"}},
			{"read", "READ_FILE", map[string]string{"path": "/sandbox/w.txt"}},
			{"refused", "RUN_COMMAND", map[string]string{"command": "ls"}},
		} {
			res, err := v.ex.Run(ctx, executor.Request{TaskID: "task-1", Requester: "alice", Data: prop(tc.action, tc.args), Also: note(tc.name)})
			if err != nil || res == nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
		}
		if got := notes(); len(got) != 3 {
			t.Fatalf("notes %v: want one per proposal, each run once", got)
		}

		// The caller's statement fails: the write never happens.
		lost := errors.New("the caller no longer holds the work")
		_, err := v.ex.Run(ctx, executor.Request{TaskID: "task-1", Requester: "alice",
			Data: prop("WRITE_FILE", map[string]string{"path": "/sandbox/x.txt", "content": "x\n"}),
			Also: func(context.Context, *sql.Tx) error { return lost }})
		if !errors.Is(err, lost) {
			t.Fatalf("Run = %v, want the caller's error", err)
		}
		if _, ok := v.content("x.txt"); ok {
			t.Fatal("x.txt was written although the caller's statement failed")
		}
		v.verify() // the audit log still verifies
	})
}
