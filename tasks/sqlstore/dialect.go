package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
)

// dialect is everything that differs between SQLite and PostgreSQL. The
// store writes its SQL once, with ? placeholders, in the subset both speak
// (INSERT … ON CONFLICT, row values, LIMIT); the dialect rewrites the
// placeholders, adds the row lock PostgreSQL needs and takes the migration
// lock. The schemas differ only in column types (migrations/<name>/).
type dialect struct {
	// name is "sqlite" or "postgres", the folder of its migrations.
	name string
	// numbered placeholders ($1, $2…) instead of ?.
	numbered bool
	// forUpdate is appended to the SELECT that reads a task before
	// changing it. PostgreSQL runs writers in parallel (READ COMMITTED),
	// so the row is locked until commit; SQLite has a single writer.
	forUpdate string
	// lockMigrations serializes migrations across processes; tx is the
	// transaction that applies them.
	lockMigrations func(ctx context.Context, tx *sql.Tx) error
}

// migrationLockKey is the PostgreSQL advisory lock held while migrating:
// the first eight bytes of SHA-256("snapnode/tasks/sqlstore") as a signed
// big-endian integer, so that it does not collide with another
// application's lock on the same database (a test checks the derivation).
const migrationLockKey int64 = -1179689125912968178

var (
	sqliteDialect = &dialect{
		name: "sqlite",
		// Migrations run in a BEGIN IMMEDIATE transaction (the writer
		// pool's _txlock): it takes the database's write lock, so a second
		// process waits (busy_timeout) and then sees the work done.
		lockMigrations: func(context.Context, *sql.Tx) error { return nil },
	}
	postgresDialect = &dialect{
		name:      "postgres",
		numbered:  true,
		forUpdate: " FOR UPDATE",
		lockMigrations: func(ctx context.Context, tx *sql.Tx) error {
			// Released at commit or rollback.
			_, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", migrationLockKey)
			return err
		},
	}
)

// rebind rewrites the ? placeholders of q for the dialect. The store's SQL
// has no ? inside literals, which is all this needs.
func (d *dialect) rebind(q string) string {
	if !d.numbered || !strings.Contains(q, "?") {
		return q
	}
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] != '?' {
			b.WriteByte(q[i])
			continue
		}
		n++
		b.WriteByte('$')
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

// target is a parsed DSN.
type target struct {
	dialect *dialect
	// path is the SQLite file; conn the PostgreSQL connection string.
	path, conn string
}

// parseDSN chooses the dialect of dsn: postgres:// and postgresql:// URLs
// (and nothing else) are PostgreSQL; sqlite:PATH, sqlite://PATH and a bare
// file path are SQLite.
func parseDSN(dsn string) (target, error) {
	lower := strings.ToLower(dsn)
	switch {
	case dsn == "":
		return target{}, fmt.Errorf("sqlstore: empty DSN")
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		return target{dialect: postgresDialect, conn: dsn}, nil
	case strings.HasPrefix(lower, "sqlite:"):
		path := dsn[len("sqlite:"):]
		path = strings.TrimPrefix(path, "//") // sqlite:///abs/path and sqlite://rel/path
		return sqliteTarget(dsn, path)
	}
	if i := strings.Index(dsn, "://"); i > 0 && !strings.ContainsAny(dsn[:i], `/\.`) {
		return target{}, fmt.Errorf("sqlstore: DSN scheme %q: want sqlite:PATH, a file path, postgres:// or postgresql://", dsn[:i])
	}
	return sqliteTarget(dsn, dsn)
}

func sqliteTarget(dsn, path string) (target, error) {
	switch {
	case path == "":
		return target{}, fmt.Errorf("sqlstore: DSN %q names no SQLite file", dsn)
	case path == ":memory:" || strings.HasPrefix(path, "file:"):
		return target{}, fmt.Errorf("sqlstore: DSN %q: the SQLite store needs a file path (no :memory: or file: URI): it shares the file between a writer and readers", dsn)
	case strings.ContainsAny(path, "?#"):
		return target{}, fmt.Errorf("sqlstore: SQLite path %q: ? and # are not allowed in the file name", path)
	}
	return target{dialect: sqliteDialect, path: path}, nil
}
