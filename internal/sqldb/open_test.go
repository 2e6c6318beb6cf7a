package sqldb_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/sqldb"
)

// Opening a new file while another process holds a lock on it waits for
// the lock instead of failing: turning WAL on needs the file's exclusive
// lock, and SQLite refuses that at once, without its busy timeout.
func TestOpenWaitsForALockOnANewFile(t *testing.T) {
	ctx := context.Background()
	for _, lock := range []string{"BEGIN IMMEDIATE", "BEGIN EXCLUSIVE"} {
		t.Run(lock, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "new.db")
			other := sqldb.OpenSQLite(path) // another process's connection, as far as locks go
			defer other.Close()
			conn, err := other.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.ExecContext(ctx, lock); err != nil {
				t.Fatal(err)
			}
			released := make(chan struct{})
			time.AfterFunc(300*time.Millisecond, func() {
				defer close(released)
				conn.ExecContext(ctx, "COMMIT")
				conn.Close()
			})
			db, err := sqldb.Open(ctx, "sqlite:"+path, sqldb.Options{})
			<-released
			if err != nil {
				t.Fatalf("Open beside a %s: %v", lock, err)
			}
			defer db.Close()
			if _, err := db.W.ExecContext(ctx, "CREATE TABLE t (x)"); err != nil {
				t.Fatal(err)
			}
		})
	}
}
