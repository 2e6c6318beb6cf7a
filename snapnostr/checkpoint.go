package snapnostr

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/bounded"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/relay"
)

// Checkpoint remembers which stored (kind 4339) events the inbox has
// processed, so that after a restart it catches up from where it stopped
// and processes each event once. Implementations must be safe for
// concurrent use. One that is also a RelayCheckpoint lets the inbox
// resume each relay from its own point.
type Checkpoint interface {
	// Since returns the created_at of the newest processed event, 0 when
	// there is none.
	Since(ctx context.Context) (nostr.Timestamp, error)
	// Seen reports whether the event was processed.
	Seen(ctx context.Context, id string) (bool, error)
	// Done records the event as processed.
	Done(ctx context.Context, id string, createdAt nostr.Timestamp) error
}

// RelayCheckpoint is a Checkpoint that also keeps where the inbox
// resumes on each relay: the point up to which it received (and
// processed) every request that relay holds. After a restart each relay
// is asked from its own point, less the lookback, so that a relay that was
// away, or that the node could not reach, is not asked only for what is
// newer than the newest request another relay brought. A relay with no
// point resumes from Since.
type RelayCheckpoint interface {
	Checkpoint
	// Relays returns the point kept for each relay URL.
	Relays(ctx context.Context) (map[string]nostr.Timestamp, error)
	// Reached records each relay's point (by URL). A point only moves
	// forward; points keepProcessed older than the newest are forgotten,
	// as processed ids are.
	Reached(ctx context.Context, points map[string]nostr.Timestamp) error
}

// SeenManyCheckpoint is a Checkpoint that also tells of many events in
// one read. The inbox asks so about the stored requests a catch-up
// brings, a batch at a time, rather than one read a request.
type SeenManyCheckpoint interface {
	Checkpoint
	// SeenMany returns which of the events (by id) were processed; an
	// id not processed may be left out.
	SeenMany(ctx context.Context, ids []string) (map[string]bool, error)
}

var (
	_ RelayCheckpoint    = (*SQLCheckpoint)(nil)
	_ RelayCheckpoint    = (*MemoryCheckpoint)(nil)
	_ SeenManyCheckpoint = (*SQLCheckpoint)(nil)
	_ SeenManyCheckpoint = (*MemoryCheckpoint)(nil)
)

// The checkpoint's table, embedded one folder per dialect (see
// sqldb.Migrations) and recorded in snapnode_migrations as "checkpoint".
//
//go:embed migrations
var migrationFiles embed.FS

func migrations() sqldb.Migrations {
	return sqldb.Embedded(migrationFiles, "migrations", "checkpoint")
}

// SQLCheckpoint is a RelayCheckpoint in the node's database (SQLite or
// PostgreSQL), beside its tasks: tables inbox_processed (the processed
// ids) and inbox_relays (each relay's point).
type SQLCheckpoint struct {
	db *sqldb.DB
}

// keepProcessed is how long processed ids are kept behind the newest one:
// as long as a 4339 reply lives on relays by default.
const keepProcessed = relay.DefaultReplyTT

// OpenCheckpoint returns the checkpoint kept in db, after bringing its
// table up to date. Closing it leaves db open.
func OpenCheckpoint(ctx context.Context, db *sqldb.DB) (*SQLCheckpoint, error) {
	if err := db.Migrate(ctx, migrations()); err != nil {
		return nil, fmt.Errorf("snapnostr: checkpoint: %w", err)
	}
	return &SQLCheckpoint{db: db}, nil
}

// Close does nothing: the database belongs to the caller.
func (c *SQLCheckpoint) Close() error { return nil }

// Since implements Checkpoint.
func (c *SQLCheckpoint) Since(ctx context.Context) (nostr.Timestamp, error) {
	var ts sql.NullInt64
	if err := c.db.R.QueryRowContext(ctx, `SELECT MAX(created_at) FROM inbox_processed`).Scan(&ts); err != nil {
		return 0, fmt.Errorf("snapnostr: checkpoint: %w", err)
	}
	return nostr.Timestamp(ts.Int64), nil
}

// Seen implements Checkpoint.
func (c *SQLCheckpoint) Seen(ctx context.Context, id string) (bool, error) {
	var one int
	err := c.db.R.QueryRowContext(ctx, c.db.Dialect.Rebind(`SELECT 1 FROM inbox_processed WHERE event_id = ?`), id).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("snapnostr: checkpoint: %w", err)
	}
	return true, nil
}

// SeenMany implements SeenManyCheckpoint.
func (c *SQLCheckpoint) SeenMany(ctx context.Context, ids []string) (map[string]bool, error) {
	out := make(map[string]bool, len(ids))
	// SQLite binds at most 32,766 parameters a statement: in slices.
	for part := range slices.Chunk(ids, 500) {
		args := make([]any, len(part))
		for i, id := range part {
			args[i] = id
		}
		q := c.db.Dialect.Rebind(`SELECT event_id FROM inbox_processed WHERE event_id IN (?` + strings.Repeat(`, ?`, len(part)-1) + `)`)
		for rows, err := range sqldb.Rows(c.db.R.QueryContext(ctx, q, args...)) {
			var id string
			if err == nil {
				err = rows.Scan(&id)
			}
			if err != nil {
				return nil, fmt.Errorf("snapnostr: checkpoint: %w", err)
			}
			out[id] = true
		}
	}
	return out, nil
}

// Done implements Checkpoint. It also forgets ids far older than the
// newest, which no catch-up can reach again.
//
// Its commit does not wait for the disk (sqldb.DB.WriteNoSync): the
// record spares a restart's catch-up the work of a request met again, it
// does not decide whether the request is processed twice. The replay
// store does, and a request that changed anything wrote its replay record
// with that change, in commits that wait for the disk; one that changed
// nothing may be answered again. A killed process loses nothing; a power
// cut may lose the last records, whose requests a catch-up then meets
// again. A synced commit here cost every Nostr request a flush (on
// PostgreSQL, a flush of the server's log) after its answer.
func (c *SQLCheckpoint) Done(ctx context.Context, id string, createdAt nostr.Timestamp) error {
	err := c.db.WriteNoSync(ctx, func(ctx context.Context, tx *sql.Tx) error {
		return c.insert(ctx, tx, id, int64(createdAt))
	})
	if err != nil {
		return fmt.Errorf("snapnostr: checkpoint: %w", err)
	}
	return nil
}

func (c *SQLCheckpoint) insert(ctx context.Context, tx *sql.Tx, id string, createdAt int64) error {
	d := c.db.Dialect
	if _, err := tx.ExecContext(ctx, d.Rebind(`INSERT INTO inbox_processed (event_id, created_at) VALUES (?, ?) ON CONFLICT (event_id) DO NOTHING`), id, createdAt); err != nil {
		return err
	}
	_, err := tx.ExecContext(ctx, d.Rebind(`DELETE FROM inbox_processed WHERE created_at < ?`), createdAt-keepProcessed)
	return err
}

// relaysLock serializes the writes of inbox_relays (see Reached).
var relaysLock = sqldb.LockKey("snapnode inbox_relays")

// Relays implements RelayCheckpoint.
func (c *SQLCheckpoint) Relays(ctx context.Context) (map[string]nostr.Timestamp, error) {
	out := map[string]nostr.Timestamp{}
	for rows, err := range sqldb.Rows(c.db.R.QueryContext(ctx, `SELECT relay_url, resume_at FROM inbox_relays`)) {
		var url string
		var at int64
		if err == nil {
			err = rows.Scan(&url, &at)
		}
		if err != nil {
			return nil, fmt.Errorf("snapnostr: checkpoint: %w", err)
		}
		out[url] = nostr.Timestamp(at)
	}
	return out, nil
}

// Reached implements RelayCheckpoint.
func (c *SQLCheckpoint) Reached(ctx context.Context, points map[string]nostr.Timestamp) error {
	if len(points) == 0 {
		return nil
	}
	var newest nostr.Timestamp
	for _, at := range points {
		newest = max(newest, at)
	}
	d := c.db.Dialect
	err := c.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		// Replicas sharing the database write their points at the same
		// moments. One write at a time: two updating the same rows in
		// different orders (a map's) deadlock on PostgreSQL, which then
		// aborts one of them.
		if err := d.Lock(ctx, tx, relaysLock); err != nil {
			return err
		}
		for url, at := range points {
			if _, err := tx.ExecContext(ctx, d.Rebind(`INSERT INTO inbox_relays (relay_url, resume_at) VALUES (?, ?)
				ON CONFLICT (relay_url) DO UPDATE SET resume_at = excluded.resume_at
				WHERE excluded.resume_at > inbox_relays.resume_at`), url, int64(at)); err != nil {
				return err
			}
		}
		_, err := tx.ExecContext(ctx, d.Rebind(`DELETE FROM inbox_relays WHERE resume_at < ?`), int64(newest)-keepProcessed)
		return err
	})
	if err != nil {
		return fmt.Errorf("snapnostr: checkpoint: %w", err)
	}
	return nil
}

// CarryOver reads the checkpoint that builds before this one kept in a
// SQLite file of its own (the data folder's node.db) into c, if c is
// still empty and the file exists, and returns how many ids it took. It
// reads the file and leaves it as it is; once c holds an event, CarryOver
// does nothing, so the file is read on one start only.
func (c *SQLCheckpoint) CarryOver(ctx context.Context, path string) (int, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if since, err := c.Since(ctx); err != nil || since > 0 {
		return 0, err
	}
	old, err := sql.Open("sqlite", "file:"+path+"?mode=ro&_pragma=busy_timeout(5000)")
	if err != nil {
		return 0, fmt.Errorf("snapnostr: open the older checkpoint %s: %w", path, err)
	}
	defer old.Close()
	var tables int
	if err := old.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'inbox_processed'`).Scan(&tables); err != nil {
		return 0, fmt.Errorf("snapnostr: read the older checkpoint %s: %w", path, err)
	}
	if tables == 0 {
		return 0, nil // an empty file: nothing was processed
	}
	type processed struct {
		id string
		at int64
	}
	var all []processed
	for rows, err := range sqldb.Rows(old.QueryContext(ctx, `SELECT event_id, created_at FROM inbox_processed
		WHERE created_at >= (SELECT MAX(created_at) FROM inbox_processed) - ? ORDER BY created_at`, keepProcessed)) {
		var p processed
		if err == nil {
			err = rows.Scan(&p.id, &p.at)
		}
		if err != nil {
			return 0, fmt.Errorf("snapnostr: read the older checkpoint %s: %w", path, err)
		}
		all = append(all, p)
	}
	err = c.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		for _, p := range all {
			if err := c.insert(ctx, tx, p.id, p.at); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("snapnostr: carry over the older checkpoint: %w", err)
	}
	return len(all), nil
}

// MemoryCheckpoint is a Checkpoint for a node without a database: it
// forgets everything when the process ends, and holds at most
// relay.DefaultDedupeSize ids (the oldest forgotten first), each until it is
// keepProcessed older than the newest, as SQLCheckpoint does.
type MemoryCheckpoint struct {
	mu     sync.Mutex
	newest nostr.Timestamp
	ids    *bounded.Expiring[string, struct{}]
	relays map[string]nostr.Timestamp
}

// NewMemoryCheckpoint returns an empty MemoryCheckpoint.
func NewMemoryCheckpoint() *MemoryCheckpoint {
	return &MemoryCheckpoint{ids: bounded.NewExpiring[string, struct{}](relay.DefaultDedupeSize, true),
		relays: map[string]nostr.Timestamp{}}
}

// Relays implements RelayCheckpoint.
func (c *MemoryCheckpoint) Relays(context.Context) (map[string]nostr.Timestamp, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.relays), nil
}

// Reached implements RelayCheckpoint.
func (c *MemoryCheckpoint) Reached(_ context.Context, points map[string]nostr.Timestamp) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var newest nostr.Timestamp
	for url, at := range points {
		c.relays[url] = max(c.relays[url], at)
		newest = max(newest, at)
	}
	if len(points) > 0 {
		maps.DeleteFunc(c.relays, func(_ string, at nostr.Timestamp) bool { return at < newest-keepProcessed })
	}
	return nil
}

// Close does nothing.
func (c *MemoryCheckpoint) Close() error { return nil }

// Since implements Checkpoint.
func (c *MemoryCheckpoint) Since(context.Context) (nostr.Timestamp, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.newest, nil
}

// Seen implements Checkpoint.
func (c *MemoryCheckpoint) Seen(_ context.Context, id string) (bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	_, ok := c.ids.Get(id, c.newest.Time())
	return ok, nil
}

// SeenMany implements SeenManyCheckpoint.
func (c *MemoryCheckpoint) SeenMany(_ context.Context, ids []string) (map[string]bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		if _, ok := c.ids.Get(id, c.newest.Time()); ok {
			out[id] = true
		}
	}
	return out, nil
}

// Done implements Checkpoint.
func (c *MemoryCheckpoint) Done(_ context.Context, id string, createdAt nostr.Timestamp) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.newest = max(c.newest, createdAt)
	c.ids.Add(id, struct{}{}, (createdAt + keepProcessed).Time(), c.newest.Time())
	return nil
}
