package executor

import (
	"context"
	"testing"

	"github.com/snapnode/snapnode/internal/testdb"
)

// The executor's tables as an older build left them (its migrations
// recorded in executor_migrations, one behind) are taken over: the rows
// stay, the missing migration runs, nothing is applied twice.
func TestUpgradeFromExecutorMigrations(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := testdb.Open(t, dsn)
		all, err := migrations().Names(db.Dialect)
		if err != nil {
			t.Fatal(err)
		}
		testdb.MigrateLikeOlderBuilds(t, db, migrations().FS, "executor_migrations", len(all)-1)
		if _, err := db.W.ExecContext(ctx, "INSERT INTO executor_rollback_paths (path, rolled_back_at) VALUES ('/a', 5)"); err != nil {
			t.Fatal(err)
		}
		if err := db.Migrate(ctx, migrations()); err != nil {
			t.Fatalf("migrate the older database: %v", err)
		}
		if v, err := db.SchemaVersion(ctx, "executor"); err != nil || v != len(all) {
			t.Fatalf("SchemaVersion = %d, %v; want %d", v, err, len(all))
		}
		var at int64
		if err := db.R.QueryRowContext(ctx, "SELECT rolled_back_at FROM executor_rollback_paths WHERE path = '/a'").Scan(&at); err != nil || at != 5 {
			t.Fatalf("row after the upgrade: %d, %v", at, err)
		}
	})
}
