package executor_test

import (
	"context"
	"database/sql"
	"errors"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/internal/testdb"
)

// insertRecord writes an action record as a process that died would have
// left it.
func (v *env) insertRecord(id, state string, snapshot []byte, data []byte) {
	v.t.Helper()
	q := v.db.Dialect.Rebind(`INSERT INTO executor_actions (action_id, task, requester, proposal_id, action, state,
		data, diff, pre_images, reason, snapshot, repeat_key, created_at, updated_at, rolled_back_at)
		VALUES (?, 'task-9', ?, '', 'WRITE_FILE', ?, ?, '', '[]', '', ?, '', 1, 1, 0)`)
	err := v.db.Write(context.Background(), func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, q, id, agent, state, data, string(snapshot))
		return err
	})
	if err != nil {
		v.t.Fatal(err)
	}
}

// TestRecoverInterrupted: a promotion cut short by a crash (the snapshot
// stored, the files promoted, the record never moved on) is undone, and
// an approval cut short goes back to pending.
func TestRecoverInterrupted(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		st, snap := v.stagedRewrite(ctx)
		if _, err := v.sb.Promote(ctx, st); err != nil {
			t.Fatal(err)
		}
		v.insertRecord("crashed-promotion", "promoting", snap, prop("WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": "after\n"}))
		v.insertRecord("crashed-approval", "approving", nil, prop("DELETE_FILE", map[string]string{"path": "/sandbox/a.txt"}))
		v.reopen()

		n, err := v.ex.RecoverInterrupted(ctx)
		if err != nil || n != 2 {
			t.Fatalf("RecoverInterrupted = %d, %v; want 2", n, err)
		}
		if c, _ := v.content("a.txt"); c != "before\n" {
			t.Fatalf("a.txt = %q, want the pre-image", c)
		}
		es := v.entries("crashed-promotion")
		if len(es) != 1 || es[0].Step != audit.StepFailed || es[0].Decision != "recovered" {
			t.Errorf("audit of the recovered promotion: %+v", es)
		}
		if err := v.ex.Rollback(ctx, "crashed-promotion"); !errors.Is(err, executor.ErrNotPromoted) {
			t.Errorf("Rollback of a recovered promotion: %v", err)
		}
		if _, err := v.ex.PendingAction(ctx, "crashed-approval"); err != nil {
			t.Errorf("the interrupted approval is not pending again: %v", err)
		}
		if n, err := v.ex.RecoverInterrupted(ctx); n != 0 || err != nil {
			t.Errorf("second RecoverInterrupted = %d, %v", n, err)
		}
		v.verify()
	})
}

// TestRecoverApprovalMovedOn: a recovery pass reads an approval's record,
// approving, and stands still; meanwhile the approver moves the record on
// (here: fails it); then the pass goes on. Its hand-back finds nothing to
// hand back and must not count the action as recovered. Before, the pass
// ignored whether the hand-back landed and counted it all the same.
func TestRecoverApprovalMovedOn(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		v.insertRecord("moved-on", "approving", nil, prop("DELETE_FILE", map[string]string{"path": "/sandbox/a.txt"}))
		v.reopen()
		executor.SetRecovering(v.ex, func(id string) {
			q := v.db.Dialect.Rebind(`UPDATE executor_actions SET state = 'failed', reason = 'the approver failed it' WHERE action_id = ?`)
			err := v.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, q, id)
				return err
			})
			if err != nil {
				t.Error(err)
			}
		})
		n, err := v.ex.RecoverInterrupted(ctx)
		executor.SetRecovering(v.ex, nil)
		if err != nil || n != 0 {
			t.Errorf("RecoverInterrupted = %d, %v; want 0: the approver moved the action on", n, err)
		}
		acts, err := v.ex.Actions(ctx, "task-9")
		if err != nil || len(acts) != 1 || acts[0].State != "failed" {
			t.Errorf("records %+v, %v; want the one failed (the approver's)", acts, err)
		}
	})
}
