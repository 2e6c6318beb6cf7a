package sqldb

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Migrations is one component's schema history: SQL files in FS, one
// folder per dialect ("sqlite", "postgres"), named NNNN_what.sql and
// numbered from 1 without gaps. A migration is never edited once released:
// a change of schema is a new file, in both folders.
type Migrations struct {
	// FS holds the dialect folders (an embed.FS, or fs.Sub of one).
	FS fs.FS
	// Table records the migrations applied (e.g. "schema_migrations").
	// Each component has its own, so that components sharing a database
	// evolve independently.
	Table string
	// Lock names the advisory lock that serializes migrating processes on
	// PostgreSQL (LockKey(Lock)).
	Lock string
}

// Embedded returns the Migrations in the folder dir of an embedded file
// system (its dialect folders below it), recorded in table and serialized
// by lock. The folder is part of the build: a missing one panics, as
// regexp.MustCompile does on a bad literal.
//
//	//go:embed migrations
//	var migrationFiles embed.FS
//
//	func migrations() sqldb.Migrations {
//		return sqldb.Embedded(migrationFiles, "migrations", "agent_migrations", "snapnode/agent")
//	}
func Embedded(fsys fs.FS, dir, table, lock string) Migrations {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(fmt.Sprintf("sqldb: embedded migrations %s: %v", dir, err))
	}
	return Migrations{FS: sub, Table: table, Lock: lock}
}

type migration struct {
	version int
	name    string
	sql     string
}

// Names returns the names of the migrations for d, in order. It fails if
// the files are misnamed or numbered with a gap.
func (m Migrations) Names(d *Dialect) ([]string, error) {
	all, err := m.load(d)
	if err != nil {
		return nil, err
	}
	out := make([]string, len(all))
	for i, x := range all {
		out[i] = x.name
	}
	return out, nil
}

func (m Migrations) load(d *Dialect) ([]migration, error) {
	dir := d.name
	entries, err := fs.ReadDir(m.FS, dir)
	if err != nil {
		return nil, fmt.Errorf("sqldb: %s migrations of %s: %w", m.Table, d.name, err)
	}
	var out []migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		if !ok || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("sqldb: migration %s/%s: want NNNN_name.sql", dir, name)
		}
		v, err := strconv.Atoi(num)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("sqldb: migration %s/%s: bad number %q", dir, name, num)
		}
		b, err := fs.ReadFile(m.FS, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("sqldb: migration %s/%s: %w", dir, name, err)
		}
		out = append(out, migration{version: v, name: strings.TrimSuffix(name, ".sql"), sql: string(b)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i, x := range out {
		if x.version != i+1 {
			return nil, fmt.Errorf("sqldb: migrations of %s: %s where version %d was expected", d.name, x.name, i+1)
		}
	}
	return out, nil
}

// Migrate applies the migrations db lacks, in one transaction holding the
// lock of m, and records each in m.Table. Two processes starting at once
// both succeed: the second waits for the lock and then finds nothing to
// do. A database migrated by a newer build is refused (ErrSchemaTooNew)
// rather than used with a schema this build does not know.
func (db *DB) Migrate(ctx context.Context, m Migrations) (err error) {
	all, err := m.load(db.Dialect)
	if err != nil {
		return err
	}
	tx, err := db.W.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqldb: migrate %s: begin: %w", m.Table, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := db.Dialect.Lock(ctx, tx, LockKey(m.Lock)); err != nil {
		return fmt.Errorf("sqldb: migrate %s: lock: %w", m.Table, err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+m.Table+` (
	version    BIGINT NOT NULL PRIMARY KEY,
	name       TEXT   NOT NULL,
	applied_at BIGINT NOT NULL
)`); err != nil {
		return fmt.Errorf("sqldb: migrate: %s: %w", m.Table, err)
	}
	applied, err := appliedVersions(ctx, tx, m.Table)
	if err != nil {
		return err
	}
	if n := len(applied); n > 0 && applied[n-1] > len(all) {
		return fmt.Errorf("sqldb: migrate %s: the database is at schema version %d, this build knows %d: %w", m.Table, applied[n-1], len(all), ErrSchemaTooNew)
	}
	for _, x := range all {
		if slices.Contains(applied, x.version) {
			continue
		}
		if _, err := tx.ExecContext(ctx, x.sql); err != nil {
			return fmt.Errorf("sqldb: migrate %s: %s: %w", m.Table, x.name, err)
		}
		if _, err := tx.ExecContext(ctx, db.Dialect.Rebind("INSERT INTO "+m.Table+" (version, name, applied_at) VALUES (?, ?, ?)"),
			x.version, x.name, time.Now().UnixMicro()); err != nil {
			return fmt.Errorf("sqldb: migrate %s: record %s: %w", m.Table, x.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqldb: migrate %s: commit: %w", m.Table, err)
	}
	return nil
}

// SchemaVersion returns the number of the last migration recorded in
// table (0 when none is).
func (db *DB) SchemaVersion(ctx context.Context, table string) (int, error) {
	v, err := appliedVersions(ctx, db.R, table)
	if err != nil || len(v) == 0 {
		return 0, err
	}
	return v[len(v)-1], nil
}

func appliedVersions(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, table string) ([]int, error) {
	rows, err := q.QueryContext(ctx, "SELECT version FROM "+table+" ORDER BY version")
	if err != nil {
		return nil, fmt.Errorf("sqldb: read %s: %w", table, err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("sqldb: read %s: %w", table, err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqldb: read %s: %w", table, err)
	}
	return out, nil
}
