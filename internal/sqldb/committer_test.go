package sqldb

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
)

// A group commit waits for the disk unless every write in it asked not to:
// the batch's transaction runs at the connection's synchronous setting
// (FULL, EXTRA) or at NORMAL, and never lower than the database's own.
func TestCommitterSyncOfBatch(t *testing.T) {
	// PRAGMA synchronous reads 1 for NORMAL, 2 for FULL, 3 for EXTRA.
	for _, c := range []struct {
		base   string
		noSync []bool // the writes of one batch
		want   int
	}{
		{"FULL", []bool{true}, 1},
		{"FULL", []bool{false}, 2},
		{"FULL", []bool{true, true, true}, 1},
		{"FULL", []bool{true, false}, 2},
		{"FULL", []bool{false, true}, 2},
		{"EXTRA", []bool{true}, 1},
		{"EXTRA", []bool{true, false}, 3},
		{"NORMAL", []bool{true}, 1},
		{"NORMAL", []bool{false}, 1},
	} {
		t.Run(fmt.Sprintf("%s/%v", c.base, c.noSync), func(t *testing.T) {
			ctx := context.Background()
			db, err := Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "x.db"), Options{Synchronous: c.base})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { db.Close() })
			if err := db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, "CREATE TABLE items (id INTEGER PRIMARY KEY)")
				return err
			}); err != nil {
				t.Fatal(err)
			}
			// A committer of the test's own on the writer pool, whose
			// batches the test makes: the DB's is idle.
			cm := &committer{db: db.W, sync: c.base, mode: c.base}
			run := func(noSync []bool) []int {
				got := make([]int, len(noSync))
				var batch []*writeReq
				for i, ns := range noSync {
					batch = append(batch, &writeReq{ctx: ctx, noSync: ns, op: func(ctx context.Context, tx *sql.Tx) error {
						if err := tx.QueryRowContext(ctx, "PRAGMA synchronous").Scan(&got[i]); err != nil {
							return err
						}
						_, err := tx.ExecContext(ctx, "INSERT INTO items (id) VALUES (NULL)")
						return err
					}})
				}
				cm.commit(batch)
				for i, r := range batch {
					if r.err != nil {
						t.Fatalf("write %d: %v", i, r.err)
					}
				}
				return got
			}
			for i, got := range run(c.noSync) {
				if got != c.want {
					t.Errorf("write %d of the batch ran at synchronous %d; want %d", i, got, c.want)
				}
			}
			// The next batch that waits for the disk gets the database's
			// setting back.
			base := map[string]int{"NORMAL": 1, "FULL": 2, "EXTRA": 3}[c.base]
			if got := run([]bool{false}); got[0] != base {
				t.Errorf("the next write ran at synchronous %d; want %d", got[0], base)
			}
			var n int
			if err := db.R.QueryRowContext(ctx, "SELECT count(*) FROM items").Scan(&n); err != nil || n != len(c.noSync)+1 {
				t.Fatalf("%d rows committed (%v); want %d", n, err, len(c.noSync)+1)
			}
		})
	}
}
