package sqldb_test

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// history is a component's migrations in both dialects: 0001 creates a
// table (without IF NOT EXISTS: applying it twice fails), 0002 adds a
// column.
func history(component string) sqldb.Migrations {
	fsys := fstest.MapFS{}
	for _, d := range []string{"sqlite", "postgres"} {
		fsys[d+"/0001_items.sql"] = &fstest.MapFile{Data: []byte("CREATE TABLE items (id BIGINT PRIMARY KEY, body TEXT NOT NULL)")}
		fsys[d+"/0002_note.sql"] = &fstest.MapFile{Data: []byte("ALTER TABLE items ADD COLUMN note TEXT")}
	}
	return sqldb.Migrations{FS: fsys, Component: component}
}

// A database whose older build recorded its migrations in a table of the
// component's own is taken over: what was applied is not applied again,
// the rows survive, the new migration runs, and the old table is gone.
func TestMigrateTakesOverLegacyTable(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := testdb.Open(t, dsn)
		// What the older build left: its own table, at version 1.
		for _, q := range []string{
			"CREATE TABLE items_migrations (version BIGINT NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)",
			"INSERT INTO items_migrations (version, name, applied_at) VALUES (1, '0001_items', 0)",
			"CREATE TABLE items (id BIGINT PRIMARY KEY, body TEXT NOT NULL)",
			"INSERT INTO items (id, body) VALUES (7, 'kept')",
		} {
			if _, err := db.W.ExecContext(ctx, q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
		}
		m := history("items")
		m.Legacy = sqldb.LegacyTable("items_migrations")
		for range 2 { // the second run finds nothing to do
			if err := db.Migrate(ctx, m); err != nil {
				t.Fatal(err)
			}
		}
		if v, err := db.SchemaVersion(ctx, "items"); err != nil || v != 2 {
			t.Fatalf("SchemaVersion = %d, %v; want 2", v, err)
		}
		var body string
		var note sql.NullString
		if err := db.R.QueryRowContext(ctx, "SELECT body, note FROM items WHERE id = 7").Scan(&body, &note); err != nil || body != "kept" || note.Valid {
			t.Fatalf("row after the upgrade: %q %v, %v", body, note, err)
		}
		var rows int
		if err := db.R.QueryRowContext(ctx, "SELECT count(*) FROM "+sqldb.MigrationsTable).Scan(&rows); err != nil || rows != 2 {
			t.Fatalf("%s holds %d rows (%v), want 2", sqldb.MigrationsTable, rows, err)
		}
		if _, err := db.R.QueryContext(ctx, "SELECT 1 FROM items_migrations"); err == nil {
			t.Fatal("the legacy table is still there")
		}
	})
}

// A legacy version past what this build knows is refused, not taken over.
func TestMigrateLegacyTooNew(t *testing.T) {
	ctx := context.Background()
	db := testdb.Open(t, testdb.SQLite(t))
	if _, err := db.W.ExecContext(ctx, "PRAGMA user_version = 3"); err != nil {
		t.Fatal(err)
	}
	m := history("items")
	m.Legacy = sqldb.LegacyUserVersion
	if err := db.Migrate(ctx, m); !errors.Is(err, sqldb.ErrSchemaTooNew) {
		t.Fatalf("Migrate = %v, want ErrSchemaTooNew", err)
	}
}

// MigrateSQL migrates a SQLite database opened without Open (a file of
// its own, whose older build kept its version in PRAGMA user_version).
func TestMigrateSQLUserVersion(t *testing.T) {
	ctx := context.Background()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "own.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	for _, q := range []string{
		"CREATE TABLE items (id BIGINT PRIMARY KEY, body TEXT NOT NULL)",
		"INSERT INTO items (id, body) VALUES (1, 'kept')",
		"PRAGMA user_version = 1",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	m := history("own")
	m.Legacy = sqldb.LegacyUserVersion
	if err := sqldb.MigrateSQL(ctx, db, sqldb.SQLite, m); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM items WHERE note IS NULL").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows after the upgrade: %d, %v", n, err)
	}
	if err := db.QueryRowContext(ctx, "SELECT MAX(version) FROM "+sqldb.MigrationsTable+" WHERE component = 'own'").Scan(&n); err != nil || n != 2 {
		t.Fatalf("recorded version %d, %v; want 2", n, err)
	}
}
