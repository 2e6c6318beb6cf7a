package sqldb

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzStmtCache runs the same operations, read from the input one byte
// each, on a connection of OpenSQLite and on one of the plain driver, and
// fails at the first result that differs: inserts, updates, deletes,
// queries (some kept open while others run, the same statement among
// them), scripts and enough distinct statements to empty the cache.
func FuzzStmtCache(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add([]byte{4, 4, 4, 0, 4, 9, 4, 4, 1, 4, 2, 4})
	f.Add([]byte{8, 8, 8, 8, 8, 3, 3, 7, 7, 5, 6, 6})
	f.Fuzz(func(t *testing.T, ops []byte) {
		if len(ops) > 200 {
			ops = ops[:200]
		}
		ctx := context.Background()
		dir := t.TempDir()
		open := func(db *sql.DB) *sql.Conn {
			t.Cleanup(func() { db.Close() })
			c, err := db.Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Close() })
			if _, err := c.ExecContext(ctx, "CREATE TABLE t (k INTEGER PRIMARY KEY, v TEXT)"); err != nil {
				t.Fatal(err)
			}
			return c
		}
		// Plain paths, not file: URIs: a seed's folder name holds '#'.
		plainDB, err := sql.Open("sqlite", filepath.Join(dir, "plain.db"))
		if err != nil {
			t.Fatal(err)
		}
		cached, plain := open(OpenSQLite(filepath.Join(dir, "cached.db"))), open(plainDB)
		for i, op := range ops {
			a, aerr := apply(ctx, cached, op, i)
			b, berr := apply(ctx, plain, op, i)
			if a != b || (aerr == nil) != (berr == nil) {
				t.Fatalf("op %d (%d): cached %q, %v; plain %q, %v", i, op%10, a, aerr, b, berr)
			}
		}
	})
}

// apply runs the operation op (its value modulo 10) as the i-th of a
// sequence on c and returns what it read, as text.
func apply(ctx context.Context, c *sql.Conn, op byte, i int) (string, error) {
	k := int(op) % 7
	switch op % 10 {
	case 0, 1:
		_, err := c.ExecContext(ctx, "INSERT OR REPLACE INTO t (k, v) VALUES (?, ?)", k, fmt.Sprint("v", i))
		return "", err
	case 2:
		_, err := c.ExecContext(ctx, "UPDATE t SET v = v || ? WHERE k <= ?", "+", k)
		return "", err
	case 3:
		_, err := c.ExecContext(ctx, "DELETE FROM t WHERE k = ?", k)
		return "", err
	case 4:
		var n int
		var s sql.NullString
		err := c.QueryRowContext(ctx, "SELECT COUNT(*), group_concat(v, ',') FROM (SELECT v FROM t WHERE k >= ? ORDER BY k)", k).Scan(&n, &s)
		return fmt.Sprint(n, s.String), err
	case 5:
		// Rows of a statement kept open while the same one runs again.
		const q = "SELECT k, v FROM t WHERE k >= ? ORDER BY k"
		outer, err := c.QueryContext(ctx, q, 0)
		if err != nil {
			return "", err
		}
		defer outer.Close()
		var b strings.Builder
		for outer.Next() {
			var kk int
			var v string
			if err := outer.Scan(&kk, &v); err != nil {
				return "", err
			}
			inner, err := c.QueryContext(ctx, q, kk)
			if err != nil {
				return "", err
			}
			n := 0
			for inner.Next() {
				n++
			}
			if err := inner.Close(); err != nil {
				return "", err
			}
			fmt.Fprintf(&b, "%d=%s:%d;", kk, v, n)
		}
		return b.String(), outer.Err()
	case 6:
		_, err := c.ExecContext(ctx, "INSERT OR IGNORE INTO t (k, v) VALUES (?, 'a'); UPDATE t SET v = v || 's' WHERE k = ?;", k, k)
		return "", err
	case 7:
		// A statement of its own text, many times over: the cache fills
		// and starts again.
		for j := range 40 {
			if _, err := c.ExecContext(ctx, fmt.Sprintf("UPDATE t SET v = v WHERE k = %d", i*40+j)); err != nil {
				return "", err
			}
		}
		return "", nil
	case 8:
		_, err := c.ExecContext(ctx, "INSERT INTO t (k, v) VALUES (?, 'dup')", k) // fails when k is there
		return "", err
	default:
		var v sql.NullString
		err := c.QueryRowContext(ctx, "SELECT v FROM t WHERE k = ?", k).Scan(&v)
		if err == sql.ErrNoRows {
			return "none", nil
		}
		return v.String, err
	}
}
