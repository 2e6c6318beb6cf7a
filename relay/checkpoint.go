package relay

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/nbd-wtf/go-nostr"
	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver
)

// Checkpoint remembers which stored (kind 4339) events the inbox has
// processed, so that after a restart it catches up from where it stopped
// and processes each event once. Implementations must be safe for
// concurrent use.
type Checkpoint interface {
	// Since returns the created_at of the newest processed event, 0 when
	// there is none.
	Since(ctx context.Context) (nostr.Timestamp, error)
	// Seen reports whether the event was processed.
	Seen(ctx context.Context, id string) (bool, error)
	// Done records the event as processed.
	Done(ctx context.Context, id string, createdAt nostr.Timestamp) error
}

var _ Checkpoint = (*SQLCheckpoint)(nil)

// SQLCheckpoint is a Checkpoint in a SQLite file.
type SQLCheckpoint struct {
	db *sql.DB
}

// keepProcessed is how long processed ids are kept behind the newest one:
// as long as a 4339 reply lives on relays by default.
const keepProcessed = DefaultReplyTT

// OpenCheckpoint opens (creating it if needed) the checkpoint database at
// path.
func OpenCheckpoint(path string) (*SQLCheckpoint, error) {
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=synchronous(NORMAL)")
	if err != nil {
		return nil, fmt.Errorf("relay: open checkpoint %s: %w", path, err)
	}
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE IF NOT EXISTS inbox_processed (
		event_id TEXT PRIMARY KEY,
		created_at INTEGER NOT NULL
	)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("relay: checkpoint schema: %w", err)
	}
	if _, err := db.Exec(`CREATE INDEX IF NOT EXISTS inbox_processed_created ON inbox_processed(created_at)`); err != nil {
		db.Close()
		return nil, fmt.Errorf("relay: checkpoint schema: %w", err)
	}
	return &SQLCheckpoint{db: db}, nil
}

// Close closes the database.
func (c *SQLCheckpoint) Close() error { return c.db.Close() }

// Since implements Checkpoint.
func (c *SQLCheckpoint) Since(ctx context.Context) (nostr.Timestamp, error) {
	var ts sql.NullInt64
	if err := c.db.QueryRowContext(ctx, `SELECT MAX(created_at) FROM inbox_processed`).Scan(&ts); err != nil {
		return 0, fmt.Errorf("relay: checkpoint: %w", err)
	}
	return nostr.Timestamp(ts.Int64), nil
}

// Seen implements Checkpoint.
func (c *SQLCheckpoint) Seen(ctx context.Context, id string) (bool, error) {
	var one int
	err := c.db.QueryRowContext(ctx, `SELECT 1 FROM inbox_processed WHERE event_id = ?`, id).Scan(&one)
	switch {
	case err == sql.ErrNoRows:
		return false, nil
	case err != nil:
		return false, fmt.Errorf("relay: checkpoint: %w", err)
	}
	return true, nil
}

// Done implements Checkpoint. It also forgets ids far older than the
// newest, which no catch-up can reach again.
func (c *SQLCheckpoint) Done(ctx context.Context, id string, createdAt nostr.Timestamp) error {
	if _, err := c.db.ExecContext(ctx, `INSERT OR IGNORE INTO inbox_processed(event_id, created_at) VALUES (?, ?)`, id, int64(createdAt)); err != nil {
		return fmt.Errorf("relay: checkpoint: %w", err)
	}
	if _, err := c.db.ExecContext(ctx, `DELETE FROM inbox_processed WHERE created_at < ?`, int64(createdAt)-keepProcessed); err != nil {
		return fmt.Errorf("relay: checkpoint: %w", err)
	}
	return nil
}
