package sqlstore

import (
	"context"
	"testing"

	"github.com/snapnode/snapnode/internal/testdb"
)

// postgresDSN, sqliteDSN and postgresSchemaDSN name the test databases
// (see internal/testdb).
var (
	postgresDSN       = testdb.PostgresDSN
	sqliteDSN         = testdb.SQLite
	postgresSchemaDSN = testdb.Postgres
)

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
// The PostgreSQL run skips (or fails in CI) as testdb.PostgresDSN says.
func dialects(t *testing.T, fn func(t *testing.T, dsn string)) { testdb.Each(t, fn) }
