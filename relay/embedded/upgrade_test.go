package embedded

import (
	"context"
	"database/sql"
	"errors"
	"path/filepath"
	"testing"

	"github.com/snapnode/snapnode/internal/sqldb"
)

// olderRelayDB writes a relay database as builds before the shared
// migrations table did: the schema, one event, PRAGMA user_version.
func olderRelayDB(t *testing.T, version int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "relay.db")
	db, err := sql.Open("sqlite", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	schema, err := migrationFiles.ReadFile("migrations/sqlite/0001_events.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		string(schema),
		`INSERT INTO events (id, pubkey, created_at, kind, raw) VALUES ('e1', 'p1', 5, 1, x'7b7d')`,
		"PRAGMA user_version = " + string(rune('0'+version)),
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// A relay database of an older build opens with its events, and records
// its schema in snapnode_migrations; one of a newer schema is refused.
func TestOpenOlderRelayDatabase(t *testing.T) {
	ctx := context.Background()
	s, err := openStore(ctx, olderRelayDB(t, 1), testBound)
	if err != nil {
		t.Fatalf("open the older database: %v", err)
	}
	defer s.close()
	if n, err := s.count(ctx); err != nil || n != 1 {
		t.Fatalf("count = %d, %v; want its 1 event", n, err)
	}
	if s.events != 1 || s.bytes != 2 {
		t.Fatalf("totals %d events, %d bytes; want its event counted by its JSON, 2 bytes", s.events, s.bytes)
	}
	var v int
	if err := s.r.QueryRowContext(ctx, "SELECT MAX(version) FROM snapnode_migrations WHERE component = 'relay'").Scan(&v); err != nil || v != 3 {
		t.Fatalf("recorded version %d, %v; want 3", v, err)
	}
	var peer string
	if err := s.r.QueryRowContext(ctx, "SELECT peer FROM events").Scan(&peer); err != nil || peer != "" {
		t.Fatalf("the older event's peer %q, %v; want none (it counts against no share)", peer, err)
	}

	if _, err := openStore(ctx, olderRelayDB(t, 4), testBound); !errors.Is(err, sqldb.ErrSchemaTooNew) {
		t.Fatalf("a newer schema: %v, want ErrSchemaTooNew", err)
	}
}
