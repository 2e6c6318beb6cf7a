package sqldb_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks/sqlstore"
)

// A database that older builds migrated, each component recording its
// migrations in a table of its own and the agent one migration behind,
// opens with this build: nothing is applied twice (the first migrations
// have no IF NOT EXISTS), the missing migration runs, the rows are kept,
// and one table records every component.
func TestUpgradeFromPerComponentTables(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := testdb.Open(t, dsn)
		testdb.MigrateLikeOlderBuilds(t, db, os.DirFS("../../tasks/sqlstore/migrations"), "schema_migrations", 0)
		testdb.MigrateLikeOlderBuilds(t, db, os.DirFS("../../agent/migrations"), "agent_migrations", 1)
		testdb.MigrateLikeOlderBuilds(t, db, os.DirFS("../../executor/audit/migrations"), "audit_migrations", 0)
		if _, err := db.W.ExecContext(ctx, `INSERT INTO agent_jobs (task_id, requester, status, created_at, updated_at) VALUES ('t1', 'alice', 'running', 1, 1)`); err != nil {
			t.Fatal(err)
		}

		store, err := sqlstore.New(ctx, db)
		if err != nil {
			t.Fatalf("task store on the older database: %v", err)
		}
		defer store.Close()
		if _, err := agent.OpenStore(ctx, db); err != nil {
			t.Fatalf("agent store on the older database: %v", err)
		}
		log, err := audit.New(ctx, db, audit.Options{})
		if err != nil {
			t.Fatalf("audit log on the older database: %v", err)
		}
		defer log.Close()

		var requester string
		if err := db.R.QueryRowContext(ctx, "SELECT requester FROM agent_jobs WHERE task_id = 't1'").Scan(&requester); err != nil || requester != "alice" {
			t.Fatalf("the agent's job after the upgrade: %q, %v", requester, err)
		}
		for component, dir := range map[string]string{"tasks": "../../tasks/sqlstore/migrations", "agent": "../../agent/migrations", "audit": "../../executor/audit/migrations"} {
			want := migrationCount(t, dir) // every one of this build's, none twice
			var n, top int
			err := db.R.QueryRowContext(ctx, db.Dialect.Rebind("SELECT count(*), COALESCE(MAX(version), 0) FROM snapnode_migrations WHERE component = ?"), component).Scan(&n, &top)
			if err != nil || n != want || top != want {
				t.Errorf("%s: snapnode_migrations holds %d rows up to %d (%v), want %d", component, n, top, err, want)
			}
		}
		for _, old := range []string{"schema_migrations", "agent_migrations", "audit_migrations"} {
			rows, err := db.R.QueryContext(ctx, "SELECT 1 FROM "+old)
			if err == nil {
				rows.Close()
				t.Errorf("%s is still there", old)
			}
		}
	})
}

// migrationCount is the number of migrations of this build in dir (its
// sqlite/ folder; the postgres/ one has the same versions).
func migrationCount(t *testing.T, dir string) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "sqlite", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("migrations in %s: %d, %v", dir, len(files), err)
	}
	return len(files)
}
