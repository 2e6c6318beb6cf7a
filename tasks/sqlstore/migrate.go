package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Migrations are SQL files embedded in the binary, one folder per dialect,
// named NNNN_what.sql and numbered from 1 without gaps. A migration is
// never edited once released: a change of schema is a new file, in both
// folders.
//
//go:embed migrations
var migrationFiles embed.FS

type migration struct {
	version int
	name    string
	sql     string
}

// migrations returns the migrations of dialect d in order.
func migrations(d *dialect) ([]migration, error) {
	dir := path.Join("migrations", d.name)
	entries, err := fs.ReadDir(migrationFiles, dir)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: migrations of %s: %w", d.name, err)
	}
	var out []migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		if !ok || !strings.HasSuffix(name, ".sql") {
			return nil, fmt.Errorf("sqlstore: migration %s/%s: want NNNN_name.sql", dir, name)
		}
		v, err := strconv.Atoi(num)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("sqlstore: migration %s/%s: bad number %q", dir, name, num)
		}
		b, err := fs.ReadFile(migrationFiles, path.Join(dir, name))
		if err != nil {
			return nil, fmt.Errorf("sqlstore: migration %s/%s: %w", dir, name, err)
		}
		out = append(out, migration{version: v, name: strings.TrimSuffix(name, ".sql"), sql: string(b)})
	}
	slices.SortFunc(out, func(a, b migration) int { return a.version - b.version })
	for i, m := range out {
		if m.version != i+1 {
			return nil, fmt.Errorf("sqlstore: migrations of %s: %s where version %d was expected", d.name, m.name, i+1)
		}
	}
	return out, nil
}

const createMigrationsTable = `CREATE TABLE IF NOT EXISTS schema_migrations (
	version    BIGINT NOT NULL PRIMARY KEY,
	name       TEXT   NOT NULL,
	applied_at BIGINT NOT NULL
)`

// migrate applies the migrations db lacks, in one transaction holding the
// dialect's migration lock, and records each in schema_migrations. Two
// processes starting at once both succeed: the second waits for the lock
// and then finds nothing to do. A database migrated by a newer build is
// refused rather than used with a schema this build does not know.
func migrate(ctx context.Context, db *sql.DB, d *dialect) (err error) {
	all, err := migrations(d)
	if err != nil {
		return err
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlstore: migrate: begin: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	if err := d.lockMigrations(ctx, tx); err != nil {
		return fmt.Errorf("sqlstore: migrate: lock: %w", err)
	}
	if _, err := tx.ExecContext(ctx, createMigrationsTable); err != nil {
		return fmt.Errorf("sqlstore: migrate: schema_migrations: %w", err)
	}
	applied, err := appliedVersions(ctx, tx)
	if err != nil {
		return err
	}
	if n := len(applied); n > 0 && applied[n-1] > len(all) {
		return fmt.Errorf("sqlstore: migrate: the database is at schema version %d, this build knows %d: %w", applied[n-1], len(all), ErrSchemaTooNew)
	}
	for _, m := range all {
		if slices.Contains(applied, m.version) {
			continue
		}
		if _, err := tx.ExecContext(ctx, m.sql); err != nil {
			return fmt.Errorf("sqlstore: migrate: %s: %w", m.name, err)
		}
		if _, err := tx.ExecContext(ctx, d.rebind("INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)"),
			m.version, m.name, time.Now().UnixMicro()); err != nil {
			return fmt.Errorf("sqlstore: migrate: record %s: %w", m.name, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlstore: migrate: commit: %w", err)
	}
	return nil
}

func appliedVersions(ctx context.Context, q interface {
	QueryContext(context.Context, string, ...any) (*sql.Rows, error)
}) ([]int, error) {
	rows, err := q.QueryContext(ctx, "SELECT version FROM schema_migrations ORDER BY version")
	if err != nil {
		return nil, fmt.Errorf("sqlstore: read schema_migrations: %w", err)
	}
	defer rows.Close()
	var out []int
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			return nil, fmt.Errorf("sqlstore: read schema_migrations: %w", err)
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlstore: read schema_migrations: %w", err)
	}
	return out, nil
}
