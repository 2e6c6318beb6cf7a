package executor_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/testdb"
)

// TestRecoverKeptRecordOfUnreadableSnapshot: an action still promoting
// whose snapshot this version cannot read (a newer version wrote it, in a
// mixed-version rollout) may own a record of the files a recovery kept,
// under a name this version cannot work out from the snapshot. A start's
// pass must leave every such record (none can be told from that one's)
// until the action is settled, and then remove the records left. Before,
// the action was left out of those still to settle, and its record was
// removed as one of a settled action's.
func TestRecoverKeptRecordOfUnreadableSnapshot(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		id := v.runLosingCommit(t)
		v.exec(t, `UPDATE executor_actions SET snapshot = ? WHERE action_id = ?`, string(newerSnapshot(t, v, id)), id)
		// Its record, as the newer version named it.
		rec := filepath.Join(v.dir, sandbox.ReservedPrefix+"kept-"+strings.Repeat("5e", 16))
		if err := os.WriteFile(rec, []byte(`[{"path":"a.txt","hidden":".snapnode-aside-a.txt","kept":"a.kept-1.txt"}]`), 0o600); err != nil {
			t.Fatal(err)
		}
		wantRecord := func(when string) {
			t.Helper()
			if _, err := os.Stat(rec); err != nil {
				t.Fatalf("%s: the record of the action still promoting was removed: %v", when, err)
			}
		}

		// A start that leaves the action to another replica (the newer
		// version's), then one that tries it and cannot read it.
		var logs strings.Builder
		v.logger = slog.New(slog.NewTextHandler(&logs, nil))
		v.reopen()
		if n, err := v.ex.RecoverInterruptedWith(ctx, executor.RecoverOptions{Before: time.Unix(1, 0)}); n != 0 || err != nil {
			t.Fatalf("RecoverInterruptedWith = %d, %v; want nothing recovered", n, err)
		}
		wantRecord("a start leaving the action to another replica")
		if !strings.Contains(logs.String(), id) || !strings.Contains(logs.String(), "cannot read") {
			t.Errorf("log %q; want it naming the action whose snapshot cannot be read", logs.String())
		}
		v.reopen()
		if n, err := v.ex.RecoverInterrupted(ctx); n != 0 || !errors.Is(err, sandbox.ErrBadSnapshot) {
			t.Fatalf("RecoverInterrupted = %d, %v; want the snapshot refused", n, err)
		}
		wantRecord("a start that cannot read the action's snapshot")

		// Settled (by the newer version, which stopped before it removed
		// the record): the next pass removes it.
		v.exec(t, `UPDATE executor_actions SET state = 'failed' WHERE action_id = ?`, id)
		if n, err := v.ex.RecoverInterrupted(ctx); n != 0 || err != nil {
			t.Fatalf("RecoverInterrupted once settled = %d, %v", n, err)
		}
		if _, err := os.Stat(rec); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the record is still there once its action is settled (%v)", err)
		}
	})
}

// newerSnapshot is the stored snapshot of action id as a newer version of
// its format would write it: one this version refuses.
func newerSnapshot(t *testing.T, v *env, id string) []byte {
	t.Helper()
	var raw string
	q := v.db.Dialect.Rebind(`SELECT snapshot FROM executor_actions WHERE action_id = ?`)
	if err := v.db.R.QueryRowContext(context.Background(), q, id).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	var snap map[string]any
	if err := json.Unmarshal([]byte(raw), &snap); err != nil {
		t.Fatal(err)
	}
	snap["version"] = sandbox.SnapshotVersion + 1
	b, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sandbox.ParseSnapshot(b); err == nil {
		t.Fatal("this version reads the newer snapshot")
	}
	return b
}

// exec runs the statement q (with ? placeholders) in a write of its own.
func (v *env) exec(t *testing.T, q string, args ...any) {
	t.Helper()
	q = v.db.Dialect.Rebind(q)
	if err := v.db.Write(context.Background(), func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, q, args...)
		return err
	}); err != nil {
		t.Fatal(err)
	}
}
