package sqldb_test

import (
	"context"
	"database/sql"
	"testing"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// WriteNoSync commits without waiting for the disk, Write as always, and
// the database's own setting is back for the writes after a WriteNoSync:
// on SQLite the writer connection's synchronous pragma (NORMAL for the
// batch, FULL after), on PostgreSQL the transaction's synchronous_commit.
// Both writes are committed and seen by the reading pool.
func TestWriteNoSync(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db, err := sqldb.Open(ctx, dsn, sqldb.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		if _, err := db.W.ExecContext(ctx, "CREATE TABLE items (id BIGINT PRIMARY KEY)"); err != nil {
			t.Fatal(err)
		}
		setting := "PRAGMA synchronous" // 1 NORMAL, 2 FULL
		want := map[bool]string{true: "1", false: "2"}
		if db.Dialect == sqldb.Postgres {
			setting = "SHOW synchronous_commit"
			var server string
			if err := db.R.QueryRowContext(ctx, setting).Scan(&server); err != nil {
				t.Fatal(err)
			}
			if server == "off" {
				t.Skip("the test server's synchronous_commit is off: nothing to tell apart")
			}
			want = map[bool]string{true: "off", false: server}
		}
		insert := func(id int, got *string) func(context.Context, *sql.Tx) error {
			return func(ctx context.Context, tx *sql.Tx) error {
				if err := tx.QueryRowContext(ctx, setting).Scan(got); err != nil {
					return err
				}
				_, err := tx.ExecContext(ctx, db.Dialect.Rebind("INSERT INTO items (id) VALUES (?)"), id)
				return err
			}
		}
		for i, noSync := range []bool{true, false, true, true, false, false} {
			var got string
			write := db.Write
			if noSync {
				write = db.WriteNoSync
			}
			if err := write(ctx, insert(i, &got)); err != nil {
				t.Fatalf("write %d (noSync %v): %v", i, noSync, err)
			}
			if got != want[noSync] {
				t.Errorf("write %d (noSync %v) committed at %s %s; want %s", i, noSync, setting, got, want[noSync])
			}
		}
		var n int
		if err := db.R.QueryRowContext(ctx, "SELECT count(*) FROM items").Scan(&n); err != nil || n != 6 {
			t.Fatalf("%d rows committed (%v); want 6", n, err)
		}
		if db.Dialect == sqldb.SQLite {
			if batches, _ := db.GroupCommits(); batches != 6 || db.UnsyncedCommits() != 3 {
				t.Errorf("%d commits, %d unsynced; want 6, 3", batches, db.UnsyncedCommits())
			}
		}
	})
}
