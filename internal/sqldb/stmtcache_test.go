package sqldb

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"testing"
)

// cacheConn returns one connection of a fresh database opened with
// OpenSQLite, and a function that reads its cache: the statements kept
// and how many were compiled for it.
func cacheConn(t *testing.T) (*sql.Conn, func() (kept, compiled int)) {
	t.Helper()
	db := OpenSQLite("file:" + filepath.Join(t.TempDir(), "cache.db"))
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	if _, err := conn.ExecContext(context.Background(), "CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT); CREATE TABLE u (k INTEGER)"); err != nil {
		t.Fatal(err)
	}
	return conn, func() (kept, compiled int) {
		if err := conn.Raw(func(dc any) error {
			c := dc.(*cachingConn)
			kept, compiled = len(c.stmts), c.compiled
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		return kept, compiled
	}
}

// TestStmtCacheCompilesOnce: a statement run again is not compiled again,
// and each run binds its own arguments.
func TestStmtCacheCompilesOnce(t *testing.T) {
	ctx := context.Background()
	conn, cache := cacheConn(t)
	_, before := cache()
	for i := range 50 {
		if _, err := conn.ExecContext(ctx, "INSERT INTO t (k, v) VALUES (?, ?)", i, fmt.Sprint("v", i)); err != nil {
			t.Fatal(err)
		}
		var v string
		if err := conn.QueryRowContext(ctx, "SELECT v FROM t WHERE k = ?", i).Scan(&v); err != nil || v != fmt.Sprint("v", i) {
			t.Fatalf("row %d = %q, %v", i, v, err)
		}
	}
	if _, compiled := cache(); compiled-before != 2 {
		t.Errorf("compiled %d statements for 2 distinct ones run 50 times each", compiled-before)
	}
}

// TestStmtCacheBusyStatement: a statement whose rows are open runs again,
// uncached, with the right rows for both.
func TestStmtCacheBusyStatement(t *testing.T) {
	ctx := context.Background()
	conn, _ := cacheConn(t)
	for i := range 3 {
		conn.ExecContext(ctx, "INSERT INTO t (k, v) VALUES (?, ?)", i, fmt.Sprint("v", i))
	}
	const q = "SELECT k FROM t WHERE k >= ? ORDER BY k"
	outer, err := conn.QueryContext(ctx, q, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for outer.Next() {
		var k int
		outer.Scan(&k)
		inner, err := conn.QueryContext(ctx, q, k)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for inner.Next() {
			n++
		}
		inner.Close()
		got = append(got, fmt.Sprintf("%d:%d", k, n))
	}
	outer.Close()
	if want := "[0:3 1:2 2:1]"; fmt.Sprint(got) != want {
		t.Errorf("nested runs of one statement gave %v; want %s", got, want)
	}
}

// TestStmtCacheBounded: distinct statements past maxCachedStmts empty the
// cache, also while rows of one of them are open (closed with them).
func TestStmtCacheBounded(t *testing.T) {
	ctx := context.Background()
	conn, cache := cacheConn(t)
	conn.ExecContext(ctx, "INSERT INTO t (k, v) VALUES (1, 'a'), (2, 'b')")
	open, err := conn.QueryContext(ctx, "SELECT v FROM t ORDER BY k")
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxCachedStmts + 10 {
		if _, err := conn.ExecContext(ctx, fmt.Sprintf("UPDATE u SET k = %d WHERE k < 0", i)); err != nil {
			t.Fatal(err)
		}
		if kept, _ := cache(); kept > maxCachedStmts {
			t.Fatalf("%d statements kept; the bound is %d", kept, maxCachedStmts)
		}
	}
	var vs []string
	for open.Next() {
		var v string
		open.Scan(&v)
		vs = append(vs, v)
	}
	if err := open.Close(); err != nil || fmt.Sprint(vs) != "[a b]" {
		t.Errorf("rows open across the cache's reset = %v, %v; want [a b]", vs, err)
	}
}

// TestStmtCacheScripts: SQL of several statements runs whole, uncached.
func TestStmtCacheScripts(t *testing.T) {
	ctx := context.Background()
	conn, cache := cacheConn(t)
	kept0, _ := cache()
	if _, err := conn.ExecContext(ctx, "INSERT INTO u (k) VALUES (1); INSERT INTO u (k) VALUES (2);"); err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRowContext(ctx, "SELECT COUNT(*) FROM u").Scan(&n); err != nil || n != 2 {
		t.Fatalf("a script of two inserts left %d rows (%v)", n, err)
	}
	if kept, _ := cache(); kept != kept0+1 {
		t.Errorf("cache holds %d statements after a script and a query; want %d (the query only)", kept, kept0+1)
	}
}
