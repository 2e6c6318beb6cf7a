package sqldb

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
)

// Dialect is everything that differs between SQLite and PostgreSQL. The
// callers write their SQL once, with ? placeholders, in the subset both
// speak (INSERT … ON CONFLICT, row values, LIMIT); the dialect rewrites the
// placeholders, adds the row lock PostgreSQL needs and takes the migration
// lock. Schemas differ only in column types (a migration folder each).
type Dialect struct {
	// name is "sqlite" or "postgres", the folder of its migrations.
	name string
	// numbered placeholders ($1, $2…) instead of ?.
	numbered bool
	// forUpdate is appended to a SELECT that reads a row before changing
	// it. PostgreSQL runs writers in parallel (READ COMMITTED), so the row
	// is locked until commit; SQLite has a single writer.
	forUpdate string
	// lock takes the transaction-scoped lock key: it serializes the
	// writers of one thing (migrations, a hash chain) across processes.
	lock func(ctx context.Context, tx *sql.Tx, key int64) error
	// tableExists is a query of one ? (a table name) answering whether
	// the table exists.
	tableExists string
}

var (
	// SQLite is the dialect of SQLite files.
	SQLite = &Dialect{
		name: "sqlite",
		// Every write transaction is BEGIN IMMEDIATE (the writer pool's
		// _txlock): it holds the database's write lock, so a second
		// process waits (busy_timeout) and then sees the work done.
		lock:        func(context.Context, *sql.Tx, int64) error { return nil },
		tableExists: "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?",
	}
	// Postgres is the dialect of PostgreSQL servers.
	Postgres = &Dialect{
		name:      "postgres",
		numbered:  true,
		forUpdate: " FOR UPDATE",
		lock: func(ctx context.Context, tx *sql.Tx, key int64) error {
			// An advisory lock, released at commit or rollback.
			_, err := tx.ExecContext(ctx, "SELECT pg_advisory_xact_lock($1)", key)
			return err
		},
		tableExists: "SELECT to_regclass(?) IS NOT NULL",
	}
)

// Name returns "sqlite" or "postgres".
func (d *Dialect) Name() string { return d.name }

// ForUpdate returns what to append to a SELECT that reads rows before
// changing them in the same transaction: " FOR UPDATE" on PostgreSQL,
// nothing on SQLite, whose writer holds the whole database.
func (d *Dialect) ForUpdate() string { return d.forUpdate }

// Lock takes, inside tx, the lock named key until tx ends: PostgreSQL's
// transaction-level advisory lock. On SQLite every write transaction
// already holds the database's write lock and Lock does nothing.
func (d *Dialect) Lock(ctx context.Context, tx *sql.Tx, key int64) error { return d.lock(ctx, tx, key) }

// LockKey derives an advisory lock key from name: the first eight bytes of
// its SHA-256 as a signed big-endian integer, so that snapnode's locks do
// not collide with another application's on the same database.
func LockKey(name string) int64 {
	sum := sha256.Sum256([]byte(name))
	return int64(binary.BigEndian.Uint64(sum[:8]))
}

// Rebind rewrites the ? placeholders of q for the dialect. The SQL given
// has no ? inside literals, which is all this needs.
func (d *Dialect) Rebind(q string) string {
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
	dialect *Dialect
	// path is the SQLite file; conn the PostgreSQL connection string.
	path, conn string
}

// Target returns the dialect of dsn and, for SQLite, the file it names,
// as Open reads them; it opens nothing. Tools that handle a node's files
// (a backup) use it to find the database file.
func Target(dsn string) (d *Dialect, path string, err error) {
	tg, err := parseDSN(dsn)
	if err != nil {
		return nil, "", err
	}
	return tg.dialect, tg.path, nil
}

// parseDSN chooses the dialect of dsn: postgres:// and postgresql:// URLs
// (and nothing else) are PostgreSQL; sqlite:PATH, sqlite://PATH and a bare
// file path are SQLite.
func parseDSN(dsn string) (target, error) {
	lower := strings.ToLower(dsn)
	switch {
	case dsn == "":
		return target{}, fmt.Errorf("sqldb: empty DSN")
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"):
		return target{dialect: Postgres, conn: dsn}, nil
	case strings.HasPrefix(lower, "sqlite:"):
		path := dsn[len("sqlite:"):]
		path = strings.TrimPrefix(path, "//") // sqlite:///abs/path and sqlite://rel/path
		return sqliteTarget(dsn, path)
	}
	// Before the scheme's check, which echoes what precedes "://": in a
	// key=value string that may be a password ("password=a://b").
	if libpqKeywords(dsn) {
		// Not echoed: it may hold a password.
		return target{}, fmt.Errorf("sqldb: the DSN is a PostgreSQL key=value string: give it as a URL, postgres://USER:PASSWORD@HOST:PORT/DBNAME?sslmode=…")
	}
	if i := strings.Index(dsn, "://"); i > 0 && !strings.ContainsAny(dsn[:i], `/\.`) {
		return target{}, fmt.Errorf("sqldb: DSN scheme %q: want sqlite:PATH, a file path, postgres:// or postgresql://", dsn[:i])
	}
	return sqliteTarget(dsn, dsn)
}

// libpqKeywords reports whether dsn starts like PostgreSQL's key=value
// connection string ("host=db dbname=snap …"), which a bare DSN would
// otherwise take for a SQLite file's name (a file named with the
// password).
func libpqKeywords(dsn string) bool {
	key, _, ok := strings.Cut(strings.TrimSpace(dsn), "=")
	if !ok {
		return false
	}
	switch strings.ToLower(strings.TrimSpace(key)) {
	case "host", "hostaddr", "port", "dbname", "user", "password", "passfile", "require_auth", "channel_binding",
		"connect_timeout", "client_encoding", "options", "application_name", "fallback_application_name",
		"keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count", "tcp_user_timeout",
		"replication", "gssencmode", "sslmode", "sslnegotiation", "requiressl", "sslcompression", "sslcert",
		"sslkey", "sslpassword", "sslcertmode", "sslrootcert", "sslcrl", "sslcrldir", "sslsni", "requirepeer",
		"ssl_min_protocol_version", "ssl_max_protocol_version", "krbsrvname", "gsslib", "gssdelegation",
		"service", "target_session_attrs", "load_balance_hosts":
		return true
	}
	return false
}

func sqliteTarget(dsn, path string) (target, error) {
	switch {
	case path == "":
		return target{}, fmt.Errorf("sqldb: DSN %q names no SQLite file", dsn)
	case path == ":memory:" || strings.HasPrefix(path, "file:"):
		return target{}, fmt.Errorf("sqldb: DSN %q: the SQLite store needs a file path (no :memory: or file: URI): it shares the file between a writer and readers", dsn)
	case strings.ContainsAny(path, "?#"):
		return target{}, fmt.Errorf("sqldb: SQLite path %q: ? and # are not allowed in the file name", path)
	}
	return target{dialect: SQLite, path: path}, nil
}
