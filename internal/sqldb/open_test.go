package sqldb_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/sqldb"
)

// Opening a new file while another process holds a lock on it waits for
// the lock instead of failing: turning WAL on needs the file's exclusive
// lock, and SQLite refuses that at once, without its busy timeout.
//
// The other connection waits for locks too, as another snapnode would:
// BEGIN IMMEDIATE on a new file writes its first page, so its COMMIT needs
// the exclusive lock, and each of Open's tries holds a read lock for a
// moment. Without a busy timeout that COMMIT failed when it met one, and
// left the transaction and its lock in place for Open to wait 10 s for.
func TestOpenWaitsForALockOnANewFile(t *testing.T) {
	ctx := context.Background()
	for _, lock := range []string{"BEGIN IMMEDIATE", "BEGIN EXCLUSIVE"} {
		t.Run(lock, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "new.db")
			other := sqldb.OpenSQLite(path + "?_busy_timeout=10000") // another process's connection, as far as locks go
			defer other.Close()
			conn, err := other.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.ExecContext(ctx, lock); err != nil {
				t.Fatal(err)
			}
			released := make(chan error, 1)
			time.AfterFunc(300*time.Millisecond, func() {
				_, err := conn.ExecContext(ctx, "COMMIT")
				if err != nil {
					// A failed COMMIT leaves the transaction open: end
					// it, so that Open does not wait for a lock the test
					// forgot.
					_, _ = conn.ExecContext(ctx, "ROLLBACK")
				}
				conn.Close()
				released <- err
			})
			start := time.Now()
			db, err := sqldb.Open(ctx, "sqlite:"+path, sqldb.Options{})
			waited := time.Since(start)
			if err := <-released; err != nil {
				t.Errorf("the other connection's COMMIT: %v (extended code %d)", err, sqliteCode(err))
			}
			if err != nil {
				t.Fatalf("Open beside a %s, after %v: %v (extended code %d)", lock, waited, err, sqliteCode(err))
			}
			defer db.Close()
			if _, err := db.W.ExecContext(ctx, "CREATE TABLE t (x)"); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// sqliteCode returns the extended result code of a SQLite error, 0 for
// another error.
func sqliteCode(err error) int {
	var se interface{ Code() int }
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}
