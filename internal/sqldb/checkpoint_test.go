package sqldb_test

import (
	"context"
	"database/sql"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/sqldb"
)

// TestCommitterCheckpoints: writes that come one at a time leave the
// committer idle moments, where it checkpoints the WAL itself, so the WAL
// starts afresh every few commits and never grows to the 1,000 pages at
// which SQLite would checkpoint inside a caller's commit.
func TestCommitterCheckpoints(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cp.db")
	db, err := sqldb.Open(ctx, "sqlite:"+path, sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.W.ExecContext(ctx, "CREATE TABLE items (id INTEGER PRIMARY KEY, body TEXT)"); err != nil {
		t.Fatal(err)
	}
	// Each write dirties about three pages (a row of 3 KB and the
	// tree's pages above it): 600 writes would take the WAL to some
	// 1,800 pages without a checkpoint.
	body := strings.Repeat("x", 3000)
	for i := range 600 {
		err := db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO items (id, body) VALUES (?, ?)", i, body)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	done, failed := db.Checkpoints()
	if done < 600/20 || failed != 0 {
		t.Errorf("the committer made %d checkpoints (%d failed) over 600 writes one at a time; want about one every 16 and none failed", done, failed)
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	// SQLite's own checkpoint comes at 1,000 pages (4 MB); the
	// committer's, every 16 writes, keep the WAL near 16 × 3 pages.
	if fi.Size() > 1<<20 {
		t.Errorf("the WAL grew to %d bytes; with the committer's checkpoints it should stay under 1 MB", fi.Size())
	}
}
