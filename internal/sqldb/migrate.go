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

// MigrationsTable records the migrations applied to a database: one row
// per (component, version), for every component that keeps tables there.
const MigrationsTable = "snapnode_migrations"

// migrationLock names the advisory lock that serializes migrating
// processes on PostgreSQL; every component takes the same one, as they
// share MigrationsTable.
const migrationLock = "snapnode/migrations"

// Migrations is one component's schema history: SQL files in FS, one
// folder per dialect ("sqlite", "postgres"), named NNNN_what.sql and
// numbered from 1 without gaps. A migration is never edited once released:
// a change of schema is a new file, in both folders.
type Migrations struct {
	// FS holds the dialect folders (an embed.FS, or fs.Sub of one).
	FS fs.FS
	// Component names the component in MigrationsTable ("tasks",
	// "agent"…), so that components sharing a database evolve
	// independently.
	Component string
	// Legacy, when set, reads inside the migrating transaction the
	// version an older build recorded its own way (see LegacyTable and
	// LegacyUserVersion), 0 when none. It is asked only while
	// MigrationsTable has no row for Component, so that a database made
	// by an older build is taken over rather than migrated again.
	Legacy func(ctx context.Context, tx *sql.Tx, d *Dialect) (int, error)
}

// Embedded returns the Migrations in the folder dir of an embedded file
// system (its dialect folders below it), recorded under component. The
// folder is part of the build: a missing one panics, as
// regexp.MustCompile does on a bad literal.
//
//	//go:embed migrations
//	var migrationFiles embed.FS
//
//	func migrations() sqldb.Migrations {
//		return sqldb.Embedded(migrationFiles, "migrations", "agent")
//	}
func Embedded(fsys fs.FS, dir, component string) Migrations {
	sub, err := fs.Sub(fsys, dir)
	if err != nil {
		panic(fmt.Sprintf("sqldb: embedded migrations %s: %v", dir, err))
	}
	return Migrations{FS: sub, Component: component}
}

// LegacyTable returns a Migrations.Legacy for a component whose older
// builds recorded their migrations in a table of their own (version,
// name, applied_at): it reads the last version there and drops the table,
// whose rows MigrationsTable takes over.
func LegacyTable(table string) func(context.Context, *sql.Tx, *Dialect) (int, error) {
	return func(ctx context.Context, tx *sql.Tx, d *Dialect) (int, error) {
		var exists bool
		if err := tx.QueryRowContext(ctx, d.Rebind(d.tableExists), table).Scan(&exists); err != nil {
			return 0, fmt.Errorf("sqldb: look for %s: %w", table, err)
		}
		if !exists {
			return 0, nil
		}
		var v sql.NullInt64
		if err := tx.QueryRowContext(ctx, "SELECT MAX(version) FROM "+table).Scan(&v); err != nil {
			return 0, fmt.Errorf("sqldb: read %s: %w", table, err)
		}
		if _, err := tx.ExecContext(ctx, "DROP TABLE "+table); err != nil {
			return 0, fmt.Errorf("sqldb: drop %s: %w", table, err)
		}
		return int(v.Int64), nil
	}
}

// Replacing returns m taking over, on a database an older build
// migrated, the versions it recorded in its own table (see LegacyTable).
func (m Migrations) Replacing(table string) Migrations {
	m.Legacy = LegacyTable(table)
	return m
}

// LegacyUserVersion is a Migrations.Legacy for a SQLite database whose
// older builds kept the schema version in PRAGMA user_version.
func LegacyUserVersion(ctx context.Context, tx *sql.Tx, d *Dialect) (int, error) {
	if d != SQLite {
		return 0, nil
	}
	var v int
	if err := tx.QueryRowContext(ctx, "PRAGMA user_version").Scan(&v); err != nil {
		return 0, fmt.Errorf("sqldb: read user_version: %w", err)
	}
	return v, nil
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
		return nil, fmt.Errorf("sqldb: %s migrations of %s: %w", m.Component, d.name, err)
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

// Migrate applies the migrations db lacks; see MigrateSQL.
func (db *DB) Migrate(ctx context.Context, m Migrations) error {
	return MigrateSQL(ctx, db.W, db.Dialect, m)
}

// MigrateSQL applies the migrations of m that the database behind w (of
// dialect d) lacks, in one transaction holding the migration lock, and
// records each in MigrationsTable. It serves the components on a DB and
// the databases opened otherwise (the embedded relay's own file). Two
// processes starting at once both succeed: the second waits for the lock
// and then finds nothing to do. A database migrated by a newer build is
// refused (ErrSchemaTooNew) rather than used with a schema this build does
// not know.
func MigrateSQL(ctx context.Context, w *sql.DB, d *Dialect, m Migrations) (err error) {
	all, err := m.load(d)
	if err != nil {
		return err
	}
	tx, err := w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqldb: migrate %s: begin: %w", m.Component, err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := d.Lock(ctx, tx, LockKey(migrationLock)); err != nil {
		return fmt.Errorf("sqldb: migrate %s: lock: %w", m.Component, err)
	}
	if _, err := tx.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+MigrationsTable+` (
	component  TEXT   NOT NULL,
	version    BIGINT NOT NULL,
	name       TEXT   NOT NULL,
	applied_at BIGINT NOT NULL,
	PRIMARY KEY (component, version)
)`); err != nil {
		return fmt.Errorf("sqldb: migrate %s: %s: %w", m.Component, MigrationsTable, err)
	}
	applied, err := appliedVersions(ctx, tx, d, m.Component)
	if err != nil {
		return err
	}
	if len(applied) == 0 && m.Legacy != nil {
		v, err := m.Legacy(ctx, tx, d)
		if err != nil {
			return fmt.Errorf("sqldb: migrate %s: %w", m.Component, err)
		}
		for i := 1; i <= v; i++ {
			name := fmt.Sprintf("%04d_applied_by_an_older_build", i)
			if i <= len(all) {
				name = all[i-1].name
			}
			if err := record(ctx, tx, d, m.Component, i, name); err != nil {
				return err
			}
			applied = append(applied, i)
		}
	}
	if n := len(applied); n > 0 && applied[n-1] > len(all) {
		return fmt.Errorf("sqldb: migrate %s: the database is at schema version %d, this build knows %d: %w", m.Component, applied[n-1], len(all), ErrSchemaTooNew)
	}
	for _, x := range all {
		if slices.Contains(applied, x.version) {
			continue
		}
		if _, err := tx.ExecContext(ctx, x.sql); err != nil {
			return fmt.Errorf("sqldb: migrate %s: %s: %w", m.Component, x.name, err)
		}
		if err := record(ctx, tx, d, m.Component, x.version, x.name); err != nil {
			return err
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqldb: migrate %s: commit: %w", m.Component, err)
	}
	return nil
}

func record(ctx context.Context, tx *sql.Tx, d *Dialect, component string, version int, name string) error {
	if _, err := tx.ExecContext(ctx, d.Rebind("INSERT INTO "+MigrationsTable+" (component, version, name, applied_at) VALUES (?, ?, ?, ?)"),
		component, version, name, time.Now().UnixMicro()); err != nil {
		return fmt.Errorf("sqldb: migrate %s: record %s: %w", component, name, err)
	}
	return nil
}

// SchemaVersion returns the number of the last migration of component
// recorded in MigrationsTable (0 when none is).
func (db *DB) SchemaVersion(ctx context.Context, component string) (int, error) {
	v, err := appliedVersions(ctx, db.R, db.Dialect, component)
	if err != nil || len(v) == 0 {
		return 0, err
	}
	return v[len(v)-1], nil
}

func appliedVersions(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}, d *Dialect, component string) ([]int, error) {
	out, err := Column[int](q.QueryContext(ctx, d.Rebind("SELECT version FROM "+MigrationsTable+" WHERE component = ? ORDER BY version"), component))
	if err != nil {
		return nil, fmt.Errorf("sqldb: read %s: %w", MigrationsTable, err)
	}
	return out, nil
}

// TableExists reports whether the database has the table name (in the
// schema of its search path, on PostgreSQL), for a reader that must not
// migrate the database (a backup's copy).
func (db *DB) TableExists(ctx context.Context, name string) (bool, error) {
	var ok bool
	if err := db.R.QueryRowContext(ctx, db.Dialect.Rebind(db.Dialect.tableExists), name).Scan(&ok); err != nil {
		return false, fmt.Errorf("sqldb: look for %s: %w", name, err)
	}
	return ok, nil
}
