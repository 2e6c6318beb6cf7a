package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	sqlite3 "modernc.org/sqlite/lib"
)

var (
	// ErrNoDatabase: Options.Existing was set and the SQLite file is
	// missing.
	ErrNoDatabase = errors.New("sqldb: no database")
	// ErrClosed: the database was closed.
	ErrClosed = errors.New("database closed")
	// ErrSchemaTooNew: the database was migrated by a newer build; this one
	// refuses to use a schema it does not know.
	ErrSchemaTooNew = errors.New("database schema newer than this build")
)

// Options tune a DB. The zero value is the default.
type Options struct {
	// MaxConns bounds the connections: to PostgreSQL (default 16), or
	// SQLite's read connections (default max(4, GOMAXPROCS)); SQLite has
	// one writer connection besides.
	MaxConns int
	// Synchronous is SQLite's synchronous pragma: "FULL" (the default; a
	// commit is on disk before the write returns), "NORMAL" (a commit
	// survives the process dying but maybe not the machine losing power)
	// or "EXTRA". PostgreSQL ignores it (see its synchronous_commit).
	Synchronous string
	// Existing opens only a database that exists: a SQLite file that is
	// missing gives ErrNoDatabase, and neither it nor its folder is
	// created (for tools that read a node's database: a wrong folder must
	// not look like an empty node).
	Existing bool
	// Logger gets what goes wrong out of any caller's sight (a failed WAL
	// checkpoint); nil discards it.
	Logger *slog.Logger
}

// DB is an open database: its dialect, a pool for writes and a pool for
// reads (the same pool on PostgreSQL), and on SQLite the group committer
// that Write goes through. It is safe for concurrent use; several
// components (the task store, the audit log) share one DB.
type DB struct {
	Dialect *Dialect
	// W takes the writes: use it through Write, or for statements to
	// prepare and use inside Write's transactions. R takes the reads.
	W, R *sql.DB

	commit *committer // nil on PostgreSQL
	// sent counts the statements sent to the database (Statements).
	sent      atomic.Int64
	closeOnce sync.Once
	closeErr  error
}

// Open opens the database named by dsn:
//
//	sqlite:/var/lib/snapnode/snapnode.db   SQLite (the file is created, 0600)
//	/var/lib/snapnode/snapnode.db          SQLite, a bare path
//	postgres://user:pw@host:5432/db?sslmode=verify-full
//	postgresql://…                         PostgreSQL (any pgx connection URL)
//
// It applies no migrations: each component calls Migrate with its own.
func Open(ctx context.Context, dsn string, opts Options) (*DB, error) {
	tg, err := parseDSN(dsn)
	if err != nil {
		return nil, err
	}
	db := &DB{Dialect: tg.dialect}
	switch tg.dialect {
	case SQLite:
		if opts.Existing {
			if _, err := os.Stat(tg.path); errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("%w at %s", ErrNoDatabase, tg.path)
			}
		}
		syncMode, err := sqliteSync(opts)
		if err != nil {
			return nil, err
		}
		if db.W, db.R, err = openSQLite(ctx, tg.path, syncMode, opts, &db.sent); err != nil {
			return nil, err
		}
		db.commit = newCommitter(db.W, db.R, syncMode, opts.Logger)
	case Postgres:
		cfg, err := pgx.ParseConfig(tg.conn) // its errors hide the password
		if err != nil {
			return nil, fmt.Errorf("sqldb: %w", err)
		}
		guardConnections(cfg)
		if cfg.Tracer == nil {
			cfg.Tracer = (*sentCounter)(&db.sent)
		}
		p := OpenPostgres(cfg)
		n := opts.MaxConns
		if n <= 0 {
			n = 16
		}
		p.SetMaxOpenConns(n)
		p.SetMaxIdleConns(n)
		p.SetConnMaxIdleTime(5 * time.Minute)
		if err := p.PingContext(ctx); err != nil {
			_ = p.Close()
			return nil, fmt.Errorf("sqldb: connect to PostgreSQL %s:%d/%s: %w", cfg.Host, cfg.Port, cfg.Database, err)
		}
		db.W, db.R = p, p
	}
	return db, nil
}

// Close stops the group committer after the batch in progress (later
// writes get ErrClosed) and closes the pools. It is safe to call twice.
func (db *DB) Close() error {
	db.closeOnce.Do(func() {
		if db.commit != nil {
			db.commit.stop()
		}
		var errs []error
		if db.R != nil && db.R != db.W {
			errs = append(errs, db.R.Close())
		}
		if db.W != nil {
			errs = append(errs, db.W.Close())
		}
		db.closeErr = errors.Join(errs...)
	})
	return db.closeErr
}

// Write runs op in a write transaction and returns once op's changes are
// committed, or with an error and nothing changed. On SQLite op runs in
// the next group commit: writes waiting at the same moment share one
// transaction and one fsync, each in a savepoint of its own, so one op's
// failure does not undo the others. On PostgreSQL op has a transaction of
// its own. op must not keep tx, and must take the rows it changes with the
// dialect's ForUpdate (or a Lock) where writers could race on PostgreSQL.
func (db *DB) Write(ctx context.Context, op func(context.Context, *sql.Tx) error) error {
	return db.write(ctx, false, op)
}

// WriteNoSync is Write for a write whose commit need not wait for the
// disk: it returns once op's changes are committed, visible to every
// connection and process and safe from a killed process, but before they
// are flushed, so a power cut or an operating system crash may lose them.
// Every later commit of Write, from any process on the database, makes
// them durable too: both databases write their log in commit order and
// flush it up to the commit being made. On SQLite a batch of such writes
// commits with synchronous=NORMAL (a batch that also holds a Write
// commits as Write does); on PostgreSQL op's transaction commits with
// synchronous_commit off.
//
// Use it only for a record that is safe to lose together with everything
// written after it and not yet made durable: typically a record that
// guards later writes to this same database, each of which commits with
// Write.
func (db *DB) WriteNoSync(ctx context.Context, op func(context.Context, *sql.Tx) error) error {
	return db.write(ctx, true, op)
}

func (db *DB) write(ctx context.Context, noSync bool, op func(context.Context, *sql.Tx) error) error {
	if db.commit != nil {
		return db.commit.do(ctx, noSync, op)
	}
	tx, err := db.W.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	// Should op panic (a caller that recovers goes on), the transaction
	// does not stay open holding its locks and a connection; after a
	// commit this does nothing.
	defer func() { _ = tx.Rollback() }()
	if noSync {
		if _, err := tx.ExecContext(ctx, "SET LOCAL synchronous_commit = off"); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("synchronous_commit off: %w", err)
		}
	}
	if err := op(ctx, tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	return nil
}

// GroupCommits reports, on SQLite, how many transactions the committer
// ran and how many writes they carried (0, 0 on PostgreSQL).
func (db *DB) GroupCommits() (batches, writes int64) {
	if db.commit == nil {
		return 0, 0
	}
	return db.commit.batches.Load(), db.commit.writes.Load()
}

// Statements reports how many statements the database was sent since it
// was opened, for tests that pin what a request costs: on SQLite every
// statement run on a connection of either pool (each Exec and Query, the
// PRAGMAs of the committer and its checkpoints, and every BEGIN, COMMIT and
// ROLLBACK); on PostgreSQL every query pgx sent and every statement it
// prepared, each a round trip to the server (BEGIN and COMMIT included).
func (db *DB) Statements() int64 { return db.sent.Load() }

// UnsyncedCommits reports, on SQLite, how many of the committer's
// transactions did not wait for the disk: batches of WriteNoSync alone,
// under a synchronous setting above NORMAL (0 on PostgreSQL).
func (db *DB) UnsyncedCommits() int64 {
	if db.commit == nil {
		return 0
	}
	return db.commit.unsynced.Load()
}

// Checkpoints reports, on SQLite, how many of the WAL checkpoints the
// committer asked for were done and how many failed (0, 0 on PostgreSQL).
func (db *DB) Checkpoints() (done, failed int64) {
	if db.commit == nil {
		return 0, 0
	}
	return db.commit.checkpoints.Load(), db.commit.checkpointErrs.Load()
}

// DiskFull reports whether err is the database's "out of space" error.
func DiskFull(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "53100" // disk_full
	}
	return sqlitePrimary(err) == sqlite3.SQLITE_FULL
}

// Affected returns how many rows a statement changed, from what
// ExecContext returned: n, err := sqldb.Affected(tx.ExecContext(ctx, q, args...)).
// The error is ExecContext's, else RowsAffected's.
func Affected(res sql.Result, err error) (int64, error) {
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

// Rows ranges over the rows of a query, from what QueryContext returned,
// and closes them when the loop ends, however it ends:
//
//	for rows, err := range sqldb.Rows(db.R.QueryContext(ctx, q, args...)) {
//		if err == nil {
//			err = rows.Scan(&v)
//		}
//		if err != nil {
//			return err
//		}
//	}
//
// An error (QueryContext's, or the rows' own after the last) comes alone,
// with nil rows, as the last pair.
func Rows(rows *sql.Rows, err error) iter.Seq2[*sql.Rows, error] {
	return func(yield func(*sql.Rows, error) bool) {
		if err != nil {
			yield(nil, err)
			return
		}
		defer rows.Close()
		for rows.Next() {
			if !yield(rows, nil) {
				return
			}
		}
		if err := rows.Err(); err != nil {
			yield(nil, err)
		}
	}
}

// IntsByKey reads a query of two columns, a key and an integer (a count,
// a version), from what QueryContext returned, into a map, and closes the
// rows:
//
//	n, err := sqldb.IntsByKey[string](db.R.QueryContext(ctx, "SELECT state, COUNT(*) FROM tasks GROUP BY state"))
//
// A key read twice keeps its last integer.
func IntsByKey[K ~string](rows *sql.Rows, err error) (map[K]int64, error) {
	out := make(map[K]int64)
	for rows, err := range Rows(rows, err) {
		var (
			k K
			n int64
		)
		if err == nil {
			err = rows.Scan(&k, &n)
		}
		if err != nil {
			return nil, err
		}
		out[k] = n
	}
	return out, nil
}

// Column reads a query of one column, from what QueryContext returned,
// into a slice in the order of the rows (nil when there are none), and
// closes the rows:
//
//	ids, err := sqldb.Column[string](db.R.QueryContext(ctx, "SELECT id FROM t ORDER BY id"))
func Column[T any](rows *sql.Rows, err error) ([]T, error) {
	var out []T
	for rows, err := range Rows(rows, err) {
		var v T
		if err == nil {
			err = rows.Scan(&v)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}
