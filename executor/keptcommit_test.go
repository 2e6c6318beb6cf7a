package executor_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// failSettling makes the database refuse, with the message "injected:
// the commit failed", every change of an action's record to an ended
// state (a recovery's settling commit), until the returned func lifts it:
// a database that fails the commit a recovery makes once its files are
// settled.
func (v *env) failSettling() (lift func()) {
	v.t.Helper()
	var set, unset []string
	if v.db.Dialect == sqldb.SQLite {
		set = []string{`CREATE TRIGGER fail_settling BEFORE UPDATE OF state ON executor_actions
			WHEN NEW.state IN ('failed', 'rolled_back') BEGIN SELECT RAISE(ABORT, 'injected: the commit failed'); END`}
		unset = []string{`DROP TRIGGER fail_settling`}
	} else {
		set = []string{`CREATE FUNCTION fail_settling() RETURNS trigger LANGUAGE plpgsql AS $$
			BEGIN IF NEW.state IN ('failed', 'rolled_back') THEN RAISE EXCEPTION 'injected: the commit failed'; END IF; RETURN NEW; END $$`,
			`CREATE TRIGGER fail_settling BEFORE UPDATE ON executor_actions FOR EACH ROW EXECUTE FUNCTION fail_settling()`}
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
	return func() { exec(unset) }
}

// TestRecoverKeptCommitFailing: the start's recovery of an interrupted
// promotion moves an edit the crash left set aside to a visible name
// (RecoverAround), then its commit, the record failed with a reason
// naming that name, fails. The next recovery must settle the action as
// the first would have: a.txt left as found (the action's image), b.txt
// back, and the reason, record and audit naming the kept file. Before,
// it found nothing set aside, put a.txt back to its pre-image and failed
// the action as plainly undone: the edit was safe on disk, and the
// operator never told where it went.
func TestRecoverKeptCommitFailing(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		id := v.runLosingCommit(t)
		v.file(asideName("a.txt"), "edited while it was replaced\n")
		v.reopen()

		lift := v.failSettling()
		n, err := v.ex.RecoverInterrupted(ctx)
		if n != 0 || err == nil || !strings.Contains(err.Error(), "injected: the commit failed") {
			t.Fatalf("RecoverInterrupted = %d, %v; want the injected failure", n, err)
		}
		if a := v.action(id); a.State != "promoting" {
			t.Fatalf("record %s; want it promoting still: its settling failed", a.State)
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
		for _, want := range []string{"/sandbox/a.txt", "holds what the action wrote", keptPath, asideName("a.txt")} {
			if a.State != "failed" || !strings.Contains(a.Reason, want) {
				t.Errorf("record %s, reason %q; want failed, naming %q", a.State, a.Reason, want)
			}
		}
		es := v.entries(id)
		last := es[len(es)-1]
		var d struct {
			Diverged []struct{ Path, Found, Kept string } `json:"diverged"`
		}
		if err := json.Unmarshal(last.Detail, &d); err != nil || len(d.Diverged) != 1 ||
			d.Diverged[0].Path != "/sandbox/a.txt" || d.Diverged[0].Kept != keptPath || last.Reason != a.Reason {
			t.Errorf("last audit entry %q, detail %s (%v); want the record's reason, a.txt diverged with its edit kept", last.Reason, last.Detail, err)
		}
		if n, err := v.ex.RecoverInterrupted(ctx); n != 0 || err != nil {
			t.Errorf("third RecoverInterrupted = %d, %v", n, err)
		}
		if left, _ := filepath.Glob(filepath.Join(v.dir, sandbox.ReservedPrefix+"kept-*")); len(left) != 0 {
			t.Errorf("records of the files kept left once the action is settled: %v", left)
		}
		v.verify()
	})
}
