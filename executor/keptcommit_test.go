package executor_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// failSettling makes the database fail, in the way how says, the
// transaction of every change of an action's record to an ended state (a
// recovery's settling commit), until the returned func lifts it:
//
//   - "refused": the update fails (both stores);
//   - "at commit": the statements pass and the commit fails (PostgreSQL:
//     a deferred constraint trigger);
//   - "dropped": the connection drops in the middle of the transaction
//     (PostgreSQL: the server ends its own backend).
//
// It reports false where the store cannot fail so.
func (v *env) failSettling(how string) (lift func(), ok bool) {
	v.t.Helper()
	var set, unset []string
	switch {
	case v.db.Dialect == sqldb.SQLite && how == "refused":
		set = []string{`CREATE TRIGGER fail_settling BEFORE UPDATE OF state ON executor_actions
			WHEN NEW.state IN ('failed', 'rolled_back') BEGIN SELECT RAISE(ABORT, 'injected: the commit failed'); END`}
		unset = []string{`DROP TRIGGER fail_settling`}
	case v.db.Dialect == sqldb.SQLite:
		return nil, false
	default:
		do := map[string]string{
			"refused":   `RAISE EXCEPTION 'injected: the commit failed'`,
			"at commit": `RAISE EXCEPTION 'injected: the commit failed'`,
			"dropped":   `PERFORM pg_terminate_backend(pg_backend_pid())`,
		}[how]
		trigger := `CREATE TRIGGER fail_settling BEFORE UPDATE ON executor_actions FOR EACH ROW EXECUTE FUNCTION fail_settling()`
		if how == "at commit" {
			trigger = `CREATE CONSTRAINT TRIGGER fail_settling AFTER UPDATE ON executor_actions DEFERRABLE INITIALLY DEFERRED
				FOR EACH ROW EXECUTE FUNCTION fail_settling()`
		}
		set = []string{`CREATE FUNCTION fail_settling() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN IF NEW.state IN ('failed', 'rolled_back') THEN ` + do + `; END IF; RETURN NEW; END $$`, trigger}
		unset = []string{`DROP TRIGGER fail_settling ON executor_actions`, `DROP FUNCTION fail_settling()`}
	}
	exec := func(stmts []string) {
		err := v.db.Write(context.Background(), func(ctx context.Context, tx *sql.Tx) error {
			for _, s := range stmts {
				if _, err := tx.ExecContext(ctx, s); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			v.t.Fatal(err)
		}
	}
	exec(set)
	return func() { exec(unset) }, true
}

// TestRecoverKeptCommitFailing: the start's recovery of an interrupted
// promotion (or rollback) moves an edit the crash left set aside to a
// visible name (RecoverAround), then its commit, the record settled with
// a reason naming that name, fails: refused, failing at the commit
// itself, or its connection dropped half-way. The next recovery must
// settle the action as the first would have: a.txt left as found (the
// action's image), b.txt back, and the reason, record and audit naming
// the kept file. Before, it found nothing set aside, put a.txt back to
// its pre-image and settled the action as plainly undone: the edit was
// safe on disk, and the operator never told where it went.
func TestRecoverKeptCommitFailing(t *testing.T) {
	for _, from := range []string{"promoting", "rolling_back"} {
		for _, how := range []string{"refused", "at commit", "dropped"} {
			t.Run(from+"/"+how, func(t *testing.T) {
				testdb.Each(t, func(t *testing.T, dsn string) {
					recoverKeptCommitFailing(t, dsn, from, how)
				})
			})
		}
	}
}

func recoverKeptCommitFailing(t *testing.T, dsn, from, how string) {
	v := newEnv(t, dsn)
	ctx := context.Background()
	id := v.runLosingCommit(t)
	if from == "rolling_back" {
		// The crash came in its rollback instead, as a.txt was put back.
		q := v.db.Dialect.Rebind(`UPDATE executor_actions SET state = 'rolling_back' WHERE action_id = ?`)
		if err := v.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, q, id)
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	v.file(asideName("a.txt"), "edited while it was replaced\n")
	v.reopen()

	lift, ok := v.failSettling(how)
	if !ok {
		t.Skipf("the store cannot fail %q", how)
	}
	n, err := v.ex.RecoverInterrupted(ctx)
	if n != 0 || err == nil || how != "dropped" && !strings.Contains(err.Error(), "injected: the commit failed") {
		t.Fatalf("RecoverInterrupted = %d, %v; want the injected failure", n, err)
	}
	if a := v.action(id); a.State != from {
		t.Fatalf("record %s; want it %s still: its settling failed", a.State, from)
	}
	kept, err := filepath.Glob(filepath.Join(v.dir, "a.kept-*.txt"))
	if err != nil || len(kept) != 1 {
		t.Fatalf("kept files %v, %v; want one beside a.txt", kept, err)
	}
	keptPath := "/sandbox/" + filepath.Base(kept[0])
	if recs, _ := filepath.Glob(filepath.Join(v.dir, sandbox.ReservedPrefix+"kept-*")); len(recs) != 1 {
		t.Errorf("records of the files kept %v; want the one of this recovery", recs)
	}
	if _, err := v.sb.Sweep(ctx); err != nil { // as a start does, before its recovery
		t.Fatal(err)
	}
	lift()
	v.reopen()

	n, err = v.ex.RecoverInterrupted(ctx)
	if n != 1 || err != nil {
		t.Fatalf("second RecoverInterrupted = %d, %v; want the action settled", n, err)
	}
	if c, _ := v.content("a.txt"); c != "a after\n" {
		t.Errorf("a.txt = %q; want it left as found, the action's image, as the first recovery left it", c)
	}
	if c, _ := v.content("b.txt"); c != "b before\n" {
		t.Errorf("b.txt = %q; want its pre-image", c)
	}
	if c, _ := v.content(filepath.Base(kept[0])); c != "edited while it was replaced\n" {
		t.Errorf("%s = %q; want the edit", keptPath, c)
	}
	if again, _ := filepath.Glob(filepath.Join(v.dir, "a.kept-*.txt")); len(again) != 1 {
		t.Errorf("kept files %v; want the one", again)
	}
	a := v.action(id)
	state, step := "failed", audit.StepFailed
	if from == "rolling_back" {
		state, step = "rolled_back", audit.StepRolledBack
	}
	if a.State != state {
		t.Errorf("record %s; want %s", a.State, state)
	}
	es := v.entries(id)
	last := es[len(es)-1]
	for _, want := range []string{"/sandbox/a.txt", "holds what the action wrote", keptPath, asideName("a.txt")} {
		if !strings.Contains(last.Reason, want) {
			t.Errorf("reason %q; want it naming %q", last.Reason, want)
		}
	}
	var d struct {
		Diverged []struct{ Path, Found, Kept string } `json:"diverged"`
	}
	if err := json.Unmarshal(last.Detail, &d); err != nil || last.Step != step || len(d.Diverged) != 1 ||
		d.Diverged[0].Path != "/sandbox/a.txt" || d.Diverged[0].Kept != keptPath {
		t.Errorf("last audit entry %s %q, detail %s (%v); want %s, a.txt diverged with its edit kept", last.Step, last.Reason, last.Detail, err, step)
	}
	if from == "promoting" && a.Reason != last.Reason {
		t.Errorf("record's reason %q; want the entry's, %q", a.Reason, last.Reason)
	}
	if n, err := v.ex.RecoverInterrupted(ctx); n != 0 || err != nil {
		t.Errorf("third RecoverInterrupted = %d, %v", n, err)
	}
	if left, _ := filepath.Glob(filepath.Join(v.dir, sandbox.ReservedPrefix+"kept-*")); len(left) != 0 {
		t.Errorf("records of the files kept left once the action is settled: %v", left)
	}
	v.verify()
}

// runAnotherLosingCommit is runLosingCommit after other actions: it
// returns the one left promoting.
func (v *env) runAnotherLosingCommit(t *testing.T) string {
	t.Helper()
	lost := errors.New("the node stopped")
	if _, err := v.ex.Run(context.Background(), executor.Request{TaskID: "task-1", Requester: agent, Data: v.twoWrites(),
		Then: func(context.Context, *sql.Tx, *executor.Result) error { return lost }}); !errors.Is(err, lost) {
		t.Fatalf("Run = %v; want its last commit lost", err)
	}
	var id string
	for _, a := range v.actions() {
		if a.State == "promoting" {
			id = a.ActionID
		}
	}
	return id
}

// TestRecoverKeptRecordOfAnother: the sandbox's record of the edits a
// recovery kept outlives the recovery when the commit that settled it
// stood but its answer was lost (or the node stopped right after it).
// A later action whose snapshot is the very same (the same files, from
// the same contents to the same contents), interrupted with nothing set
// aside, must be undone as any other, not taken for the first: its
// files put back, its reason naming no kept file. Before the records
// were the action's own, the second recovery left a.txt holding what
// the failed action wrote and named the first action's kept file.
func TestRecoverKeptRecordOfAnother(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		v.runLosingCommit(t)
		v.file(asideName("a.txt"), "edited while it was replaced\n")
		v.reopen()
		lift, _ := v.failSettling("refused")
		if _, err := v.ex.RecoverInterrupted(ctx); err == nil {
			t.Fatal("RecoverInterrupted stood; want the injected failure")
		}
		lift()
		recs, _ := filepath.Glob(filepath.Join(v.dir, sandbox.ReservedPrefix+"kept-*"))
		if len(recs) != 1 {
			t.Fatalf("records of the files kept %v; want one", recs)
		}
		stale, err := os.ReadFile(recs[0])
		if err != nil {
			t.Fatal(err)
		}
		if n, err := v.ex.RecoverInterrupted(ctx); n != 1 || err != nil {
			t.Fatalf("RecoverInterrupted = %d, %v", n, err)
		}
		// The settling commit stood, its answer lost: the record stays.
		if err := os.WriteFile(recs[0], stale, 0o600); err != nil {
			t.Fatal(err)
		}

		// The same snapshot, nothing set aside.
		id := v.runAnotherLosingCommit(t)
		v.reopen()
		if n, err := v.ex.RecoverInterrupted(ctx); n != 1 || err != nil {
			t.Fatalf("RecoverInterrupted of the second = %d, %v", n, err)
		}
		v.wantUndone(id)
		if a := v.action(id); strings.Contains(a.Reason, "kept") {
			t.Errorf("reason %q names a kept file", a.Reason)
		}
	})
}

// TestRecoverKeptRecordLeftOver: the sandbox's record of the edits a
// recovery kept is removed once the recovery's commit stands; a crash
// between the two (or a commit that stood, its answer lost) left it at
// the root of the workspace for ever, never read again: a node that
// crashed so now and then gathered them. The next start (its first
// recovery pass) must remove it, and must leave the record of an action
// still to be recovered, even one the pass leaves to another replica (too
// young for its cutoff): that record is what names its kept file again.
func TestRecoverKeptRecordLeftOver(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		var seen []string
		records := func() []string {
			t.Helper()
			recs, err := filepath.Glob(filepath.Join(v.dir, sandbox.ReservedPrefix+"kept-*"))
			if err != nil {
				t.Fatal(err)
			}
			return recs
		}
		// keepOne recovers the interrupted action id with its edit of
		// a.txt set aside, its settling refused: its record stays, as
		// it must. It returns the record's path and content.
		keepOne := func(id string) (string, []byte) {
			t.Helper()
			v.file(asideName("a.txt"), "edited while it was replaced ("+id+")\n")
			v.reopen()
			lift, _ := v.failSettling("refused")
			if _, err := v.ex.RecoverInterrupted(ctx); err == nil {
				t.Fatal("RecoverInterrupted stood; want the injected failure")
			}
			if a := v.action(id); a.State != "promoting" {
				t.Fatalf("action %s; want it promoting still", a.State)
			}
			lift()
			var rec string
			for _, r := range records() {
				if b, _ := os.ReadFile(r); strings.Contains(string(b), "a.kept-") && !slices.Contains(seen, r) {
					rec = r
				}
			}
			if rec == "" {
				t.Fatalf("records of the files kept %v; want one of %s", records(), id)
			}
			seen = append(seen, rec)
			b, err := os.ReadFile(rec)
			if err != nil {
				t.Fatal(err)
			}
			return rec, b
		}

		first := v.runLosingCommit(t)
		leftover, stale := keepOne(first)
		if n, err := v.ex.RecoverInterrupted(ctx); n != 1 || err != nil {
			t.Fatalf("RecoverInterrupted = %d, %v", n, err)
		}
		if a := v.action(first); a.State != "failed" {
			t.Fatalf("first action %s; want failed", a.State)
		}
		// The process stopped right after that commit, before the record
		// went.
		if err := os.WriteFile(leftover, stale, 0o600); err != nil {
			t.Fatal(err)
		}

		// A second action, interrupted, its recovery not yet recorded.
		second := v.runAnotherLosingCommit(t)
		pending, _ := keepOne(second)

		// The next start, on a shared database: the second action is
		// too young for this process's cutoff, another replica's to
		// recover.
		v.reopen()
		if n, err := v.ex.RecoverInterruptedWith(ctx, executor.RecoverOptions{Before: time.Unix(1, 0)}); n != 0 || err != nil {
			t.Fatalf("RecoverInterruptedWith = %d, %v; want nothing recovered", n, err)
		}
		if _, err := os.Stat(leftover); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the record of the settled action is still there after a start (%v); records %v", err, records())
		}
		if _, err := os.Stat(pending); err != nil {
			t.Fatalf("the record of the action still to recover was removed: %v", err)
		}

		// Its recovery still names its kept file, and then no record is
		// left.
		if n, err := v.ex.RecoverInterrupted(ctx); n != 1 || err != nil {
			t.Fatalf("RecoverInterrupted of the second = %d, %v", n, err)
		}
		if a := v.action(second); a.State != "failed" || !strings.Contains(a.Reason, "/sandbox/a.kept-") {
			t.Errorf("second action %s, %q; want failed, naming its kept file", a.State, a.Reason)
		}
		if left := records(); len(left) != 0 {
			t.Errorf("records left: %v", left)
		}
	})
}
