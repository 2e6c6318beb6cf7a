package node

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/snapnostr"
)

// A node.db left by an older version is carried into the node's database
// on the first start, said in the log, and not read again; without a
// database the checkpoint is in memory.
func TestCheckpointCarriedOverFromNodeDB(t *testing.T) {
	ctx := context.Background()
	old := filepath.Join(t.TempDir(), "node.db")
	f, err := sql.Open("sqlite", "file:"+old)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		`CREATE TABLE inbox_processed (event_id TEXT PRIMARY KEY, created_at INTEGER NOT NULL)`,
		`INSERT INTO inbox_processed VALUES ('ev1', 1700000000)`,
	} {
		if _, err := f.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	f.Close()

	db := testdb.Open(t, testdb.SQLite(t))
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	c, err := openCheckpoint(ctx, db, old, logger)
	if err != nil {
		t.Fatal(err)
	}
	if seen, err := c.Seen(ctx, "ev1"); err != nil || !seen {
		t.Fatalf("carried id: Seen = %v, %v", seen, err)
	}
	if since, err := c.Since(ctx); err != nil || since != 1700000000 {
		t.Fatalf("Since = %d, %v", since, err)
	}
	if !strings.Contains(logs.String(), "carried the inbox checkpoint over") {
		t.Fatalf("no log line of the carry-over:\n%s", logs.String())
	}
	logs.Reset()
	if _, err := openCheckpoint(ctx, db, old, logger); err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 0 {
		t.Fatalf("second start carried again:\n%s", logs.String())
	}

	mem, err := openCheckpoint(ctx, nil, old, logger)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := mem.(*snapnostr.MemoryCheckpoint); !ok {
		t.Fatalf("without a database: %T, want *snapnostr.MemoryCheckpoint", mem)
	}
}
