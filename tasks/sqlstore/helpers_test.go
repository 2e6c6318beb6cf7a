package sqlstore

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

// postgresEnv names the variable holding the PostgreSQL DSN of the tests.
// .ci/run starts a private cluster and sets it.
const postgresEnv = "SNAPNODE_TEST_POSTGRES"

// postgresDSN returns the test server's DSN. Without one the test skips,
// unless CI is set: CI must never skip the PostgreSQL tests silently.
func postgresDSN(tb testing.TB) string {
	tb.Helper()
	dsn := os.Getenv(postgresEnv)
	if dsn == "" {
		if os.Getenv("CI") != "" {
			tb.Fatalf("CI must provide PostgreSQL: %s is not set (.ci/run starts a private cluster and sets it)", postgresEnv)
		}
		tb.Skipf("PostgreSQL tests skipped: set %s=postgres://USER@HOST:PORT/DB?sslmode=disable to run them (.ci/run does)", postgresEnv)
	}
	return dsn
}

// sqliteDSN returns the DSN of a new database file in a temporary folder.
func sqliteDSN(tb testing.TB) string {
	return "sqlite:" + filepath.Join(tb.TempDir(), "tasks.db")
}

// postgresSchemaDSN returns a DSN whose tables live in a new, empty schema
// of the test database, dropped when the test ends: tests do not see each
// other's rows and need no database of their own.
func postgresSchemaDSN(tb testing.TB) string {
	tb.Helper()
	base := postgresDSN(tb)
	cfg, err := pgx.ParseConfig(base)
	if err != nil {
		tb.Fatalf("%s: %v", postgresEnv, err)
	}
	admin := sqldb.OpenPostgres(cfg)
	tb.Cleanup(func() { _ = admin.Close() })
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "sqlstore_test_" + hex.EncodeToString(b[:])
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
		tb.Fatalf("%s: %v", postgresEnv, err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// open opens dsn for the test and closes it when the test ends.
func open(tb testing.TB, dsn string, opts Options) *Store {
	tb.Helper()
	s, err := OpenOptions(context.Background(), dsn, opts)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

// dialects runs fn once per dialect, each with a DSN of a fresh database.
// The PostgreSQL run skips (or fails in CI) as postgresDSN says.
func dialects(t *testing.T, fn func(t *testing.T, dsn string)) {
	t.Run("sqlite", func(t *testing.T) { fn(t, sqliteDSN(t)) })
	t.Run("postgres", func(t *testing.T) { fn(t, postgresSchemaDSN(t)) })
}
