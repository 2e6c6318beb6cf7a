package node_test

import (
	"context"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/sqldb"
)

// A node is killed with SIGKILL after the operator's approval of a held
// DELETE_FILE was carried out and its task was put back to working, but
// before the task was completed (the database is brought to that point:
// the kill at "decided" and the task's status moved on). Restarted, the
// node completes the task from the executor's record of the approved
// action, which was recorded when it was held, before the task's latest
// status: it does not run the delete again (the file is gone, so a second
// run would fail the task although the delete was carried out).
func TestReconcileApprovedWorkingAfterSIGKILL(t *testing.T) {
	if testing.Short() {
		t.Skip("runs node processes")
	}
	dataDir, held, call := deleteKilledAfterApproval(t)

	// Where a kill a moment later leaves the task: working again, after
	// the approval, not yet completed. The clock is moved so that the
	// task was created 10 s ago, its action held 5 s ago, and approved now.
	ctx := context.Background()
	db := openDB(t, "sqlite:"+filepath.Join(dataDir, "tasks.db"), sqldb.Options{})
	defer db.Close()
	sec := time.Second.Microseconds()
	for _, q := range []struct {
		sql  string
		args []any
	}{
		{`UPDATE tasks SET state = 'working', status_message = '', status_ts = ?, created_at = created_at - ?, version = version + 1 WHERE id = ?`,
			[]any{time.Now().UnixMicro(), 10 * sec, held.ID}},
		{`UPDATE executor_actions SET created_at = created_at - ? WHERE task = ?`, []any{5 * sec, held.ID}},
	} {
		if res, err := db.W.ExecContext(ctx, q.sql, q.args...); err != nil {
			t.Fatal(err)
		} else if n, _ := res.RowsAffected(); n != 1 {
			t.Fatalf("%s: %d rows", q.sql, n)
		}
	}

	second := startChildNode(t, dataDir, "")
	v := call(second, "tasks/get", map[string]any{"taskId": held.ID})
	if v.Status.State != "completed" {
		t.Fatalf("after the restart the task is %s %q; want completed", v.Status.State, v.Status.Message)
	}
	if diff, _, ok := v.artifact("diff-"); !ok || !regexp.MustCompile(`-bye`).MatchString(diff) {
		t.Errorf("the task's diff artifact is %q (present %v); want the delete's", diff, ok)
	}
	var promoted int
	if err := db.R.QueryRowContext(ctx, `SELECT COUNT(*) FROM audit_log WHERE task = ? AND step = 'promoted'`, held.ID).Scan(&promoted); err != nil {
		t.Fatal(err)
	}
	if promoted != 1 {
		t.Fatalf("%d promotions audited for the task; want 1", promoted)
	}
}
