package sqldb_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// A write whose op panics on PostgreSQL (where op runs on the caller's
// goroutine, and a caller may recover: the inbox does) does not leave its
// transaction open holding its row locks: the next write of the same row
// goes through. Before, it waited until the caller's context ended.
func TestPanickingWriteReleasesItsLocks(t *testing.T) {
	ctx := context.Background()
	db, err := sqldb.Open(ctx, testdb.Postgres(t), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `CREATE TABLE counter (id INTEGER PRIMARY KEY, n INTEGER NOT NULL); INSERT INTO counter VALUES (1, 0)`)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	bump := func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE counter SET n = n + 1 WHERE id = 1`)
		return err
	}
	func() {
		defer func() { _ = recover() }()
		_ = db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
			if err := bump(ctx, tx); err != nil {
				return err
			}
			panic("a bug in the caller's op")
		})
	}()
	wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := db.Write(wctx, bump); err != nil {
		t.Fatalf("the next write of the row: %v (the panicking write's lock is held)", err)
	}
}
