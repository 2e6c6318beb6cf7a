package executor_test

import (
	"context"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
)

// TestPromotedNoWait: with Request.PromotedNoWait the commit that records
// a promotion does not wait for the disk, and it alone: the commit before
// the promotion (the record and its snapshot) still waits, and so does
// every commit of a request without it. The outcome is committed and
// visible when Run returns.
func TestPromotedNoWait(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	counter, ok := any(v.db).(interface{ UnsyncedCommits() int64 })
	if !ok {
		t.Skip("this database cannot commit without waiting for the disk (sqldb.DB.WriteNoSync)")
	}
	ctx := context.Background()
	for _, tc := range []struct {
		name    string
		noWait  bool
		action  string
		args    map[string]string
		unsyncd int64
	}{
		{"a peer's write waits", false, "WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": "a\n"}, 0},
		{"an agent's write: the outcome only", true, "WRITE_FILE", map[string]string{"path": "/sandbox/b.txt", "content": "b\n"}, 1},
		{"an agent's read waits", true, "READ_FILE", map[string]string{"path": "/sandbox/b.txt"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := counter.UnsyncedCommits()
			res, err := v.ex.Run(ctx, executor.Request{TaskID: "task-1", Requester: agent, Data: prop(tc.action, tc.args), PromotedNoWait: tc.noWait})
			if err != nil {
				t.Fatal(err)
			}
			wantOutcome(t, res, executor.Completed)
			if got := counter.UnsyncedCommits() - before; got != tc.unsyncd {
				t.Errorf("%d commits did not wait for the disk, want %d", got, tc.unsyncd)
			}
			wantSteps(t, v.steps(res.ActionID), stepsOf(tc.action)...)
		})
	}
}

func stepsOf(action string) []string {
	if action == "READ_FILE" {
		return []string{"received", "validated", "judged", "completed"}
	}
	return []string{"received", "validated", "judged", "sandboxed", "promoted"}
}
