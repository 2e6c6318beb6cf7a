package sqldb_test

import (
	"context"
	"database/sql"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testutil"
)

// TestCommitterCheckpoints: the committer asks for a checkpoint of the WAL
// every 16 batches, done beside the writer; where the writes leave it
// time to finish (here the test waits for it), the WAL starts afresh
// every 16 writes and never grows to the 1,000 pages at which SQLite
// would checkpoint inside a caller's commit.
func TestCommitterCheckpoints(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "cp.db")
	db, finished := openItems(t, path, sqldb.Options{})
	// Each write dirties about three pages (a row of 3 KB and the
	// tree's pages above it): 640 writes would take the WAL to some
	// 1,900 pages without a checkpoint.
	body := strings.Repeat("x", 3000)
	for i := range 640 {
		err := db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO items (id, body) VALUES (?, ?)", i, body)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		if (i+1)%16 == 0 {
			<-finished // the checkpoint this batch asked for
		}
	}
	done, failed := db.Checkpoints()
	if done != 640/16 || failed != 0 {
		t.Errorf("the committer had %d checkpoints done (%d failed) over 640 writes; want one every 16 batches, none failed", done, failed)
	}
	fi, err := os.Stat(path + "-wal")
	if err != nil {
		t.Fatal(err)
	}
	// SQLite's own checkpoint comes at 1,000 pages (4 MB); with the
	// committer's, the WAL starts afresh every 16 writes (about 50
	// pages).
	if fi.Size() > 1<<20 {
		t.Errorf("the WAL grew to %d bytes; with the committer's checkpoints it should stay under 1 MB", fi.Size())
	}
	var n int
	if err := db.R.QueryRowContext(ctx, "SELECT COUNT(*) FROM items").Scan(&n); err != nil || n != 640 {
		t.Errorf("%d rows read back (%v); want 640", n, err)
	}
}

// A failed checkpoint is counted and logged, as a warning the first time
// and at debug level while the failures go on; the writes go on.
func TestCommitterCheckpointFailures(t *testing.T) {
	ctx := context.Background()
	var log testutil.LockedBuffer
	db, finished := openItems(t, filepath.Join(t.TempDir(), "cp.db"), sqldb.Options{
		Logger: slog.New(slog.NewTextHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	})
	db.R.Close() // the checkpoints run on the read pool: now they fail
	for i := range 32 {
		if err := db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, "INSERT INTO items (id) VALUES (?)", i)
			return err
		}); err != nil {
			t.Fatalf("write %d with checkpoints failing: %v", i, err)
		}
		if (i+1)%16 == 0 {
			<-finished
		}
	}
	if done, failed := db.Checkpoints(); done != 0 || failed != 2 {
		t.Errorf("checkpoints: %d done, %d failed; want 0 and 2", done, failed)
	}
	got := log.String()
	if strings.Count(got, "level=WARN") != 1 || strings.Count(got, "level=DEBUG") != 1 || !strings.Contains(got, "WAL checkpoint failed") {
		t.Errorf("log:\n%s\nwant one warning, then one debug line, naming the failed checkpoint", got)
	}
}

// openItems opens a SQLite database at path with a table items (id, body),
// closed when the test ends; finished gets a value after each of the
// committer's checkpoints.
func openItems(t *testing.T, path string, opts sqldb.Options) (db *sqldb.DB, finished <-chan struct{}) {
	t.Helper()
	ctx := context.Background()
	db, err := sqldb.Open(ctx, "sqlite:"+path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	done := make(chan struct{}, 1)
	sqldb.SetAfterCheckpoint(db, func() { done <- struct{}{} })
	if _, err := db.W.ExecContext(ctx, "CREATE TABLE items (id INTEGER PRIMARY KEY, body TEXT)"); err != nil {
		t.Fatal(err)
	}
	return db, done
}
