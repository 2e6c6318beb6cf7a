package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/snapnode/snapnode/internal/periodic"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/snap"
)

// ReplayStore is the durable snap.ReplayStore in the tasks' database (the
// replay table). Records survive restarts and are shared by every process
// on the database: of several replicas receiving one message, exactly one
// Remember is fresh, and only that replica processes it; the record keeps
// the delivery (ReplayRecord.Via) that carried it, which lets the others
// stay silent. It is also the snap.ResultStore: a message/send result is
// kept in the row of its request, so that a retry reaching any replica,
// before or after a restart, gets the original result.
//
// Expired records are treated as absent at once (Lookup, Remember) and
// deleted by Sweep; nothing sweeps on its own. Call Sweep now and then,
// or run RunSweeper.
type ReplayStore struct {
	s *Store
	// noSync: Remember's commit does not wait for the disk.
	noSync bool
	// batch is sweepBatch, or a test's.
	batch int
}

var (
	_ snap.ReplayStore = (*ReplayStore)(nil)
	_ snap.ResultStore = (*ReplayStore)(nil)
)

// ReplayStore returns the store's replay record, whose Remember commits
// as every write of the store does: on disk before it returns.
func (s *Store) ReplayStore() *ReplayStore { return s.replay }

// ReplayStoreNoSync returns the store's replay record, whose Remember
// does not wait for the disk (see Remember). Use it only where whatever a
// request does that must not happen twice is a write to this store's
// database, each of which waits for the disk: the tasks of this Store,
// and the records other components (the executor, the agent's jobs) keep
// in the same database before they act. A request that may act elsewhere
// first (a handler that writes a file or calls a service without writing
// here) needs ReplayStore.
func (s *Store) ReplayStoreNoSync() *ReplayStore { return s.replayNoSync }

// Lookup implements snap.ReplayStore.
func (rs *ReplayStore) Lookup(ctx context.Context, from, id string, now time.Time) (snap.ReplayRecord, bool, error) {
	s := rs.s
	if err := s.start(ctx, "replay lookup"); err != nil {
		return snap.ReplayRecord{}, false, err
	}
	rec, err := scanReplay(s.st.lookup.QueryRowContext(ctx, from, id, micros(now)))
	if errors.Is(err, sql.ErrNoRows) {
		return snap.ReplayRecord{}, false, nil
	}
	if err != nil {
		return snap.ReplayRecord{}, false, dbError("replay lookup", from+" "+id, err)
	}
	return rec, true, nil
}

// Remember implements snap.ReplayStore: it records (from, id) unless an
// unexpired record exists (one whose Expires is after rec.FirstSeen), in
// one statement that the database makes atomic across connections and
// processes (INSERT … ON CONFLICT DO UPDATE … WHERE expired). When it did
// not record, it returns the record that stopped it.
//
// The replay store of ReplayStoreNoSync commits the record without
// waiting for the disk (sqldb's WriteNoSync; on PostgreSQL the statement
// sets synchronous_commit off for its own transaction). That is safe
// because which call is fresh is decided when the row is inserted, not
// when it reaches the disk, and because the record then guards only
// writes to this same database: whatever a fresh request makes durable
// (its task, a cancel, an operator's decision, the executor's record of
// an action, always written before the action's effect) is a later commit
// that waits for the disk, and that flush carries the record with it
// (both databases write their log in commit order and flush it up to the
// commit being made). A killed process loses nothing: the record is in the
// operating system's cache (SQLite) or the server's (PostgreSQL). A power
// cut may lose the record of a request that left nothing durable, which a
// replay then gets the same answer to, without effect.
func (rs *ReplayStore) Remember(ctx context.Context, from, id string, rec snap.ReplayRecord) (snap.ReplayRecord, bool, error) {
	s := rs.s
	if err := s.start(ctx, "replay remember"); err != nil {
		return snap.ReplayRecord{}, false, err
	}
	if s.d == sqldb.Postgres {
		return rs.rememberPostgres(ctx, from, id, rec)
	}
	var (
		prior snap.ReplayRecord
		fresh bool
	)
	key := from + " " + id
	write := s.db.Write
	if rs.noSync {
		write = s.db.WriteNoSync
	}
	err := s.commit(ctx, write, "replay remember", key, func(ctx context.Context, tx *sql.Tx) (err error) {
		prior, fresh, err = s.claimIn(ctx, tx, "replay remember", s.st.remember, from, id, recordArgs(rec)...)
		return err
	})
	if err != nil {
		return snap.ReplayRecord{}, false, err
	}
	return prior, fresh, nil
}

// rememberAttempts bounds how often rememberPostgres tries again when the
// record that stopped it is gone before it could read it.
const rememberAttempts = 3

// rememberPostgres is Remember on PostgreSQL: one autocommitted
// statement (rememberNoSync or remember), one round trip to the server, for
// a fresh record (see claimOrPrior for one that is not).
func (rs *ReplayStore) rememberPostgres(ctx context.Context, from, id string, rec snap.ReplayRecord) (snap.ReplayRecord, bool, error) {
	s := rs.s
	key := from + " " + id
	stmt := s.st.remember
	if rs.noSync {
		stmt = s.st.rememberNoSync
	}
	return s.claimOrPrior(ctx, "replay remember", from, id, func() (bool, error) {
		n, err := sqldb.Affected(stmt.ExecContext(ctx, append([]any{from, id}, recordArgs(rec)...)...))
		if err != nil {
			return false, dbError("replay remember", key, err)
		}
		return n > 0, nil
	})
}

// claimIn runs stmt, an INSERT … ON CONFLICT … WHERE expired of the
// replay record of (from, id) whose arguments after the pair are args,
// in tx, and when it wrote nothing reads the record that stopped it. On
// SQLite the database is held by tx until commit (its single writer), so
// the conflicting row is still there; on PostgreSQL the INSERT waited for
// the transaction that wrote the row, and the read (READ COMMITTED) sees
// it committed, or fails, tx with it, should it be swept meanwhile. op
// names the call in errors.
func (s *Store) claimIn(ctx context.Context, tx *sql.Tx, op string, stmt *sql.Stmt, from, id string, args ...any) (prior snap.ReplayRecord, fresh bool, err error) {
	key := from + " " + id
	n, err := sqldb.Affected(tx.StmtContext(ctx, stmt).ExecContext(ctx, append([]any{from, id}, args...)...))
	if err != nil {
		return snap.ReplayRecord{}, false, dbError(op, key, err)
	}
	if n > 0 {
		return snap.ReplayRecord{}, true, nil
	}
	if prior, err = scanReplay(tx.StmtContext(ctx, s.st.rememberPrior).QueryRowContext(ctx, from, id)); err != nil {
		return snap.ReplayRecord{}, false, dbError(op, key, err)
	}
	return prior, false, nil
}

// claimOrPrior runs write, a PostgreSQL statement that writes the replay
// record of (from, id) unless an unexpired one holds the pair and
// reports whether it wrote it, and, when it did not, reads the record
// that stopped it (a second round trip): a committed record, since the
// statement waited for the transaction that made it. Should that record
// be gone by then (expired and swept), write runs again, at most
// rememberAttempts times. op names the call in errors.
func (s *Store) claimOrPrior(ctx context.Context, op, from, id string, write func() (bool, error)) (prior snap.ReplayRecord, fresh bool, err error) {
	key := from + " " + id
	for range rememberAttempts {
		if fresh, err := write(); err != nil || fresh {
			return snap.ReplayRecord{}, fresh, err
		}
		prior, err := scanReplay(s.st.rememberPrior.QueryRowContext(ctx, from, id))
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return snap.ReplayRecord{}, false, dbError(op, key, err)
		}
		return prior, false, nil
	}
	return snap.ReplayRecord{}, false, fmt.Errorf("sqlstore: %s %s: the record that stopped it vanished %d times", op, key, rememberAttempts)
}

// SaveResult implements snap.ResultStore: it keeps result in the replay
// record of (from, id), extending the record to expires if that is later.
// A pair with no record (the store was swept, or the message was never
// remembered here) keeps nothing.
func (rs *ReplayStore) SaveResult(ctx context.Context, from, id string, result []byte, expires time.Time) error {
	s := rs.s
	if err := s.start(ctx, "save result"); err != nil {
		return err
	}
	exp := ceilMicros(expires)
	_, err := s.exec1(ctx, "save result", from+" "+id, s.st.saveResult, result, exp, exp, from, id)
	return err
}

// LoadResult implements snap.ResultStore.
func (rs *ReplayStore) LoadResult(ctx context.Context, from, id string, now time.Time) ([]byte, bool, error) {
	s := rs.s
	if err := s.start(ctx, "load result"); err != nil {
		return nil, false, err
	}
	var result []byte
	err := s.st.loadResult.QueryRowContext(ctx, from, id, micros(now)).Scan(&result)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, dbError("load result", from+" "+id, err)
	}
	return result, true, nil
}

// Recorded returns which of the Nostr deliveries named by eventIDs (the
// snap.Inbound.Via of the messages they carried) have a replay record:
// some process on the database took the message they carried. On
// PostgreSQL an index answers it (migration 0005); on SQLite, where no
// other process shares the file, the table is read whole, so keep it off
// any hot path there.
func (rs *ReplayStore) Recorded(ctx context.Context, eventIDs []string) (map[string]bool, error) {
	s := rs.s
	out := make(map[string]bool, len(eventIDs))
	if len(eventIDs) == 0 {
		return out, nil
	}
	if err := s.start(ctx, "replay recorded"); err != nil {
		return nil, err
	}
	if s.db.Dialect == sqldb.Postgres {
		return out, rs.recorded(ctx, out, `SELECT via FROM replay WHERE via = ANY($1) AND via <> ''`, eventIDs)
	}
	// SQLite binds at most 32,766 parameters a statement: in slices.
	for part := range slices.Chunk(eventIDs, 500) {
		args := make([]any, len(part))
		for i, id := range part {
			args[i] = id
		}
		if err := rs.recorded(ctx, out, `SELECT via FROM replay WHERE via <> '' AND via IN (?`+strings.Repeat(`, ?`, len(part)-1)+`)`, args...); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// recorded adds to out the deliveries query returns.
func (rs *ReplayStore) recorded(ctx context.Context, out map[string]bool, query string, args ...any) error {
	for rows, err := range sqldb.Rows(rs.s.db.R.QueryContext(ctx, query, args...)) {
		var via string
		if err == nil {
			err = rows.Scan(&via)
		}
		if err != nil {
			return dbError("replay recorded", "", err)
		}
		out[via] = true
	}
	return nil
}

// sweepBatch is how many records one transaction of Sweep deletes at most
// (a test sets a ReplayStore's batch lower).
const sweepBatch = 5000

// MinSweepMargin is the least time a record is kept after its expiry
// (Sweep): the SNAP timestamp window of a node that keeps the default.
const MinSweepMargin = snap.DefaultMaxDrift

// Sweep deletes the records that expired a margin or more before now, in
// batches so that other writers are not held up, and returns how many it
// deleted. Expired records not yet deleted are absent all the same to
// Lookup and Remember.
//
// The margin is there for the clocks of the processes sharing the
// database: a record's expiry was set by the clock of the process that
// wrote it, now is the sweeping one's. It is half the record's lifetime
// (Expires − FirstSeen), at least MinSweepMargin: a Validator keeps a
// record for at least twice its timestamp window, so the margin is at
// least the window the writer used. A sweeping process whose clock runs
// up to that far ahead of the writer's deletes no record the writer (or
// a process whose clock agrees with it) still needs to refuse a replay;
// a clock further off than the window misjudges the messages' timestamps
// anyway.
func (rs *ReplayStore) Sweep(ctx context.Context, now time.Time) (int64, error) {
	batch := int64(rs.batch)
	s := rs.s
	var total int64
	for {
		if err := s.start(ctx, "replay sweep"); err != nil {
			return total, err
		}
		res, err := s.exec1(ctx, "replay sweep", "", s.st.sweep, micros(now.Add(-MinSweepMargin)), micros(now), batch)
		if err != nil {
			return total, err
		}
		n, err := res.RowsAffected()
		if err != nil {
			return total, dbError("replay sweep", "", err)
		}
		total += n
		if n < batch {
			return total, nil
		}
	}
}

// RunSweeper sweeps expired records every interval until ctx is done, and
// then returns ctx's error. A failed sweep is retried at the next tick;
// report, if not nil, is told of each sweep. A sweep is given up after
// bound (see periodic.Pass).
func (rs *ReplayStore) RunSweeper(ctx context.Context, interval, bound time.Duration, report func(deleted int64, err error)) error {
	if interval <= 0 {
		return fmt.Errorf("sqlstore: replay sweeper: interval %v", interval)
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	return periodic.Run(ctx, "replay sweep", tick.C, bound, rs.Sweep, report)
}

// Len returns the number of records held, expired ones not yet swept
// included.
func (rs *ReplayStore) Len(ctx context.Context) (int64, error) {
	if err := rs.s.start(ctx, "replay len"); err != nil {
		return 0, err
	}
	var n int64
	if err := rs.s.r.QueryRowContext(ctx, "SELECT count(*) FROM replay").Scan(&n); err != nil {
		return 0, dbError("replay len", "", err)
	}
	return n, nil
}

func scanReplay(r *sql.Row) (snap.ReplayRecord, error) {
	var (
		first, expires int64
		fp             []byte
		via            string
	)
	if err := r.Scan(&first, &expires, &fp, &via); err != nil {
		return snap.ReplayRecord{}, err
	}
	rec := snap.ReplayRecord{FirstSeen: fromMicros(first), Expires: fromMicros(expires), Via: via}
	if copy(rec.Fingerprint[:], fp) != len(rec.Fingerprint) || len(fp) != len(rec.Fingerprint) {
		return snap.ReplayRecord{}, fmt.Errorf("fingerprint of %d bytes", len(fp))
	}
	return rec, nil
}

// ceilMicros rounds an expiry up to the microsecond, so that a record is
// never forgotten before its time.
func ceilMicros(t time.Time) int64 {
	us := t.UnixMicro()
	if time.UnixMicro(us).Before(t) {
		us++
	}
	return us
}
