package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/fstest"
)

func TestParseDSN(t *testing.T) {
	for _, c := range []struct {
		dsn, dialect, path string
	}{
		{"sqlite:/var/lib/snapnode/tasks.db", "sqlite", "/var/lib/snapnode/tasks.db"},
		{"sqlite:///var/lib/snapnode/tasks.db", "sqlite", "/var/lib/snapnode/tasks.db"},
		{"sqlite:tasks.db", "sqlite", "tasks.db"},
		{"SQLite:data/tasks.db", "sqlite", "data/tasks.db"},
		{"/var/lib/snapnode/tasks.db", "sqlite", "/var/lib/snapnode/tasks.db"},
		{"./tasks.db", "sqlite", "./tasks.db"},
		{"tasks.db", "sqlite", "tasks.db"},
		{"dir.with.dots/a://b", "sqlite", "dir.with.dots/a://b"},
		{"postgres://u:pw@db.example:5432/snap?sslmode=verify-full", "postgres", ""},
		{"postgresql://u@127.0.0.1/snap", "postgres", ""},
		{"POSTGRES://u@127.0.0.1/snap", "postgres", ""},
	} {
		tg, err := parseDSN(c.dsn)
		if err != nil {
			t.Errorf("parseDSN(%q): %v", c.dsn, err)
			continue
		}
		if tg.dialect.name != c.dialect || tg.path != c.path {
			t.Errorf("parseDSN(%q) = %s %q, want %s %q", c.dsn, tg.dialect.name, tg.path, c.dialect, c.path)
		}
		if c.dialect == "postgres" && tg.conn != c.dsn {
			t.Errorf("parseDSN(%q): connection string %q", c.dsn, tg.conn)
		}
	}
	for _, dsn := range []string{"", "sqlite:", "sqlite://", "sqlite::memory:", ":memory:", "file:x.db?mode=ro", "x.db?_pragma=x", "mysql://u@h/db", "pg://h/db"} {
		if _, err := parseDSN(dsn); err == nil {
			t.Errorf("parseDSN(%q) accepted", dsn)
		}
	}
	// PostgreSQL's key=value connection strings are no file names: taken
	// for one, the node made a SQLite file whose name held the password,
	// and printed it in its errors.
	for _, dsn := range []string{"host=db user=snap password=secret-pw dbname=snap", "dbname=snap", "  Host=db port=5432", "user=snap sslmode=disable",
		// A password holding "://" met the scheme's check first, which
		// echoes what precedes it; libpq has more keywords than the
		// common ones, any of which may come first.
		"user=snap password=secret-pw://x host=db", "target_session_attrs=any host=db password=secret-pw dbname=snap",
		"sslrootcert=root.crt host=db password=secret-pw"} {
		_, err := parseDSN(dsn)
		if err == nil || !strings.Contains(err.Error(), "key=value") {
			t.Errorf("parseDSN(%q) = %v; want it refused, pointing to a postgres:// URL", dsn, err)
		} else if strings.Contains(err.Error(), "secret-pw") {
			t.Errorf("parseDSN's error shows the password: %v", err)
		}
	}
	for _, dsn := range []string{"data/a=b.db", "tasks-user=1.db"} { // an = in a file name is a file name
		if tg, err := parseDSN(dsn); err != nil || tg.dialect != SQLite {
			t.Errorf("parseDSN(%q) = %v, %v; want a SQLite file", dsn, tg.dialect, err)
		}
	}
	if _, err := Open(context.Background(), "postgres://u:secret-pw@127.0.0.1:1/db?connect_timeout=x", Options{}); err == nil {
		t.Fatal("bad connect_timeout accepted")
	} else if strings.Contains(err.Error(), "secret-pw") {
		t.Fatalf("error shows the password: %v", err)
	}
}

func TestRebind(t *testing.T) {
	q := "SELECT a FROM t WHERE b = ? AND c IN (?, ?) LIMIT ?"
	if got := SQLite.Rebind(q); got != q {
		t.Fatalf("sqlite rebind changed the query: %s", got)
	}
	if got, want := Postgres.Rebind(q), "SELECT a FROM t WHERE b = $1 AND c IN ($2, $3) LIMIT $4"; got != want {
		t.Fatalf("postgres rebind = %s, want %s", got, want)
	}
}

// Lock keys are stable across builds: processes of two builds sharing a
// database serialize on the same key.
func TestLockKey(t *testing.T) {
	if got, want := LockKey("snapnode/tasks/sqlstore"), int64(-1179689125912968178); got != want {
		t.Fatalf("LockKey = %d, want %d", got, want)
	}
	if LockKey("snapnode/audit") == LockKey("snapnode/tasks/sqlstore") {
		t.Fatal("two names, one key")
	}
}

func testMigrations(files map[string]string) Migrations {
	fsys := fstest.MapFS{}
	for name, sql := range files {
		fsys[name] = &fstest.MapFile{Data: []byte(sql)}
	}
	return Migrations{FS: fsys, Component: "t"}
}

func TestMigrationNames(t *testing.T) {
	for _, c := range []struct {
		name  string
		files map[string]string
		want  []string
	}{
		{"ok", map[string]string{"sqlite/0002_b.sql": "", "sqlite/0001_a.sql": ""}, []string{"0001_a", "0002_b"}},
		{"gap", map[string]string{"sqlite/0001_a.sql": "", "sqlite/0003_c.sql": ""}, nil},
		{"zero", map[string]string{"sqlite/0000_a.sql": ""}, nil},
		{"no number", map[string]string{"sqlite/a.sql": ""}, nil},
		{"not sql", map[string]string{"sqlite/0001_a.txt": ""}, nil},
		{"no folder", map[string]string{"postgres/0001_a.sql": ""}, nil},
	} {
		got, err := testMigrations(c.files).Names(SQLite)
		if c.want == nil {
			if err == nil {
				t.Errorf("%s: Names = %v, want an error", c.name, got)
			}
			continue
		}
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: Names = %v, %v; want %v", c.name, got, err, c.want)
		}
	}
}

// Two components migrate one database independently; concurrent opens
// apply each migration once; a newer schema is refused.
func TestMigrate(t *testing.T) {
	ctx := context.Background()
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "x.db")
	a := testMigrations(map[string]string{"sqlite/0001_a.sql": "CREATE TABLE a (x INTEGER)"})
	b := testMigrations(map[string]string{"sqlite/0001_b.sql": "CREATE TABLE b (x INTEGER)", "sqlite/0002_b2.sql": "ALTER TABLE b ADD COLUMN y INTEGER"})
	b.Component = "b"

	const n = 4
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			db, err := Open(ctx, dsn, Options{})
			if err != nil {
				errs[i] = err
				return
			}
			defer db.Close()
			errs[i] = errors.Join(db.Migrate(ctx, a), db.Migrate(ctx, b))
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("open %d: %v", i, err)
		}
	}
	db, err := Open(ctx, dsn, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if v, err := db.SchemaVersion(ctx, "t"); err != nil || v != 1 {
		t.Fatalf("a at version %d, %v; want 1", v, err)
	}
	if v, err := db.SchemaVersion(ctx, "b"); err != nil || v != 2 {
		t.Fatalf("b at version %d, %v; want 2", v, err)
	}
	if err := db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, "INSERT INTO b (x, y) VALUES (1, 2)")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	older := testMigrations(map[string]string{"sqlite/0001_b.sql": "CREATE TABLE b (x INTEGER)"})
	older.Component = "b"
	if err := db.Migrate(ctx, older); !errors.Is(err, ErrSchemaTooNew) {
		t.Fatalf("older build: err = %v, want ErrSchemaTooNew", err)
	}
	// A failing migration leaves nothing behind.
	bad := testMigrations(map[string]string{"sqlite/0001_a.sql": "CREATE TABLE a (x INTEGER)", "sqlite/0002_bad.sql": "CREATE TABLE c (x INTEGER); NOT SQL"})
	if err := db.Migrate(ctx, bad); err == nil {
		t.Fatal("bad migration applied")
	}
	if v, _ := db.SchemaVersion(ctx, "t"); v != 1 {
		t.Fatalf("after a failed migration: version %d", v)
	}
	var tables int
	if err := db.R.QueryRowContext(ctx, "SELECT count(*) FROM sqlite_master WHERE name = 'c'").Scan(&tables); err != nil || tables != 0 {
		t.Fatalf("table c left behind (%d, %v)", tables, err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, func(context.Context, *sql.Tx) error { return nil }); !errors.Is(err, ErrClosed) {
		t.Fatalf("Write after Close: %v, want ErrClosed", err)
	}
}

// sqliteWith opens a new SQLite database, closed when the test ends, and
// runs setup in it.
func sqliteWith(t *testing.T, setup string) *DB {
	t.Helper()
	db, err := Open(t.Context(), "sqlite:"+filepath.Join(t.TempDir(), "x.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	err = db.Write(t.Context(), func(ctx context.Context, tx *sql.Tx) error {
		_, err := tx.ExecContext(ctx, setup)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

func TestAffected(t *testing.T) {
	ctx := context.Background()
	db := sqliteWith(t, "CREATE TABLE t (x INTEGER)")
	err := db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if n, err := Affected(tx.ExecContext(ctx, "INSERT INTO t (x) VALUES (1), (2), (3)")); err != nil || n != 3 {
			t.Errorf("insert of three rows: Affected = %d, %v; want 3, nil", n, err)
		}
		if n, err := Affected(tx.ExecContext(ctx, "DELETE FROM t WHERE x > 5")); err != nil || n != 0 {
			t.Errorf("delete of no row: Affected = %d, %v; want 0, nil", n, err)
		}
		// The statement's own error comes back as it is.
		_, want := tx.ExecContext(ctx, "DELETE FROM missing")
		if n, err := Affected(tx.ExecContext(ctx, "DELETE FROM missing")); err == nil || err.Error() != want.Error() || n != 0 {
			t.Errorf("failed statement: Affected = %d, %v; want 0, %v", n, err, want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestRows(t *testing.T) {
	ctx := context.Background()
	db := sqliteWith(t, "CREATE TABLE t (x INTEGER); INSERT INTO t (x) VALUES (1), (2), (3)")
	read := func(q string, stopAt int) (got []int, errs []error) {
		for rows, err := range Rows(db.R.QueryContext(ctx, q)) {
			if err != nil {
				if rows != nil {
					t.Errorf("%s: an error came with rows", q)
				}
				errs = append(errs, err)
				continue
			}
			var x int
			if err := rows.Scan(&x); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			if got = append(got, x); len(got) == stopAt {
				break
			}
		}
		return got, errs
	}
	if got, errs := read("SELECT x FROM t ORDER BY x", 0); !slices.Equal(got, []int{1, 2, 3}) || errs != nil {
		t.Errorf("every row: got %v, errors %v; want [1 2 3] and none", got, errs)
	}
	if got, errs := read("SELECT x FROM missing", 0); got != nil || len(errs) != 1 || !strings.Contains(errs[0].Error(), "missing") {
		t.Errorf("a failed query: got %v, errors %v; want one error naming the table", got, errs)
	}
	// A loop left early closes the rows: the read connection is free again.
	if got, _ := read("SELECT x FROM t ORDER BY x", 1); !slices.Equal(got, []int{1}) {
		t.Errorf("a loop left after one row: got %v", got)
	}
	if n := db.R.Stats().InUse; n != 0 {
		t.Errorf("%d read connections still in use after the loops ended", n)
	}
}

func TestColumn(t *testing.T) {
	db := sqliteWith(t, "CREATE TABLE t (s TEXT, x INTEGER); INSERT INTO t VALUES ('a', 1), ('b', 2), ('c', 3)")
	got, err := Column[string](db.R.QueryContext(t.Context(), "SELECT s FROM t ORDER BY x"))
	if err != nil || !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Errorf("Column = %v, %v; want [a b c]", got, err)
	}
	if got, err := Column[int](db.R.QueryContext(t.Context(), "SELECT x FROM t WHERE x > 9")); err != nil || got != nil {
		t.Errorf("no row: %v, %v; want nil and no error", got, err)
	}
	if got, err := Column[int](db.R.QueryContext(t.Context(), "SELECT s, x FROM t")); err == nil {
		t.Errorf("two columns: %v, want an error", got)
	}
	if got, err := Column[int](db.R.QueryContext(t.Context(), "SELECT x FROM missing")); err == nil {
		t.Errorf("a failed query: %v, want its error", got)
	}
	if n := db.R.Stats().InUse; n != 0 {
		t.Errorf("%d read connections still in use", n)
	}
}

func TestIntsByKey(t *testing.T) {
	type state string
	db := sqliteWith(t, "CREATE TABLE t (s TEXT, x INTEGER); INSERT INTO t VALUES ('a', 1), ('b', 2), ('a', 3)")
	got, err := IntsByKey[state](db.R.QueryContext(t.Context(), "SELECT s, SUM(x) FROM t GROUP BY s"))
	if err != nil || len(got) != 2 || got["a"] != 4 || got["b"] != 2 {
		t.Errorf("IntsByKey = %v, %v; want a:4 b:2", got, err)
	}
	if got, err := IntsByKey[state](db.R.QueryContext(t.Context(), "SELECT s FROM t")); err == nil {
		t.Errorf("one column: %v, want an error", got)
	}
	if got, err := IntsByKey[state](db.R.QueryContext(t.Context(), "SELECT s, x FROM missing")); err == nil {
		t.Errorf("a failed query: %v, want its error", got)
	}
	if n := db.R.Stats().InUse; n != 0 {
		t.Errorf("%d read connections still in use", n)
	}
}
