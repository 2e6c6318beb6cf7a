package testdb

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/sqldb"
)

// MigrateLikeOlderBuilds migrates db as builds before the shared
// migrations table did, for upgrade tests: it applies the first upTo
// migrations of the dialect's folder in fsys (all when upTo ≤ 0) and
// records them in table (version, name, applied_at), the component's own.
func MigrateLikeOlderBuilds(tb testing.TB, db *sqldb.DB, fsys fs.FS, table string, upTo int) {
	tb.Helper()
	ctx := context.Background()
	dir := db.Dialect.Name()
	names, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil || len(names) == 0 {
		tb.Fatalf("migrations in %s: %v %v", dir, names, err)
	}
	slices.Sort(names)
	if upTo > 0 {
		names = names[:upTo]
	}
	if _, err := db.W.ExecContext(ctx, "CREATE TABLE "+table+" (version BIGINT NOT NULL PRIMARY KEY, name TEXT NOT NULL, applied_at BIGINT NOT NULL)"); err != nil {
		tb.Fatalf("create %s: %v", table, err)
	}
	for i, name := range names {
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := db.W.ExecContext(ctx, string(b)); err != nil {
			tb.Fatalf("%s: %v", name, err)
		}
		base := path.Base(name)
		q := db.Dialect.Rebind(fmt.Sprintf("INSERT INTO %s (version, name, applied_at) VALUES (?, ?, ?)", table))
		if _, err := db.W.ExecContext(ctx, q, i+1, base[:len(base)-len(".sql")], time.Now().UnixMicro()); err != nil {
			tb.Fatalf("record %s: %v", name, err)
		}
	}
}
