package snapnostr

import (
	"context"
	"io/fs"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// A database a build before inbox_relays made (its checkpoint at
// migration 3) is brought up to date on open, its processed ids kept:
// the inbox resumes from their newest, every relay, and then keeps each
// relay's point.
func TestCheckpointUpgradeAddsRelayPoints(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := testdb.Open(t, dsn)
		older := fstest.MapFS{}
		if err := fs.WalkDir(migrationFiles, "migrations", func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || strings.Contains(path, "0004_") {
				return err
			}
			b, err := fs.ReadFile(migrationFiles, path)
			older[strings.TrimPrefix(path, "migrations/")] = &fstest.MapFile{Data: b}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		if err := db.Migrate(ctx, sqldb.Migrations{FS: older, Component: "checkpoint"}); err != nil {
			t.Fatal(err)
		}
		const t0 = nostr.Timestamp(1_700_000_000)
		if _, err := db.W.ExecContext(ctx, db.Dialect.Rebind(`INSERT INTO inbox_processed (event_id, created_at) VALUES (?, ?)`), "old", int64(t0)); err != nil {
			t.Fatal(err)
		}
		c, err := OpenCheckpoint(ctx, db)
		if err != nil {
			t.Fatalf("open after the upgrade: %v", err)
		}
		if since, err := c.Since(ctx); err != nil || since != t0 {
			t.Fatalf("Since = %v, %v; want %v", since, err, t0)
		}
		if points, err := c.Relays(ctx); err != nil || len(points) != 0 {
			t.Fatalf("Relays = %v, %v; want none", points, err)
		}
		if err := c.Reached(ctx, map[string]nostr.Timestamp{"wss://a.example": t0 + 5}); err != nil {
			t.Fatal(err)
		}
		if points, err := c.Relays(ctx); err != nil || points["wss://a.example"] != t0+5 {
			t.Fatalf("Relays = %v, %v", points, err)
		}
	})
}
