package executor_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/sandbox"
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

// runLosingCommit runs v.twoWrites with its last commit lost (as a crash,
// or a backup copy, between the renames and the commit leaves it) and
// returns the id of the one action, left promoting.
func (v *env) runLosingCommit(t *testing.T) string {
	t.Helper()
	lost := errors.New("the node stopped")
	res, err := v.ex.Run(context.Background(), executor.Request{TaskID: "task-1", Requester: agent, Data: v.twoWrites(),
		Then: func(context.Context, *sql.Tx, *executor.Result) error { return lost }})
	if !errors.Is(err, lost) {
		t.Fatalf("Run = %+v, %v; want its last commit lost", res, err)
	}
	acts := v.actions()
	if len(acts) != 1 || acts[0].State != "promoting" {
		t.Fatalf("records %+v; want one promoting", acts)
	}
	return acts[0].ActionID
}

// TestRecoverOverChangedFile: a promotion of two files stops before its
// record moves on (its last commit lost, as a crash or a backup copy
// between the renames and the commit leaves it), and one of its files is
// then changed by someone else. The start's recovery must not refuse
// (the node would not start) nor write over that file: it puts the other
// file back, as for any interrupted promotion, leaves the changed one as
// found, and fails the action with a reason naming the path, the hash the
// promotion left and the one found, audited with them. Before, it
// returned "changed since promotion" and settled nothing.
func TestRecoverOverChangedFile(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		id := v.runLosingCommit(t)
		v.file("a.txt", "edited by hand\n")
		v.reopen()

		n, err := v.ex.RecoverInterrupted(ctx)
		if n != 1 || err != nil {
			t.Fatalf("RecoverInterrupted = %d, %v; want the action settled", n, err)
		}
		if c, _ := v.content("a.txt"); c != "edited by hand\n" {
			t.Errorf("a.txt = %q; want it left as found", c)
		}
		if c, _ := v.content("b.txt"); c != "b before\n" {
			t.Errorf("b.txt = %q; want its pre-image, as for any interrupted promotion", c)
		}
		a := v.action(id)
		for _, want := range []string{"/sandbox/a.txt", sha("edited by hand\n"), sha("a after\n"), "left as found"} {
			if a.State != "failed" || !strings.Contains(a.Reason, want) {
				t.Errorf("record %s, reason %q; want failed, naming %q", a.State, a.Reason, want)
			}
		}
		es := v.entries(id)
		last := es[len(es)-1]
		if last.Step != audit.StepFailed || last.Actor != executor.Host || last.Reason != a.Reason {
			t.Errorf("last audit entry: %s %s by %s (%q); want the host's failed, with the record's reason", last.Step, last.Decision, last.Actor, last.Reason)
		}
		var d struct {
			Diverged []struct {
				Path, Expected, Found string
			} `json:"diverged"`
		}
		if err := json.Unmarshal(last.Detail, &d); err != nil || len(d.Diverged) != 1 ||
			d.Diverged[0].Path != "/sandbox/a.txt" || d.Diverged[0].Expected != sha("a after\n") || d.Diverged[0].Found != sha("edited by hand\n") {
			t.Errorf("audit detail %s (%v); want a.txt diverged, with both hashes", last.Detail, err)
		}
		if n, err := v.ex.RecoverInterrupted(ctx); n != 0 || err != nil {
			t.Errorf("second RecoverInterrupted = %d, %v", n, err)
		}
		if err := v.ex.Rollback(ctx, id); !errors.Is(err, executor.ErrNotPromoted) {
			t.Errorf("Rollback of the settled action: %v", err)
		}
		v.verify()
	})
}

// asideName is the private name the sandbox sets a file named name aside
// under while it replaces or removes it (sandbox's asideName).
func asideName(name string) string {
	h := sha256.Sum256([]byte(name))
	return sandbox.ReservedPrefix + "aside-" + hex.EncodeToString(h[:16])
}

// TestRecoverKeepsEditSetAside: a promotion of two files stops before its
// record moves on, and a crash had come while a.txt was being replaced:
// its new image in, the file it replaced still under its private name,
// written to meanwhile through a descriptor an editor held. The start's
// recovery moves that file to a visible name beside a.txt, leaves a.txt
// holding the action's own image, puts b.txt back, and fails the action
// with a reason that says so: a.txt holds what the action wrote, the edit
// is kept as the new name. Before, the reason said a.txt held neither
// image and that the node changed none of the files, and the edit stayed
// under its hidden name, barring every later change of a.txt.
func TestRecoverKeepsEditSetAside(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		id := v.runLosingCommit(t)
		v.file(asideName("a.txt"), "edited while it was replaced\n")
		v.reopen()

		n, err := v.ex.RecoverInterrupted(ctx)
		if n != 1 || err != nil {
			t.Fatalf("RecoverInterrupted = %d, %v; want the action settled", n, err)
		}
		if c, _ := v.content("a.txt"); c != "a after\n" {
			t.Errorf("a.txt = %q; want it left as found, the action's image", c)
		}
		if c, _ := v.content("b.txt"); c != "b before\n" {
			t.Errorf("b.txt = %q; want its pre-image", c)
		}
		if _, ok := v.content(asideName("a.txt")); ok {
			t.Error("the edit is still under its private name")
		}
		kept, err := filepath.Glob(filepath.Join(v.dir, "a.kept-*.txt"))
		if err != nil || len(kept) != 1 {
			t.Fatalf("kept files %v, %v; want one beside a.txt", kept, err)
		}
		keptPath := "/sandbox/" + filepath.Base(kept[0])
		if c, _ := v.content(filepath.Base(kept[0])); c != "edited while it was replaced\n" {
			t.Errorf("%s = %q; want the edit", keptPath, c)
		}
		a := v.action(id)
		for _, want := range []string{"/sandbox/a.txt", "holds what the action wrote", sha("a after\n"), keptPath, asideName("a.txt")} {
			if a.State != "failed" || !strings.Contains(a.Reason, want) {
				t.Errorf("record %s, reason %q; want failed, naming %q", a.State, a.Reason, want)
			}
		}
		for _, wrong := range []string{"each holds neither", "changed none"} {
			if strings.Contains(a.Reason, wrong) {
				t.Errorf("reason %q says %q", a.Reason, wrong)
			}
		}
		es := v.entries(id)
		var d struct {
			Diverged []struct {
				Path, Found, Kept string
			} `json:"diverged"`
		}
		if err := json.Unmarshal(es[len(es)-1].Detail, &d); err != nil || len(d.Diverged) != 1 ||
			d.Diverged[0].Path != "/sandbox/a.txt" || d.Diverged[0].Found != sha("a after\n") || d.Diverged[0].Kept != keptPath {
			t.Errorf("audit detail %s (%v); want a.txt, found the action's image, the edit kept", es[len(es)-1].Detail, err)
		}
		v.verify()
	})
}
