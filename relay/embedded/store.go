package embedded

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
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

	// The bound on what is kept (see Config.StoreMaxEvents): past
	// maxEvents events or maxBytes (see eventSize), the oldest are
	// deleted to make room, regular events first, never the replaceable
	// and addressable events of the keep authors.
	maxEvents, maxBytes int64
	// evictions select the oldest events that may go, tier by tier:
	// each takes a seq to start after and one to spare, then its args,
	// then a limit.
	evictions []eviction
	// peerEvents and peerBytes bound what one peer's events take (0: no
	// share); peerEvictions select that peer's oldest events as
	// evictions do, taking the peer first.
	peerEvents, peerBytes int64
	peerEvictions         []eviction
	// sizeMu is held by every write from its transaction's start until
	// events and bytes, the totals stored, are updated after its commit.
	sizeMu        sync.Mutex
	events, bytes int64
	evicted       atomic.Int64 // events deleted to make room, since the last takeEvicted
	peerEvicted   atomic.Int64 // events deleted past their peer's share, since the last takeEvicted
}

// storeBound is what openStore keeps: at most events stored events and
// bytes (see eventSize), and at most peerEvents and peerBytes of one
// peer's (0: no share), never deleting to make room the replaceable and
// addressable events of keep (hex public keys).
type storeBound struct {
	events, bytes         int64
	keep                  []string
	peerEvents, peerBytes int64
}

// storeReaders is the number of database connections that read, for
// every client.
const storeReaders = 4

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
// ":memory:" is a private in-memory database. It keeps what b allows,
// deleting the oldest events at once should the database hold more.
func openStore(ctx context.Context, path string, b storeBound) (*store, error) {
	const pragmas = "_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)&_txlock=immediate"
	memory := path == "" || path == ":memory:"
	dsn := ":memory:?" + pragmas
	if !memory {
		if strings.ContainsAny(path, "?#") {
			return nil, fmt.Errorf("database path %q: must not contain '?' or '#'", path)
		}
		dsn = "file:" + path + "?" + pragmas
	}
	// One connection, never closed while the store lives: SQLite's one
	// writer, and in memory the database itself (which also reads).
	w := sqldb.OpenSQLite(dsn)
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	s := newStore(w, nil, b)
	if memory {
		s.r = w
	}
	if err := s.init(ctx); err != nil {
		w.Close()
		return nil, err
	}
	if !memory {
		r := sqldb.OpenSQLite(dsn + "&_pragma=query_only(1)")
		r.SetMaxOpenConns(storeReaders)
		r.SetMaxIdleConns(storeReaders)
		s.r = r
	}
	return s, nil
}

// eviction is one tier of the events the bound deletes.
type eviction struct {
	query string
	args  []any
}

// replaceableKinds is the SQL of the kinds kindClass calls replaceable
// or addressable (the condition of the events_regular index, negated).
const replaceableKinds = "(kind IN (0, 3) OR kind BETWEEN 10000 AND 19999 OR kind BETWEEN 30000 AND 39999)"

func newStore(w, r *sql.DB, b storeBound) *store {
	s := &store{w: w, r: r, maxEvents: b.events, maxBytes: b.bytes, peerEvents: b.peerEvents, peerBytes: b.peerBytes}
	s.evictions = evictionTiers("SELECT seq FROM events WHERE seq > ? AND seq <> ?", b.keep)
	if b.peerEvents > 0 {
		// "peer <> ''" repeats the condition of the partial indexes
		// events_peer and events_peer_regular, which SQLite does not
		// infer from "peer = ?": without it, the search for a peer's
		// oldest event scans every event stored before it.
		s.peerEvictions = evictionTiers("SELECT seq FROM events WHERE peer = ? AND peer <> '' AND seq > ? AND seq <> ?", b.keep)
	}
	return s
}

// evictionTiers returns the tiers of the events sel selects, oldest
// first: regular events first (every new id is a new row: what a flood
// is made of), through their own index; then the others, agent cards
// among them, but never the replaceable and addressable events of keep.
func evictionTiers(sel string, keep []string) []eviction {
	const order = " ORDER BY seq LIMIT ?"
	regular := eviction{query: sel + " AND NOT " + replaceableKinds + order}
	rest := eviction{query: sel}
	if len(keep) > 0 {
		rest.query += " AND NOT (pubkey IN (?" + strings.Repeat(", ?", len(keep)-1) + ") AND " + replaceableKinds + ")"
		rest.args = anys(keep)
	}
	rest.query += order
	return []eviction{regular, rest}
}

func (s *store) init(ctx context.Context) error {
	if err := sqldb.MigrateSQL(ctx, s.w, sqldb.SQLite, migrations()); err != nil {
		return fmt.Errorf("relay database: %w", err)
	}
	if err := s.trim(ctx); err != nil {
		return err
	}
	for rows, err := range sqldb.Rows(s.w.QueryContext(ctx, "SELECT kind, MAX(created_at) FROM events GROUP BY kind")) {
		var kind int
		var ts int64
		if err == nil {
			err = rows.Scan(&kind, &ts)
		}
		if err != nil {
			return fmt.Errorf("read newest events: %w", err)
		}
		s.raise(kind, ts)
	}
	return nil
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
//
// peer names where ev came from ("": no share, see
// Config.StorePeerShare). Past the peer's share, its own oldest events
// are deleted in the same transaction (see evictPeer); then past the
// store's bound, the oldest events (see evict).
func (s *store) save(ctx context.Context, ev *nostr.Event, raw []byte, exp int64, hasExp bool, now int64, peer string) (res saveResult, err error) {
	s.raise(ev.Kind, int64(ev.CreatedAt))
	err = s.write(ctx, func(tx *sql.Tx, size *totals) error {
		res, err = s.saveTx(ctx, tx, size, ev, raw, exp, hasExp, now, peer)
		return err
	})
	return res, err
}

// saveTx is save in tx, the store's totals in size.
func (s *store) saveTx(ctx context.Context, tx *sql.Tx, size *totals, ev *nostr.Event, raw []byte, exp int64, hasExp bool, now int64, peer string) (saveResult, error) {
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
			n, err := deleteSeq(ctx, tx, seq)
			if err != nil {
				return 0, err
			}
			size.add(-1, -n)
		}
	}

	var e sql.NullInt64
	if hasExp {
		e = sql.NullInt64{Int64: exp, Valid: true}
	}
	tags := indexedTags(ev)
	n := eventSize(raw, tags)
	r, err := tx.ExecContext(ctx,
		"INSERT INTO events (id, pubkey, created_at, kind, d_tag, expiration, raw, size, peer) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
		ev.ID, ev.PubKey, int64(ev.CreatedAt), ev.Kind, d, e, raw, n, peer)
	if err != nil {
		return 0, fmt.Errorf("insert event: %w", err)
	}
	seq, err := r.LastInsertId()
	if err != nil {
		return 0, fmt.Errorf("insert event: %w", err)
	}
	if err := insertTags(ctx, tx, seq, int64(ev.CreatedAt), tags); err != nil {
		return 0, err
	}
	size.add(1, n)
	if err := s.evictPeer(ctx, tx, size, peer, seq); err != nil {
		return 0, err
	}
	if err := s.evict(ctx, tx, size, seq); err != nil {
		return 0, err
	}
	return saved, nil
}

// write runs f in one transaction of the writer, given the store's
// totals as they stand; once it commits, the totals are what f left
// them. f's error rolls it back, and the totals stay. Every write of
// events goes through it, so that the totals are the database's.
func (s *store) write(ctx context.Context, f func(tx *sql.Tx, size *totals) error) error {
	s.sizeMu.Lock()
	defer s.sizeMu.Unlock()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("begin: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	size := totals{events: s.events, bytes: s.bytes}
	if err := f(tx, &size); err != nil {
		return err
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("commit: %w", err)
	}
	s.events, s.bytes = size.events, size.bytes
	s.evicted.Add(size.evicted)
	s.peerEvicted.Add(size.peerEvicted)
	return nil
}

// totals are the events stored and what they count against the bound
// (see eventSize); evicted counts the events a write deleted to make
// room, peerEvicted those it deleted past their peer's share.
type totals struct{ events, bytes, evicted, peerEvicted int64 }

// eventSize is what an event counts against the store's byte bound: its
// JSON, and its indexed tags twice (the tags table and its index), which
// is about what it takes on disk.
func eventSize(raw []byte, tags [][2]string) int64 {
	n := int64(len(raw))
	for _, t := range tags {
		n += 2 * int64(len(t[0])+len(t[1]))
	}
	return n
}

func (t *totals) add(events, bytes int64) { t.events += events; t.bytes += bytes }

// evict deletes in tx the oldest stored events, tier by tier (regular
// events first, in the order they were stored; then the others), but for
// the event numbered except and the replaceable and addressable events of
// the keep authors, until size is within the store's bound; it updates
// size, evicted included.
//
// A relay that anyone can publish to keeps what the bound allows: a
// flood of events pushes the oldest out rather than fill the disk, and
// the node's own card (the keep author's addressable event) stays.
func (s *store) evict(ctx context.Context, tx *sql.Tx, size *totals, except int64) error {
	over := func() bool { return size.events > s.maxEvents || size.bytes > s.maxBytes }
	return deleteOldest(ctx, tx, s.evictions, nil, except, over, func(n int64) {
		size.add(-1, -n)
		size.evicted++
	})
}

// evictPeer deletes in tx the oldest events of peer, tier by tier as
// evict does, but for the event numbered except, until the peer is
// within its share; it updates size, peerEvicted included. A peer ""
// and a store without shares have none.
func (s *store) evictPeer(ctx context.Context, tx *sql.Tx, size *totals, peer string, except int64) error {
	if peer == "" || s.peerEvictions == nil {
		return nil
	}
	var held totals
	switch err := tx.QueryRowContext(ctx, "SELECT events, bytes FROM peer_usage WHERE peer = ?", peer).Scan(&held.events, &held.bytes); {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("read what the peer holds: %w", err)
	}
	over := func() bool { return held.events > s.peerEvents || held.bytes > s.peerBytes }
	return deleteOldest(ctx, tx, s.peerEvictions, []any{peer}, except, over, func(n int64) {
		held.add(-1, -n)
		size.add(-1, -n)
		size.peerEvicted++
	})
}

// deleteOldest deletes in tx the events that tiers select (each query
// taking lead, a seq to start after and one to spare, its args, then a
// limit), oldest first, tier after tier, while over holds; deleted is
// told what each counted (see eventSize).
func deleteOldest(ctx context.Context, tx *sql.Tx, tiers []eviction, lead []any, except int64, over func() bool, deleted func(int64)) error {
	const batch = 8 // one event a save, as a rule
	for _, tier := range tiers {
		for after := int64(-1); over(); {
			args := append(append(append(append([]any{}, lead...), after, except), tier.args...), batch)
			rows, err := tx.QueryContext(ctx, tier.query, args...)
			if err != nil {
				return fmt.Errorf("find the oldest events: %w", err)
			}
			var seqs []int64
			for rows.Next() {
				if err := rows.Scan(&after); err != nil {
					rows.Close()
					return fmt.Errorf("find the oldest events: %w", err)
				}
				seqs = append(seqs, after)
			}
			if err := errors.Join(rows.Err(), rows.Close()); err != nil {
				return fmt.Errorf("find the oldest events: %w", err)
			}
			if len(seqs) == 0 {
				break // none left in this tier
			}
			for _, seq := range seqs {
				if !over() {
					break
				}
				n, err := deleteSeq(ctx, tx, seq)
				if err != nil {
					return err
				}
				deleted(n)
			}
		}
	}
	return nil
}

// trim counts what the database holds and, should a peer be past its
// share or the store past its bound (lowered since the events were
// stored), deletes the oldest.
func (s *store) trim(ctx context.Context) error {
	return s.write(ctx, func(tx *sql.Tx, size *totals) error {
		if err := tx.QueryRowContext(ctx, "SELECT count(*), coalesce(sum(coalesce(size, length(raw))), 0) FROM events").Scan(&size.events, &size.bytes); err != nil {
			return fmt.Errorf("count stored events: %w", err)
		}
		if s.peerEvictions != nil {
			peers, err := overShare(ctx, tx, s.peerEvents, s.peerBytes)
			if err != nil {
				return err
			}
			for _, p := range peers {
				if err := s.evictPeer(ctx, tx, size, p, -1); err != nil {
					return err
				}
			}
		}
		return s.evict(ctx, tx, size, -1)
	})
}

// overShare returns the peers that hold more than events or bytes.
func overShare(ctx context.Context, tx *sql.Tx, events, bytes int64) ([]string, error) {
	peers, err := sqldb.Column[string](tx.QueryContext(ctx, "SELECT peer FROM peer_usage WHERE events > ? OR bytes > ?", events, bytes))
	if err != nil {
		return nil, fmt.Errorf("find the peers past their share: %w", err)
	}
	return peers, nil
}

// takeEvicted returns how many events were deleted to make room since
// the last call.
func (s *store) takeEvicted() (bound, share int64) {
	return s.evicted.Swap(0), s.peerEvicted.Swap(0)
}

// indexedTags returns the tags of ev that are indexed: (name, first
// value) of every tag that has a value, once per distinct pair.
func indexedTags(ev *nostr.Event) [][2]string { return tagsOf(ev).pairs }

// insertTags indexes tags (see indexedTags) of the event numbered seq,
// created at createdAt.
func insertTags(ctx context.Context, tx *sql.Tx, seq, createdAt int64, tags [][2]string) error {
	const batch = 200
	var sb strings.Builder
	args := make([]any, 0, 4*min(batch, len(tags)))
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
	for _, t := range tags {
		if len(args) == 0 {
			sb.WriteString("INSERT INTO tags (event_seq, name, value, created_at) VALUES (?, ?, ?, ?)")
		} else {
			sb.WriteString(", (?, ?, ?, ?)")
		}
		args = append(args, seq, t[0], t[1], createdAt)
		if len(args) == 4*batch {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	return flush()
}

// deleteSeq deletes the event numbered seq and its tags, and returns what
// it counted against the bound.
func deleteSeq(ctx context.Context, tx *sql.Tx, seq int64) (int64, error) {
	if _, err := tx.ExecContext(ctx, "DELETE FROM tags WHERE event_seq = ?", seq); err != nil {
		return 0, fmt.Errorf("delete tags: %w", err)
	}
	var n int64
	if err := tx.QueryRowContext(ctx, "DELETE FROM events WHERE seq = ? RETURNING coalesce(size, length(raw))", seq).Scan(&n); err != nil {
		return 0, fmt.Errorf("delete event: %w", err)
	}
	return n, nil
}

// storedEvent is one query result.
type storedEvent struct {
	id        string
	createdAt int64
	raw       []byte
}

// mayMatch reports whether a query of f for up to limit events may find
// any: false means query answers none without asking the database.
func (s *store) mayMatch(f *filter, limit int) bool {
	return limit > 0 && !f.matchesNothing() && s.storedSince(f)
}

// query returns up to limit stored events matching f that have not expired
// at now, newest first (ties: lowest id first), and stops before an event
// that would take their JSON over maxBytes (maxBytes < 0: no bound); it
// reports whether it stopped for maxBytes (at once when maxBytes is 0:
// events may match that were not looked for).
func (s *store) query(ctx context.Context, f *filter, limit, maxBytes int, now int64) ([]storedEvent, bool, error) {
	if !s.mayMatch(f, limit) {
		return nil, false, nil
	}
	if maxBytes == 0 {
		return nil, true, nil // events may match: none is looked for
	}
	drive, empty, err := s.choose(ctx, f)
	if err != nil {
		return nil, false, err
	}
	if empty {
		return nil, false, nil
	}
	q, args := buildQuery(f, drive, limit, now)
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, false, fmt.Errorf("query events: %w", err)
	}
	defer rows.Close()
	var out []storedEvent
	cut := false
	for rows.Next() {
		var e storedEvent
		if err := rows.Scan(&e.id, &e.createdAt, &e.raw); err != nil {
			return nil, false, fmt.Errorf("scan event: %w", err)
		}
		if maxBytes >= 0 {
			if maxBytes -= len(e.raw); maxBytes < 0 {
				cut = true
				break
			}
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, false, fmt.Errorf("query events: %w", err)
	}
	return out, cut, nil
}

// driveEvents is the driver of a query whose rows come from the events
// table (by id, author or kind); a driver of 0 or more is the index of
// the tag condition whose rows in the tags table drive it.
const driveEvents = -1

// probeRows bounds what choose counts of each condition: enough to tell
// a narrow condition from a common one, at the cost of an index range
// that long at most.
const probeRows = 1000

// fewRows is a count of rows that a query reads in less time than choose
// would take to count the other conditions: a condition matching fewer
// drives the query at once.
const fewRows = 64

// choose returns what drives the query of f: ids if any; else, of its
// conditions on authors (with kinds), on each tag and on kinds, one that
// matches few rows, counted in their indexes. A common tag paired with
// an author or a kind that matches nothing would otherwise read every row
// of that tag.
//
// The tag conditions are counted first, an event's (#e) first and then
// those with the fewest values, as these tend to be the rarest: a
// subscription for the replies to one event counts one short index range
// and goes. Each condition is counted up to fewRows, and the first below
// drives. When none is, each is counted up to probeRows and the fewest
// drives; ties (past probeRows each) go to the tag with the fewest
// values, whose index gives the rows newest first, so that the query
// stops at its limit. empty reports that a condition matches nothing
// stored, and so does f.
func (s *store) choose(ctx context.Context, f *filter) (drive int, empty bool, err error) {
	if f.ids != nil {
		return driveEvents, false, nil
	}
	var byRarity []int // the tag conditions, likely rarest first
	for i := range f.tags {
		byRarity = append(byRarity, i)
	}
	slices.SortStableFunc(byRarity, func(a, b int) int {
		ta, tb := f.tags[a], f.tags[b]
		return cmp.Or(
			cmp.Compare(boolRank(ta.name != "e"), boolRank(tb.name != "e")),
			cmp.Compare(len(ta.values), len(tb.values)),
		)
	})
	type candidate struct {
		drive int
		count func(limit int) (string, []any)
	}
	var cands []candidate
	events := func(limit int) (string, []any) {
		var b sqlBuilder
		b.sb.WriteString("SELECT count(*) FROM (SELECT 1 FROM events WHERE 1")
		if f.authors != nil {
			b.in("pubkey", anys(f.authors))
		}
		if f.kinds != nil {
			b.in("kind", anys(f.kinds))
		}
		b.between(f, "created_at")
		b.sb.WriteString(" LIMIT ?)")
		return b.sb.String(), append(b.args, limit)
	}
	for _, i := range byRarity {
		t := f.tags[i]
		cands = append(cands, candidate{i, func(limit int) (string, []any) {
			var b sqlBuilder
			b.sb.WriteString("SELECT count(*) FROM (SELECT 1 FROM tags WHERE name = ?")
			b.args = append(b.args, t.name)
			b.in("value", anys(t.values))
			b.between(f, "created_at")
			b.sb.WriteString(" LIMIT ?)")
			return b.sb.String(), append(b.args, limit)
		}})
	}
	if f.authors != nil || f.kinds != nil {
		cands = append(cands, candidate{driveEvents, events})
	}
	switch len(cands) {
	case 0:
		return driveEvents, false, nil
	case 1:
		return cands[0].drive, false, nil
	}
	count := func(c candidate, limit int) (int, error) {
		q, args := c.count(limit)
		var n int
		if err := s.r.QueryRowContext(ctx, q, args...).Scan(&n); err != nil {
			return 0, fmt.Errorf("count matching rows: %w", err)
		}
		return n, nil
	}
	for _, c := range cands {
		n, err := count(c, fewRows)
		if err != nil {
			return 0, false, err
		}
		if n < fewRows {
			return c.drive, n == 0, nil
		}
	}
	best, bestRows := cands[0].drive, probeRows+1
	for _, c := range cands {
		n, err := count(c, bestRows)
		if err != nil {
			return 0, false, err
		}
		if n < bestRows {
			best, bestRows = c.drive, n
		}
	}
	return best, false, nil
}

// boolRank is 1 for true, 0 for false: false sorts first.
func boolRank(b bool) int {
	if b {
		return 1
	}
	return 0
}

// sqlBuilder builds a statement and its arguments.
type sqlBuilder struct {
	sb   strings.Builder
	args []any
}

// in adds "AND col IN (vals…)".
func (b *sqlBuilder) in(col string, vals []any) {
	b.sb.WriteString(" AND ")
	b.sb.WriteString(col)
	b.sb.WriteString(" IN (")
	for i := range vals {
		if i > 0 {
			b.sb.WriteString(", ")
		}
		b.sb.WriteByte('?')
	}
	b.sb.WriteByte(')')
	b.args = append(b.args, vals...)
}

// between adds f's since and until, on col.
func (b *sqlBuilder) between(f *filter, col string) {
	if f.hasSince {
		b.sb.WriteString(" AND " + col + " >= ?")
		b.args = append(b.args, f.since)
	}
	if f.hasUntil {
		b.sb.WriteString(" AND " + col + " <= ?")
		b.args = append(b.args, f.until)
	}
}

// buildQuery turns f into SQL, driven by drive (see choose). Driven by a
// tag condition, its rows in the tags table, in created_at order, are
// joined to their events, and the other conditions filter them; driven
// by the events table, SQLite picks the index of ids, authors or kinds.
// The other tag conditions are lookups of the event's own tags.
func buildQuery(f *filter, drive, limit int, now int64) (string, []any) {
	var b sqlBuilder
	order := "e.created_at"
	if drive >= 0 {
		t := f.tags[drive]
		// An event is indexed once per (name, value), so only a driving
		// condition with several values can meet it twice.
		if len(t.values) > 1 {
			b.sb.WriteString("SELECT DISTINCT")
		} else {
			b.sb.WriteString("SELECT")
		}
		b.sb.WriteString(" e.id, e.created_at, e.raw FROM tags d CROSS JOIN events e ON e.seq = d.event_seq WHERE d.name = ?")
		b.args = append(b.args, t.name)
		b.in("d.value", anys(t.values))
		order = "d.created_at"
	} else {
		b.sb.WriteString("SELECT e.id, e.created_at, e.raw FROM events e WHERE 1")
	}
	b.sb.WriteString(" AND (e.expiration IS NULL OR e.expiration > ?)")
	b.args = append(b.args, now)
	if f.ids != nil {
		b.in("e.id", anys(f.ids))
	}
	if f.authors != nil {
		b.in("e.pubkey", anys(f.authors))
	}
	if f.kinds != nil {
		b.in("e.kind", anys(f.kinds))
	}
	b.between(f, order)
	for i, t := range f.tags {
		if i == drive {
			continue
		}
		// Correlated: the few tags of each candidate event, through
		// tags_event, never a list of every event a common tag has.
		b.sb.WriteString(" AND EXISTS (SELECT 1 FROM tags t WHERE t.event_seq = e.seq AND t.name = ?")
		b.args = append(b.args, t.name)
		b.in("t.value", anys(t.values))
		b.sb.WriteByte(')')
	}
	b.sb.WriteString(" ORDER BY " + order + " DESC, e.id ASC LIMIT ?")
	b.args = append(b.args, limit)
	return b.sb.String(), b.args
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
	var n int64
	err := s.write(ctx, func(tx *sql.Tx, size *totals) error {
		const expired = "SELECT seq FROM events WHERE expiration IS NOT NULL AND expiration <= ?"
		if _, err := tx.ExecContext(ctx, "DELETE FROM tags WHERE event_seq IN ("+expired+")", now); err != nil {
			return fmt.Errorf("delete expired tags: %w", err)
		}
		rows, err := tx.QueryContext(ctx, "DELETE FROM events WHERE seq IN ("+expired+") RETURNING coalesce(size, length(raw))", now)
		if err != nil {
			return fmt.Errorf("delete expired events: %w", err)
		}
		defer rows.Close()
		for rows.Next() {
			var b int64
			if err := rows.Scan(&b); err != nil {
				return fmt.Errorf("delete expired events: %w", err)
			}
			n++
			size.add(-1, -b)
		}
		if err := rows.Err(); err != nil {
			return fmt.Errorf("delete expired events: %w", err)
		}
		return nil
	})
	return n, err
}

// count returns the number of stored events (expired ones included).
func (s *store) count(ctx context.Context) (int64, error) {
	var n int64
	if err := s.r.QueryRowContext(ctx, "SELECT count(*) FROM events").Scan(&n); err != nil {
		return 0, fmt.Errorf("count events: %w", err)
	}
	return n, nil
}
