package testdb

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/snapnode/snapnode/internal/sqldb"
)

// PostgresEnv names the variable holding the PostgreSQL DSN of the tests.
const PostgresEnv = "SNAPNODE_TEST_POSTGRES"

// PostgresDSN returns the test server's DSN, or skips (fails under CI).
func PostgresDSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv(PostgresEnv)
	if dsn == "" {
		if os.Getenv("CI") != "" {
			tb.Fatalf("CI must provide PostgreSQL: %s is not set (.ci/run starts a private cluster and sets it)", PostgresEnv)
		}
		tb.Skipf("PostgreSQL tests skipped: set %s=postgres://USER@HOST:PORT/DB?sslmode=disable to run them (.ci/run does)", PostgresEnv)
	}
	return dsn
}

// SQLite returns the DSN of a new database file in a temporary folder.
func SQLite(tb testing.TB) string {
	return "sqlite:" + filepath.Join(tb.TempDir(), "snapnode.db")
}

// Postgres returns a DSN whose tables live in a new, empty schema of the
// test database, dropped when the test ends: tests do not see each other's
// rows and need no database of their own.
func Postgres(tb testing.TB) string {
	tb.Helper()
	base := PostgresDSN(tb)
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		tb.Fatalf("%s: %v", PostgresEnv, err)
	}
	admin := sqldb.OpenPostgres(cfg)
	tb.Cleanup(func() { _ = admin.Close() })
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "snapnode_test_" + hex.EncodeToString(b[:])
	ctx := context.Background()
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		tb.Fatalf("create schema: %v", err)
	}
	tb.Cleanup(func() {
		if _, err := admin.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("%s: %v", PostgresEnv, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// Each runs fn once per dialect, as subtests "sqlite" and "postgres", each
// with the DSN of a fresh database.
func Each(t *testing.T, fn func(t *testing.T, dsn string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, SQLite(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, Postgres(t)) })
}

// Open opens the database of dsn with the default options, closed when
// the test ends.
func Open(tb testing.TB, dsn string) *sqldb.DB {
	tb.Helper()
	db, err := sqldb.Open(context.Background(), dsn, sqldb.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	return db
}
