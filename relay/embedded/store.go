package embedded

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/sqldb"
)

// store keeps events in SQLite. Writes go through one connection (one
// writer); reads use their own pool, except for an in-memory database,
// which lives in a single connection.
type store struct {
	w, r *sql.DB
	// newest is the largest created_at ever stored (an upper bound: it
	// never goes down when events are deleted). A filter whose since is
	// past it matches nothing stored, so the query costs no SQL: the
	// common case of a client listening for replies "since a few seconds
	// ago". newestKind refines it per kind, for the first maxKindMarks
	// kinds seen.
	newest     atomic.Int64
	markMu     sync.Mutex
	newestKind map[int]int64
}

// maxKindMarks bounds the per-kind marks; kinds beyond it use the global
// mark.
const maxKindMarks = 1024

// raise records that an event of kind created at ts may be stored. It is
// called before the event can be read, so that no query skips the
// database while the event is in it.
func (s *store) raise(kind int, ts int64) {
	for cur := s.newest.Load(); ts > cur && !s.newest.CompareAndSwap(cur, ts); cur = s.newest.Load() {
	}
	s.markMu.Lock()
	defer s.markMu.Unlock()
	if s.newestKind == nil {
		s.newestKind = make(map[int]int64)
	}
	if cur, ok := s.newestKind[kind]; ok || len(s.newestKind) < maxKindMarks {
		s.newestKind[kind] = max(cur, ts)
	}
}

// storedSince reports whether anything stored may match a filter with
// since and kinds: false means the answer is empty without a query.
func (s *store) storedSince(f *filter) bool {
	if !f.hasSince {
		return true
	}
	if f.since > s.newest.Load() {
		return false
	}
	if len(f.kinds) == 0 {
		return true
	}
	s.markMu.Lock()
	defer s.markMu.Unlock()
	if len(s.newestKind) >= maxKindMarks {
		return true // some kinds are not tracked
	}
	for _, k := range f.kinds {
		if ts, ok := s.newestKind[k]; ok && ts >= f.since {
			return true
		}
	}
	return false
}

// openStore opens (creating if needed) the database at path; "" or
// ":memory:" is a private in-memory database.
func openStore(ctx context.Context, path string) (*store, error) {
	const pragmas = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	if path == "" || path == ":memory:" {
		db := sqldb.OpenSQLite(":memory:?" + pragmas)
		// One connection, never closed while the store lives: it is
		// the database.
		db.SetMaxOpenConns(1)
		db.SetMaxIdleConns(1)
		db.SetConnMaxLifetime(0)
		db.SetConnMaxIdleTime(0)
		s := &store{w: db, r: db}
		if err := s.init(ctx); err != nil {
			db.Close()
			return nil, err
		}
		return s, nil
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("database path %q: must not contain '?' or '#'", path)
	}
	w := sqldb.OpenSQLite("file:" + path + "?" + pragmas)
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	s := &store{w: w}
	if err := s.init(ctx); err != nil {
		w.Close()
		return nil, err
	}
	r := sqldb.OpenSQLite("file:" + path + "?" + pragmas + "&_pragma=query_only(1)")
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	s.r = r
	return s, nil
}

func (s *store) init(ctx context.Context) error {
	if err := sqldb.MigrateSQL(ctx, s.w, sqldb.SQLite, migrations()); err != nil {
		return fmt.Errorf("relay database: %w", err)
	}
	rows, err := s.w.QueryContext(ctx, "SELECT kind, MAX(created_at) FROM events GROUP BY kind")
	if err != nil {
		return fmt.Errorf("read newest events: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var kind int
		var ts int64
		if err := rows.Scan(&kind, &ts); err != nil {
			return fmt.Errorf("read newest events: %w", err)
		}
		s.raise(kind, ts)
	}
	return rows.Err()
}

func (s *store) close() error {
	var err error
	if s.r != s.w {
		err = s.r.Close()
	}
	return errors.Join(err, s.w.Close())
}

// saveResult is what save did with an event.
type saveResult int

const (
	saved      saveResult = iota // stored (replacing older versions, if any)
	duplicate                    // the same id is already stored
	superseded                   // a newer version of this replaceable event is stored
)

// save stores ev, whose JSON form is raw, applying NIP-01 replacement for
// replaceable and addressable kinds. exp is its NIP-40 expiration (hasExp
// false: none); now is the current Unix time, so that expired stored
// versions never block a replacement.
func (s *store) save(ctx context.Context, ev *nostr.Event, raw []byte, exp int64, hasExp bool, now int64) (res saveResult, err error) {
	s.raise(ev.Kind, int64(ev.CreatedAt))
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer func() {
		if err != nil || res != saved {
			_ = tx.Rollback()
		}
	}()
	var one int
	switch err := tx.QueryRowContext(ctx, "SELECT 1 FROM events WHERE id = ?", ev.ID).Scan(&one); {
	case err == nil:
		return duplicate, nil
	case !errors.Is(err, sql.ErrNoRows):
		return 0, fmt.Errorf("look up id: %w", err)
	}

	var d sql.NullString
	cls := kindClass(ev.Kind)
	if cls == classReplaceable || cls == classAddressable {
		q := "SELECT seq, id, created_at, expiration FROM events WHERE pubkey = ? AND kind = ?"
		args := []any{ev.PubKey, ev.Kind}
		if cls == classAddressable {
			d = sql.NullString{String: dTag(ev), Valid: true}
			q += " AND d_tag = ?"
			args = append(args, d.String)
		}
		rows, err := tx.QueryContext(ctx, q, args...)
		if err != nil {
			return 0, fmt.Errorf("look up previous versions: %w", err)
		}
		var old []int64
		for rows.Next() {
			var seq, created int64
			var id string
			var e sql.NullInt64
			if err := rows.Scan(&seq, &id, &created, &e); err != nil {
				rows.Close()
				return 0, fmt.Errorf("scan previous version: %w", err)
			}
			expired := e.Valid && e.Int64 <= now
			if !expired && !newer(int64(ev.CreatedAt), ev.ID, created, id) {
				rows.Close()
				return superseded, nil
			}
			old = append(old, seq)
		}
		if err := rows.Close(); err != nil {
			return 0, fmt.Errorf("read previous versions: %w", err)
		}
		if err := rows.Err(); err != nil {
			return 0, fmt.Errorf("read previous versions: %w", err)
		}
		for _, seq := range old {
			if err := deleteSeq(ctx, tx, seq); err != nil {
				return 0, err
			}
		}
	}

	var e sql.NullInt64
	if hasExp {
		e = sql.NullInt64{Int64: exp, Valid: true}
	}
	r, err := tx.ExecContext(ctx,
		"INSERT INTO events (id, pubkey, created_at, kind, d_tag, expiration, raw) VALUES (?, ?, ?, ?, ?, ?, ?)",
		ev.ID, ev.PubKey, int64(ev.CreatedAt), ev.Kind, d, e, raw)
	if err != nil {
		return 0, fmt.Errorf("insert event: %w", err)
	}
	seq, err := r.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("insert event: %w", err)
	}
	if err := insertTags(ctx, tx, seq, ev); err != nil {
		return 0, err
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return saved, nil
}

// insertTags indexes every tag that has a value: (name, first value), once
// per distinct pair.
func insertTags(ctx context.Context, tx *sql.Tx, seq int64, ev *nostr.Event) error {
	const batch = 200
	var sb strings.Builder
	args := make([]any, 0, 4*batch)
	flush := func() error {
		if len(args) == 0 {
			return nil
		}
		if _, err := tx.ExecContext(ctx, sb.String(), args...); err != nil {
			return fmt.Errorf("insert tags: %w", err)
		}
		sb.Reset()
		args = args[:0]
		return nil
	}
	seen := make(map[[2]string]struct{}, len(ev.Tags))
	for _, t := range ev.Tags {
		if len(t) < 2 {
			continue
		}
		if _, dup := seen[[2]string{t[0], t[1]}]; dup {
			continue
		}
		seen[[2]string{t[0], t[1]}] = struct{}{}
		if len(args) == 0 {
			sb.WriteString("INSERT INTO tags (event_seq, name, value, created_at) VALUES (?, ?, ?, ?)")
		} else {
			sb.WriteString(", (?, ?, ?, ?)")
		}
		args = append(args, seq, t[0], t[1], int64(ev.CreatedAt))
		if len(args) == 4*batch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

func deleteSeq(ctx context.Context, tx *sql.Tx, seq int64) error {
	if _, err := tx.ExecContext(ctx, "DELETE FROM tags WHERE event_seq = ?", seq); err != nil {
		return fmt.Errorf("delete tags: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "DELETE FROM events WHERE seq = ?", seq); err != nil {
		return fmt.Errorf("delete event: %w", err)
	}
	return nil
}

// storedEvent is one query result.
type storedEvent struct {
	id        string
	createdAt int64
	raw       []byte
}

// query returns up to limit stored events matching f that have not expired
// at now, newest first (ties: lowest id first), and stops before an event
// that would take their JSON over maxBytes (maxBytes < 0: no bound).
func (s *store) query(ctx context.Context, f *filter, limit, maxBytes int, now int64) ([]storedEvent, error) {
	if limit <= 0 || maxBytes == 0 || f.matchesNothing() || !s.storedSince(f) {
		return nil, nil
	}
	q, args := buildQuery(f, limit, now)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("query events: %w", err)
	}
	defer rows.Close()
	var out []storedEvent
	for rows.Next() {
		var e storedEvent
		if err := rows.Scan(&e.id, &e.createdAt, &e.raw); err != nil {
			return nil, fmt.Errorf("scan event: %w", err)
		}
		if maxBytes >= 0 {
			if maxBytes -= len(e.raw); maxBytes < 0 {
				break
			}
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("query events: %w", err)
	}
	return out, nil
}

// buildQuery turns f into SQL. With tag conditions, the one with the
// fewest values drives the query: its rows in the tags table, in
// created_at order, are joined to their events, and the other conditions
// filter them; the other tag conditions are lookups in the tags table.
func buildQuery(f *filter, limit int, now int64) (string, []any) {
	var sb strings.Builder
	var args []any
	in := func(col string, vals []any) {
		sb.WriteString(" AND ")
		sb.WriteString(col)
		sb.WriteString(" IN (")
		for i := range vals {
			if i > 0 {
				sb.WriteString(", ")
			}
			sb.WriteByte('?')
		}
		sb.WriteByte(')')
		args = append(args, vals...)
	}
	drive := -1
	if f.ids == nil {
		for i, t := range f.tags {
			if drive < 0 || len(t.values) < len(f.tags[drive].values) {
				drive = i
			}
		}
	}
	order := "e.created_at"
	if drive >= 0 {
		t := f.tags[drive]
		// An event is indexed once per (name, value), so only a driving
		// condition with several values can meet it twice.
		if len(t.values) > 1 {
			sb.WriteString("SELECT DISTINCT")
		} else {
			sb.WriteString("SELECT")
		}
		sb.WriteString(" e.id, e.created_at, e.raw FROM tags d CROSS JOIN events e ON e.seq = d.event_seq WHERE d.name = ?")
		args = append(args, t.name)
		in("d.value", anys(t.values))
		order = "d.created_at"
	} else {
		sb.WriteString("SELECT e.id, e.created_at, e.raw FROM events e WHERE 1")
	}
	sb.WriteString(" AND (e.expiration IS NULL OR e.expiration > ?)")
	args = append(args, now)
	if f.ids != nil {
		in("e.id", anys(f.ids))
	}
	if f.authors != nil {
		in("e.pubkey", anys(f.authors))
	}
	if f.kinds != nil {
		in("e.kind", anys(f.kinds))
	}
	if f.hasSince {
		sb.WriteString(" AND " + order + " >= ?")
		args = append(args, f.since)
	}
	if f.hasUntil {
		sb.WriteString(" AND " + order + " <= ?")
		args = append(args, f.until)
	}
	for i, t := range f.tags {
		if i == drive {
			continue
		}
		sb.WriteString(" AND e.seq IN (SELECT t.event_seq FROM tags t WHERE t.name = ?")
		args = append(args, t.name)
		in("t.value", anys(t.values))
		sb.WriteByte(')')
	}
	sb.WriteString(" ORDER BY " + order + " DESC, e.id ASC LIMIT ?")
	args = append(args, limit)
	return sb.String(), args
}

func anys[T any](s []T) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// deleteExpired deletes the events whose expiration is at or before now
// and returns how many it deleted.
func (s *store) deleteExpired(ctx context.Context, now int64) (int64, error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	const expired = "SELECT seq FROM events WHERE expiration IS NOT NULL AND expiration <= ?"
	if _, err := tx.ExecContext(ctx, "DELETE FROM tags WHERE event_seq IN ("+expired+")", now); err != nil {
		return 0, fmt.Errorf("delete expired tags: %w", err)
	}
	r, err := tx.ExecContext(ctx, "DELETE FROM events WHERE seq IN ("+expired+")", now)
	if err != nil {
		return 0, fmt.Errorf("delete expired events: %w", err)
	}
	n, err := r.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("delete expired events: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	return n, nil
}

// count returns the number of stored events (expired ones included).
func (s *store) count(ctx context.Context) (int64, error) {
	var n int64
	if err := s.r.QueryRowContext(ctx, "SELECT count(*) FROM events").Scan(&n); err != nil {
		return 0, fmt.Errorf("count events: %w", err)
	}
	return n, nil
}
