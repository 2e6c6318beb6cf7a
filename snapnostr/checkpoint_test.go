package snapnostr

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"path/filepath"
	"sync"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/testdb"
)

// checkpointContract is what every Checkpoint does: an empty one starts
// from 0; Done records an id (twice is once) and moves Since to the
// newest; an id keepProcessed older than the newest is forgotten.
func checkpointContract(t *testing.T, c Checkpoint) {
	ctx := context.Background()
	if since, err := c.Since(ctx); err != nil || since != 0 {
		t.Fatalf("empty: Since = %d, %v", since, err)
	}
	const t0 = nostr.Timestamp(1_700_000_000)
	for _, d := range []struct {
		id string
		at nostr.Timestamp
	}{{"a", t0}, {"b", t0 + 10}, {"a", t0}, {"c", t0 + 5}} {
		if err := c.Done(ctx, d.id, d.at); err != nil {
			t.Fatal(err)
		}
	}
	if since, err := c.Since(ctx); err != nil || since != t0+10 {
		t.Fatalf("Since = %d, %v; want %d", since, err, t0+10)
	}
	for id, want := range map[string]bool{"a": true, "b": true, "c": true, "d": false} {
		if seen, err := c.Seen(ctx, id); err != nil || seen != want {
			t.Errorf("Seen(%s) = %v, %v; want %v", id, seen, err, want)
		}
	}
	// "a" and "c" fall more than keepProcessed behind the newest; "b" stays.
	if err := c.Done(ctx, "e", t0+keepProcessed+6); err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string]bool{"a": false, "c": false, "b": true, "e": true} {
		if seen, err := c.Seen(ctx, id); err != nil || seen != want {
			t.Errorf("after the window moved: Seen(%s) = %v, %v; want %v", id, seen, err, want)
		}
	}
	// SeenMany tells as Seen does, of many ids at once (more than one
	// statement's worth included).
	if m, ok := c.(SeenManyCheckpoint); ok {
		ids := []string{"a", "b", "c", "d", "e"}
		for i := range 1200 {
			ids = append(ids, fmt.Sprint("x", i))
		}
		seen, err := m.SeenMany(ctx, ids)
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ids {
			if want := id == "b" || id == "e"; seen[id] != want {
				t.Errorf("SeenMany: %s seen %v; want %v", id, seen[id], want)
			}
		}
		if seen, err := m.SeenMany(ctx, nil); err != nil || len(seen) != 0 {
			t.Errorf("SeenMany of none = %v, %v", seen, err)
		}
	}
}

func TestSQLCheckpoint(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := testdb.Open(t, dsn)
		c, err := OpenCheckpoint(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		checkpointContract(t, c)
		// It lives in the database: another opening sees it.
		again, err := OpenCheckpoint(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if seen, err := again.Seen(ctx, "e"); err != nil || !seen {
			t.Fatalf("reopened: Seen = %v, %v", seen, err)
		}
	})
}

func TestMemoryCheckpoint(t *testing.T) {
	checkpointContract(t, NewMemoryCheckpoint())
}

// olderCheckpointFile writes a node.db as builds before this one kept it,
// holding ids and their created_at.
func olderCheckpointFile(t *testing.T, rows map[string]int64) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "node.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS inbox_processed (event_id TEXT PRIMARY KEY, created_at INTEGER NOT NULL)`,
		`CREATE INDEX IF NOT EXISTS inbox_processed_created ON inbox_processed(created_at)`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	for id, at := range rows {
		if _, err := db.Exec(`INSERT INTO inbox_processed(event_id, created_at) VALUES (?, ?)`, id, at); err != nil {
			t.Fatal(err)
		}
	}
	return path
}

// The checkpoint of an older build's node.db is carried into the
// database once: its ids within the window are seen, the catch-up resumes
// from its newest event, and the file is left as it was.
func TestCheckpointCarryOver(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		const newest = 1_700_000_000
		old := olderCheckpointFile(t, map[string]int64{"x": newest - 5, "y": newest, "stale": newest - keepProcessed - 1})
		db := testdb.Open(t, dsn)
		c, err := OpenCheckpoint(ctx, db)
		if err != nil {
			t.Fatal(err)
		}
		if n, err := c.CarryOver(ctx, old); err != nil || n != 2 {
			t.Fatalf("CarryOver = %d, %v; want 2", n, err)
		}
		if since, err := c.Since(ctx); err != nil || since != newest {
			t.Fatalf("Since = %d, %v; want %d", since, err, newest)
		}
		for id, want := range map[string]bool{"x": true, "y": true, "stale": false} {
			if seen, err := c.Seen(ctx, id); err != nil || seen != want {
				t.Errorf("Seen(%s) = %v, %v; want %v", id, seen, err, want)
			}
		}
		// Once: later starts leave the file alone.
		if err := c.Done(ctx, "z", newest+1); err != nil {
			t.Fatal(err)
		}
		if n, err := c.CarryOver(ctx, old); err != nil || n != 0 {
			t.Fatalf("second CarryOver = %d, %v; want 0", n, err)
		}
		f, err := sql.Open("sqlite", "file:"+old)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		var rows int
		if err := f.QueryRow(`SELECT count(*) FROM inbox_processed`).Scan(&rows); err != nil || rows != 3 {
			t.Fatalf("the older file holds %d rows (%v), want its 3", rows, err)
		}
		// No file: nothing to carry.
		if n, err := c.CarryOver(ctx, filepath.Join(t.TempDir(), "node.db")); err != nil || n != 0 {
			t.Fatalf("CarryOver of no file = %d, %v", n, err)
		}
	})
}

// relayCheckpointContract is what every RelayCheckpoint does with the
// relays' points: none at first; each moves only forward; a point
// keepProcessed older than the newest written is forgotten.
func relayCheckpointContract(t *testing.T, c RelayCheckpoint) {
	ctx := context.Background()
	if points, err := c.Relays(ctx); err != nil || len(points) != 0 {
		t.Fatalf("empty: Relays = %v, %v", points, err)
	}
	const t0 = nostr.Timestamp(1_700_000_000)
	const a, b, gone = "wss://a.example", "wss://b.example", "wss://gone.example"
	for _, p := range []map[string]nostr.Timestamp{
		{a: t0, b: t0 - 50, gone: t0 - 100},
		{a: t0 + 10},
		{a: t0 + 5, b: t0 - 60}, // back: neither moves
		nil,
	} {
		if err := c.Reached(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	want := map[string]nostr.Timestamp{a: t0 + 10, b: t0 - 50, gone: t0 - 100}
	if points, err := c.Relays(ctx); err != nil || !maps.Equal(points, want) {
		t.Fatalf("Relays = %v, %v; want %v", points, err, want)
	}
	// gone falls keepProcessed behind the newest; b stays.
	if err := c.Reached(ctx, map[string]nostr.Timestamp{a: t0 - 100 + keepProcessed + 1}); err != nil {
		t.Fatal(err)
	}
	want = map[string]nostr.Timestamp{a: t0 - 100 + keepProcessed + 1, b: t0 - 50}
	if points, err := c.Relays(ctx); err != nil || !maps.Equal(points, want) {
		t.Fatalf("after the window moved: Relays = %v, %v; want %v", points, err, want)
	}
}

func TestSQLRelayCheckpoint(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		c, err := OpenCheckpoint(context.Background(), testdb.Open(t, dsn))
		if err != nil {
			t.Fatal(err)
		}
		relayCheckpointContract(t, c)
	})
}

func TestMemoryRelayCheckpoint(t *testing.T) {
	relayCheckpointContract(t, NewMemoryCheckpoint())
}

// Recording a request as processed does not wait for the disk: the
// record only spares a restart's catch-up the replay store's check, which
// stops a request met again whatever the checkpoint lost to a power cut
// (a request's effects are written, with its replay record, by commits
// that wait). One commit per request that does not wait.
func TestSQLCheckpointDoneDoesNotWaitForTheDisk(t *testing.T) {
	db := testdb.Open(t, testdb.SQLite(t))
	c, err := OpenCheckpoint(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	before := db.UnsyncedCommits()
	for i := range 3 {
		if err := c.Done(context.Background(), string(rune('a'+i)), nostr.Timestamp(1_700_000_000+i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := db.UnsyncedCommits() - before; got != 3 {
		t.Fatalf("%d of 3 commits did not wait for the disk, want all", got)
	}
}

// Replicas sharing one database write their relays' points at the same
// moments (each every minute, and all of them as a deployment stops):
// two such writes of the same relays never fail. Each write updates its
// rows in one transaction; taken in map order, two of them locked the
// same rows in opposite orders and PostgreSQL aborted one with a
// deadlock.
func TestSQLRelayCheckpointConcurrentReplicas(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		const replicas, writes, relays = 4, 10, 8
		const t0 = nostr.Timestamp(1_700_000_000)
		errs := make(chan error, replicas*writes)
		var wg sync.WaitGroup
		for r := range replicas {
			c, err := OpenCheckpoint(context.Background(), testdb.Open(t, dsn))
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() {
				for w := range writes {
					points := map[string]nostr.Timestamp{}
					for i := range relays {
						points[fmt.Sprintf("wss://r%d.example", i)] = t0 + nostr.Timestamp(w*replicas+r)
					}
					if err := c.Reached(context.Background(), points); err != nil {
						errs <- err
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("a replica's write of its points: %v", err)
		}
	})
}
