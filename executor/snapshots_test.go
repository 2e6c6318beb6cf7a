package executor_test

import (
	"context"
	"errors"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// snapshotCase is one row of testdata/snapshots.json: with the bounds
// MaxAgeMinutes and MaxBytes (0: the default, -1: none), each step's
// requester rewrites a file of 1,500 bytes (a snapshot of about 2,300),
// AfterMinutes after the step before; ThenMinutes later every action is
// rolled back, and each answers Want: "restored"; "pruned" (its snapshot
// was gone from the database already); or "past_age" (still stored, but
// too old: the rollback prunes it and answers pruned).
type snapshotCase struct {
	Name          string `json:"name"`
	MaxAgeMinutes int    `json:"max_age_minutes"`
	MaxBytes      int64  `json:"max_bytes"`
	Steps         []struct {
		Requester    string `json:"requester"`
		Path         string `json:"path"`
		AfterMinutes int    `json:"after_minutes"`
	} `json:"steps"`
	ThenMinutes int      `json:"then_minutes"`
	Want        []string `json:"want"`
}

// TestSnapshotBounds: rollback snapshots are kept for a bounded time and
// a bounded number of bytes per requester; a rollback past either bound
// answers ErrSnapshotPruned, saying why, and changes nothing.
func TestSnapshotBounds(t *testing.T) {
	var cases []snapshotCase
	readTable(t, "snapshots.json", &cases)
	identities := map[string]string{"agent": agent, "other": other}
	original := strings.Repeat("x", 1500)
	minutes := func(n int) time.Duration {
		if n < 0 {
			return -1
		}
		return time.Duration(n) * time.Minute
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, dsn string) {
				v := newEnv(t, dsn)
				v.snapAge, v.snapBytes = minutes(c.MaxAgeMinutes), c.MaxBytes
				v.reopen()
				ctx := context.Background()
				var ids []string
				for _, s := range c.Steps {
					v.clock.Advance(minutes(s.AfterMinutes))
					name := strings.TrimPrefix(s.Path, "/sandbox/")
					v.file(name, original)
					res := v.run(identities[s.Requester], prop("WRITE_FILE", map[string]string{"path": s.Path, "content": "changed\n"}))
					wantOutcome(t, res, executor.Completed)
					ids = append(ids, res.ActionID)
				}
				v.snapshotTotalsAgree()
				v.clock.Advance(minutes(c.ThenMinutes))
				for i, s := range c.Steps {
					stored := v.snapshotStored(ids[i])
					err := v.ex.Rollback(ctx, ids[i])
					name := strings.TrimPrefix(s.Path, "/sandbox/")
					got, _ := v.content(name)
					switch c.Want[i] {
					case "restored":
						if err != nil || got != original {
							t.Errorf("step %d: Rollback = %v, %s holds %d bytes; want it restored", i, err, name, len(got))
						}
						continue
					case "pruned":
						if stored {
							t.Errorf("step %d: the snapshot is still stored", i)
						}
					case "past_age":
						if !stored {
							t.Errorf("step %d: the snapshot was pruned before the rollback", i)
						}
					default:
						t.Fatalf("want %q", c.Want[i])
					}
					if !errors.Is(err, executor.ErrSnapshotPruned) || !strings.Contains(err.Error(), ids[i]) {
						t.Errorf("step %d: Rollback = %v; want ErrSnapshotPruned naming the action", i, err)
					}
					if got != "changed\n" {
						t.Errorf("step %d: a refused rollback changed %s", i, name)
					}
					if v.snapshotStored(ids[i]) {
						t.Errorf("step %d: the snapshot is still stored after the rollback answered pruned", i)
					}
					if err := v.ex.Rollback(ctx, ids[i]); !errors.Is(err, executor.ErrSnapshotPruned) {
						t.Errorf("step %d: second Rollback = %v; want ErrSnapshotPruned", i, err)
					}
				}
				v.snapshotTotalsAgree()
				v.verify()
			})
		})
	}
}

// snapshotTotalsAgree fails the test unless, on SQLite,
// executor_snapshot_totals, which triggers keep, holds for every requester the bytes of its
// prunable snapshots as summed from the records.
func (v *env) snapshotTotalsAgree() {
	v.t.Helper()
	if v.db.Dialect != sqldb.SQLite {
		// PostgreSQL keeps no totals (see pruneSnapshotsTx): migration
		// 0006 removed the table and the trigger of 0005.
		var gone bool
		err := v.db.R.QueryRowContext(context.Background(), `SELECT to_regclass('executor_snapshot_totals') IS NULL
			AND NOT EXISTS (SELECT 1 FROM pg_trigger WHERE tgname = 'executor_snapshot_totals_count')`).Scan(&gone)
		if err != nil || !gone {
			v.t.Errorf("PostgreSQL still has the snapshot totals (%v)", err)
		}
		return
	}
	want := v.bytesBy(`SELECT requester, SUM(snapshot_bytes) FROM executor_actions
		WHERE snapshot <> '' AND state NOT IN ('promoting', 'rolling_back') GROUP BY requester`)
	got := v.bytesBy(`SELECT requester, bytes FROM executor_snapshot_totals WHERE bytes <> 0`)
	if !maps.Equal(got, want) {
		v.t.Errorf("executor_snapshot_totals = %v; the records sum to %v", got, want)
	}
}

// bytesBy runs query, which selects a requester and a number, and returns
// its rows as a map.
func (v *env) bytesBy(query string) map[string]int64 {
	v.t.Helper()
	rows, err := v.db.R.QueryContext(context.Background(), query)
	if err != nil {
		v.t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var r string
		var n int64
		if err := rows.Scan(&r, &n); err != nil {
			v.t.Fatal(err)
		}
		out[r] = n
	}
	if err := rows.Err(); err != nil {
		v.t.Fatal(err)
	}
	return out
}

// snapshotStored reports whether the record of actionID still holds its
// rollback snapshot.
func (v *env) snapshotStored(actionID string) bool {
	v.t.Helper()
	var n int
	err := v.db.R.QueryRowContext(context.Background(), v.db.Dialect.Rebind(
		`SELECT COUNT(*) FROM executor_actions WHERE action_id = ? AND snapshot <> ''`), actionID).Scan(&n)
	if err != nil {
		v.t.Fatal(err)
	}
	return n == 1
}
