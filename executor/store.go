package executor

import (
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/sqldb"
)

// The executor's tables, embedded one folder per dialect (see
// sqldb.Migrations) and recorded in snapnode_migrations as "executor"
// (older builds kept them in executor_migrations).
//
//go:embed migrations
var migrationFiles embed.FS

func migrations() sqldb.Migrations {
	return sqldb.Embedded(migrationFiles, "migrations", "executor").Replacing("executor_migrations")
}

// The states of an action record. A record exists only for an action that
// was held for confirmation or went on to promotion; reads, THINK and
// FINISH that ran at once live in the audit log alone.
const (
	statePending     = "pending"      // held: waits for Approve or Deny
	stateApproving   = "approving"    // an Approve has claimed it
	statePromoting   = "promoting"    // the snapshot is stored, Promote runs
	statePromoted    = "promoted"     // its effects are in the workspace
	stateRollingBack = "rolling_back" // a Rollback has claimed it
	stateRolledBack  = "rolled_back"  // its effects were undone
	stateCompleted   = "completed"    // an approved action without effects ran
	stateDenied      = "denied"       // an operator denied it
	stateFailed      = "failed"       // it failed after being held or staged
)

// PreImage is what one path held when a diff was made: the state the
// operator is asked to confirm a change against.
type PreImage struct {
	Path   string       `json:"path"`
	Kind   sandbox.Kind `json:"kind"`
	Size   int64        `json:"size,omitempty"`
	SHA256 string       `json:"sha256,omitempty"`
}

// record is one row of executor_actions.
type record struct {
	ActionID   string
	Task       string
	Requester  string
	ProposalID string
	Action     string
	State      string
	Data       []byte
	Diff       string
	PreImages  []PreImage
	Reason     string
	Snapshot   []byte // JSON of a sandbox.Snapshot, or nil
	// SnapshotAt is when Snapshot was stored (zero without one).
	SnapshotAt time.Time
	// SnapshotPruned is when the snapshot was pruned (zero when never):
	// the record then has none, and cannot be rolled back.
	SnapshotPruned time.Time
	Created        time.Time
	Updated        time.Time
	RolledBack     time.Time // zero when never
	// Growth is what the action adds to its requester's usage, each
	// count at zero or more: set when it goes promoting, and counted
	// against the requester's quotas while it is (see quotaTx).
	Growth sandbox.Counts
	// Claim is the token of the call that holds the record (claim_token):
	// one of its own, new at each claim, while the record is in a held
	// state (see heldState), "" otherwise. Every write is conditioned on it as
	// well as on the state, so that a call whose claim another process's
	// recovery took up (and that a new claim may have made approving,
	// say, again) finds that it no longer holds the action.
	Claim string
}

// heldState reports whether state is one a call holds, under its claim
// token: approving, promoting, rolling_back.
func heldState(state string) bool {
	return state == stateApproving || state == statePromoting || state == stateRollingBack
}

// claimToken is the claim_token r is written with: its Claim while it is
// in a held state, "" otherwise (the call let it go).
func (r *record) claimToken() string {
	if heldState(r.State) {
		return r.Claim
	}
	return ""
}

// newClaim returns a new claim token.
func newClaim() string { return uuid.NewString() }

// store keeps the records in the shared database.
type store struct {
	db *sqldb.DB
	d  *sqldb.Dialect
}

const recordColumns = `action_id, task, requester, proposal_id, action, state, data, diff,
	pre_images, reason, snapshot, created_at, updated_at, rolled_back_at,
	snapshot_at, snapshot_bytes, snapshot_pruned_at, grow_bytes, grow_files, grow_dirs, claim_token`

// firstOpenEntry is the audit log's audit.OpenFunc: the first entry among
// from…to of an action whose record is in a state an operator's decision
// or a call still has to end (held, being approved, promoted or rolled
// back). It reads those entries in order, each with its action's record
// (the primary key), and stops at the first such; an action that has no
// record ran at once and is not open.
func (s *store) firstOpenEntry(ctx context.Context, tx *sql.Tx, from, to int64) (int64, error) {
	var seq int64
	err := tx.QueryRowContext(ctx, s.d.Rebind(`SELECT l.seq FROM audit_log l JOIN executor_actions a ON a.action_id = l.action
		WHERE l.seq >= ? AND l.seq <= ? AND l.action <> '' AND a.state IN (?, ?, ?, ?) ORDER BY l.seq LIMIT 1`),
		from, to, statePending, stateApproving, statePromoting, stateRollingBack).Scan(&seq)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("executor: actions still open: %w", err)
	}
	return seq, nil
}

// insertTx adds r as a new record, in tx.
func (s *store) insertTx(ctx context.Context, tx *sql.Tx, r *record) error {
	pre, err := json.Marshal(nonNil(r.PreImages))
	if err != nil {
		return err
	}
	q := s.d.Rebind(`INSERT INTO executor_actions (` + recordColumns + `)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`)
	at, size := r.snapshotStamp()
	_, err = tx.ExecContext(ctx, q, r.ActionID, r.Task, r.Requester, r.ProposalID, r.Action,
		r.State, r.Data, r.Diff, string(pre), r.Reason, string(r.Snapshot),
		sqldb.Micros(r.Created), sqldb.Micros(r.Updated), sqldb.Micros(r.RolledBack), at, size, sqldb.Micros(r.SnapshotPruned),
		r.Growth.Bytes, r.Growth.Files, r.Growth.Dirs, r.claimToken())
	if err != nil {
		return fmt.Errorf("executor: store action %s: %w", r.ActionID, err)
	}
	return nil
}

// snapshotStamp is the snapshot_at and snapshot_bytes of r: zero without
// a snapshot.
func (r *record) snapshotStamp() (at, size int64) {
	if len(r.Snapshot) == 0 {
		return 0, 0
	}
	return sqldb.Micros(r.SnapshotAt), int64(len(r.Snapshot))
}

// updateTx writes r's mutable columns (state, diff, pre-images, reason,
// snapshot, times, growth, claim token), in tx, if the record is still in
// state from under r's claim token (r.Claim: the one this call's claim
// wrote, or the one it read), and reports whether it was: a record another
// call moved on, or claimed since, is left alone.
func (s *store) updateTx(ctx context.Context, tx *sql.Tx, r *record, from string) (bool, error) {
	pre, err := json.Marshal(nonNil(r.PreImages))
	if err != nil {
		return false, err
	}
	q := s.d.Rebind(`UPDATE executor_actions SET state = ?, diff = ?, pre_images = ?, reason = ?,
		snapshot = ?, snapshot_at = ?, snapshot_bytes = ?, updated_at = ?, rolled_back_at = ?,
		grow_bytes = ?, grow_files = ?, grow_dirs = ?, claim_token = ?
		WHERE action_id = ? AND state = ? AND claim_token = ?`)
	at, size := r.snapshotStamp()
	res, err := tx.ExecContext(ctx, q, r.State, r.Diff, string(pre), r.Reason, string(r.Snapshot), at, size,
		sqldb.Micros(r.Updated), sqldb.Micros(r.RolledBack), r.Growth.Bytes, r.Growth.Files, r.Growth.Dirs, r.claimToken(),
		r.ActionID, from, r.Claim)
	return affectedOne(res, err, "update", r.ActionID)
}

// update is updateTx in a transaction of its own.
func (s *store) update(ctx context.Context, r *record, from string) (ok bool, err error) {
	err = s.write(ctx, "update", r.ActionID, func(ctx context.Context, tx *sql.Tx) error {
		ok, err = s.updateTx(ctx, tx, r, from)
		return err
	})
	return ok, err
}

// claim moves the record from state from (one no call holds) to the held
// state to, in a transaction of its own, under a new claim token, and
// returns the token when this call did it: of two calls racing for one
// record, one wins. The call's later writes are conditioned on the token
// (updateTx, releaseTx): a recovery that takes the action up, and any
// claim after it, leaves the record with another.
func (s *store) claim(ctx context.Context, actionID, from, to string, now time.Time) (token string, ok bool, err error) {
	token = newClaim()
	err = s.write(ctx, "claim", actionID, func(ctx context.Context, tx *sql.Tx) error {
		q := s.d.Rebind(`UPDATE executor_actions SET state = ?, updated_at = ?, claim_token = ? WHERE action_id = ? AND state = ?`)
		res, err := tx.ExecContext(ctx, q, to, sqldb.Micros(now), token, actionID, from)
		ok, err = affectedOne(res, err, "claim", actionID)
		return err
	})
	if !ok {
		token = ""
	}
	return token, ok, err
}

// takeOver moves the record, still in the held state state under the
// claim token token, to a new token, in a transaction of its own, and
// returns the new one when it did: a recovery takes the action from the
// call that stood still before it changes anything, and that call's
// later writes, under token, fail. A record moved on or claimed since is
// left alone.
func (s *store) takeOver(ctx context.Context, actionID, state, token string, now time.Time) (next string, ok bool, err error) {
	next = newClaim()
	ok, err = s.moveClaim(ctx, "take over", actionID, state, token, next, now)
	if !ok {
		next = ""
	}
	return next, ok, err
}

// moveClaim moves the record, still in the held state state under the
// claim token from, to the token to, in a transaction of its own, and
// reports whether it did (see takeOver; a recovery that changed nothing
// hands the record back with it).
func (s *store) moveClaim(ctx context.Context, verb, actionID, state, from, to string, now time.Time) (ok bool, err error) {
	err = s.write(ctx, verb, actionID, func(ctx context.Context, tx *sql.Tx) error {
		q := s.d.Rebind(`UPDATE executor_actions SET updated_at = ?, claim_token = ? WHERE action_id = ? AND state = ? AND claim_token = ?`)
		res, err := tx.ExecContext(ctx, q, sqldb.Micros(now), to, actionID, state, from)
		ok, err = affectedOne(res, err, verb, actionID)
		return err
	})
	return ok, err
}

// releaseTx moves the record back from the held state from to state to,
// in tx, if it is still held under token, and reports whether it was; the
// token is cleared.
func (s *store) releaseTx(ctx context.Context, tx *sql.Tx, actionID, from, to, token string, now time.Time) (bool, error) {
	q := s.d.Rebind(`UPDATE executor_actions SET state = ?, updated_at = ?, claim_token = '' WHERE action_id = ? AND state = ? AND claim_token = ?`)
	res, err := tx.ExecContext(ctx, q, to, sqldb.Micros(now), actionID, from, token)
	return affectedOne(res, err, "release", actionID)
}

// affectedOne reports whether the statement that gave res changed the
// one row of actionID.
func affectedOne(res sql.Result, err error, verb, actionID string) (bool, error) {
	n, err := rowsAffected(res, err)
	if err != nil {
		return false, fmt.Errorf("executor: %s action %s: %w", verb, actionID, err)
	}
	return n == 1, nil
}

// write runs op in a transaction of its own. op's errors are returned as
// they are; those of the transaction (begin, commit, ctx) say what was
// being done.
func (s *store) write(ctx context.Context, verb, actionID string, op func(context.Context, *sql.Tx) error) error {
	var opErr error
	err := s.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		opErr = op(ctx, tx)
		return opErr
	})
	if err != nil && opErr == nil {
		return fmt.Errorf("executor: %s action %s: %w", verb, actionID, err)
	}
	return err
}

// holds reports whether the record of actionID is still in the held
// state state under the claim token token, as committed now.
func (s *store) holds(ctx context.Context, actionID, state, token string) (bool, error) {
	var one int
	err := s.db.R.QueryRowContext(ctx, s.d.Rebind(`SELECT 1 FROM executor_actions
		WHERE action_id = ? AND state = ? AND claim_token = ?`), actionID, state, token).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("executor: read action %s: %w", actionID, err)
	}
	return true, nil
}

var errNoRecord = errors.New("no such action record")

// get returns the record of actionID, or errNoRecord.
func (s *store) get(ctx context.Context, actionID string) (*record, error) {
	row := s.db.R.QueryRowContext(ctx, s.d.Rebind(`SELECT `+recordColumns+
		` FROM executor_actions WHERE action_id = ?`), actionID)
	r, err := scanRecord(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, errNoRecord
	}
	if err != nil {
		return nil, fmt.Errorf("executor: read action %s: %w", actionID, err)
	}
	return r, nil
}

// diffTx returns, in tx, the diff of actionID, or errNoRecord.
func (s *store) diffTx(ctx context.Context, tx *sql.Tx, actionID string) (string, error) {
	var diff string
	err := tx.QueryRowContext(ctx, s.d.Rebind(`SELECT diff FROM executor_actions WHERE action_id = ?`), actionID).Scan(&diff)
	if errors.Is(err, sql.ErrNoRows) {
		return "", errNoRecord
	}
	if err != nil {
		return "", fmt.Errorf("executor: diff of %s: %w", actionID, err)
	}
	return diff, nil
}

// promotingTx returns, in tx, the id of an action of task other than
// except that is being promoted ("" for none).
func (s *store) promotingTx(ctx context.Context, tx *sql.Tx, task, except string) (string, error) {
	var id string
	err := tx.QueryRowContext(ctx, s.d.Rebind(`SELECT action_id FROM executor_actions WHERE task = ? AND state = ? AND action_id <> ? LIMIT 1`),
		task, statePromoting, except).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("executor: actions of task %s being promoted: %w", task, err)
	}
	return id, nil
}

// list returns the records in state (every state when ""), of one task or
// (task "") of all, in the order they were made.
func (s *store) list(ctx context.Context, state, task string) ([]*record, error) {
	return s.listAfter(ctx, state, task, nil, 0, 0)
}

// listAfter is list from the record after (nil: from the first), at most
// limit of them (0: all); with maxDiff > 0, it stops reading at the
// first record but the first whose diff brings those read past maxDiff
// bytes, that record the last returned (the rows after it are not read).
func (s *store) listAfter(ctx context.Context, state, task string, after *record, limit, maxDiff int) ([]*record, error) {
	q := `SELECT ` + recordColumns + ` FROM executor_actions WHERE 1 = 1`
	var args []any
	if after != nil {
		q += ` AND (created_at > ? OR created_at = ? AND action_id > ?)`
		at := sqldb.Micros(after.Created)
		args = append(args, at, at, after.ActionID)
	}
	if state != "" {
		q += ` AND state = ?`
		args = append(args, state)
	}
	if task != "" {
		q += ` AND task = ?`
		args = append(args, task)
	}
	q += ` ORDER BY created_at, action_id`
	if limit > 0 {
		q += ` LIMIT ?`
		args = append(args, limit)
	}
	var (
		out   []*record
		diffs int
	)
	for rows, err := range sqldb.Rows(s.db.R.QueryContext(ctx, s.d.Rebind(q), args...)) {
		var r *record
		if err == nil {
			r, err = scanRecord(rows)
		}
		if err != nil {
			return nil, fmt.Errorf("executor: list %s actions: %w", state, err)
		}
		out = append(out, r)
		if diffs += len(r.Diff); maxDiff > 0 && len(out) > 1 && diffs > maxDiff {
			break
		}
	}
	return out, nil
}

// count returns how many records are in state, of one task or (task "")
// of all.
func (s *store) count(ctx context.Context, state, task string) (int, error) {
	q, args := `SELECT count(*) FROM executor_actions WHERE state = ?`, []any{state}
	if task != "" {
		q += ` AND task = ?`
		args = append(args, task)
	}
	var n int
	if err := s.db.R.QueryRowContext(ctx, s.d.Rebind(q), args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("executor: count %s actions: %w", state, err)
	}
	return n, nil
}

// lastRollback returns when a rollback last restored one of paths
// (virtual), whoever's action it undid (zero when never, or when the row
// has expired).
func (s *store) lastRollback(ctx context.Context, paths []string) (time.Time, error) {
	if len(paths) == 0 {
		return time.Time{}, nil
	}
	q := `SELECT MAX(rolled_back_at) FROM executor_rollback_paths WHERE path IN (?` +
		strings.Repeat(", ?", len(paths)-1) + `)`
	args := make([]any, len(paths))
	for i, p := range paths {
		args[i] = p
	}
	var t sql.NullInt64
	if err := s.db.R.QueryRowContext(ctx, s.d.Rebind(q), args...).Scan(&t); err != nil {
		return time.Time{}, fmt.Errorf("executor: read rollbacks: %w", err)
	}
	if !t.Valid {
		return time.Time{}, nil
	}
	return sqldb.FromMicros(t.Int64), nil
}

// rolledBackTx records, in tx, that a rollback at time at restored paths
// (virtual), and deletes the rows of rollbacks before expired: those the
// cooldown no longer counts, so that the table holds at most the paths of
// one cooldown's rollbacks.
func (s *store) rolledBackTx(ctx context.Context, tx *sql.Tx, paths []string, at, expired time.Time) error {
	if _, err := tx.ExecContext(ctx, s.d.Rebind(`DELETE FROM executor_rollback_paths WHERE rolled_back_at < ?`),
		sqldb.Micros(expired)); err != nil {
		return fmt.Errorf("executor: expire rollback paths: %w", err)
	}
	q := s.d.Rebind(`INSERT INTO executor_rollback_paths (path, rolled_back_at) VALUES (?, ?)
		ON CONFLICT (path) DO UPDATE SET rolled_back_at = excluded.rolled_back_at`)
	for _, p := range paths {
		if _, err := tx.ExecContext(ctx, q, p, sqldb.Micros(at)); err != nil {
			return fmt.Errorf("executor: record rollback of %s: %w", p, err)
		}
	}
	return nil
}

// prunable is the condition of a record whose snapshot may be pruned: it
// has one, and no promotion or rollback is using it (RecoverInterrupted
// needs those).
const prunable = `snapshot <> '' AND state NOT IN ('promoting', 'rolling_back')`

// pruneSnapshotsTx empties, at now and in tx, the snapshots stored before
// olderThan (all requesters; skipped when zero) and those of requester
// beyond maxBytes together, newest kept first (skipped when negative), and
// returns how many it pruned.
//
// On SQLite its cost does not grow with the snapshots kept: the age bound
// walks the index by snapshot_at, and the byte bound reads the
// requester's total (executor_snapshot_totals, which triggers keep) and,
// only when it is passed, walks the requester's snapshots from the oldest
// until what is left fits. PostgreSQL keeps no totals: on a database that
// several processes write, a totals row locked by one promotion's commit
// while its age bound reached another requester's snapshots would let
// two promotions wait for each other; there one statement sums the
// requester's snapshots, as before.
func (s *store) pruneSnapshotsTx(ctx context.Context, tx *sql.Tx, requester string, now, olderThan time.Time, maxBytes int64) (int, error) {
	if s.d == sqldb.Postgres {
		return s.pruneSummingTx(ctx, tx, requester, now, olderThan, maxBytes)
	}
	pruned := 0
	if !olderThan.IsZero() {
		res, err := tx.ExecContext(ctx, `UPDATE executor_actions SET snapshot = '', snapshot_bytes = 0, snapshot_pruned_at = ?
			WHERE `+prunable+` AND snapshot_at < ?`, sqldb.Micros(now), sqldb.Micros(olderThan))
		n, err := rowsAffected(res, err)
		if err != nil {
			return 0, fmt.Errorf("executor: prune snapshots by age: %w", err)
		}
		pruned += n
	}
	if maxBytes < 0 {
		return pruned, nil
	}
	ids, err := s.pastBytesTx(ctx, tx, requester, maxBytes)
	if err != nil {
		return 0, err
	}
	// One statement per snapshot, the same text each time (compiled
	// once): in the steady state a promotion prunes one or two.
	for _, id := range ids {
		n, err := s.pruneOneTx(ctx, tx, id, now)
		if err != nil {
			return 0, fmt.Errorf("executor: prune snapshots by bytes: %w", err)
		}
		pruned += n
	}
	return pruned, nil
}

// pastBytesTx returns, in tx, the action ids of requester's prunable
// snapshots that keeping the newest within maxBytes leaves out: none when
// the requester's total is within it, else the oldest, in order, until
// what is left is (SQLite: executor_snapshot_totals).
func (s *store) pastBytesTx(ctx context.Context, tx *sql.Tx, requester string, maxBytes int64) ([]string, error) {
	var total int64
	err := tx.QueryRowContext(ctx, `SELECT bytes FROM executor_snapshot_totals WHERE requester = ?`, requester).Scan(&total)
	if errors.Is(err, sql.ErrNoRows) || err == nil && total <= maxBytes {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("executor: read the snapshot total of %s: %w", requester, err)
	}
	rows, err := tx.QueryContext(ctx, `SELECT action_id, snapshot_bytes FROM executor_actions
		WHERE requester = ? AND `+prunable+` ORDER BY snapshot_at, action_id`, requester)
	if err != nil {
		return nil, fmt.Errorf("executor: list the snapshots of %s: %w", requester, err)
	}
	defer rows.Close()
	var ids []string
	for total > maxBytes && rows.Next() {
		var id string
		var size int64
		if err := rows.Scan(&id, &size); err != nil {
			return nil, fmt.Errorf("executor: list the snapshots of %s: %w", requester, err)
		}
		ids, total = append(ids, id), total-size
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("executor: list the snapshots of %s: %w", requester, err)
	}
	return ids, nil
}

// pruneSummingTx is pruneSnapshotsTx on PostgreSQL: one statement for
// both bounds. The age bound takes the oldest snapshots, which the byte
// count of a newer one never includes (it sums from the newest down): the
// same as pruning by age first.
func (s *store) pruneSummingTx(ctx context.Context, tx *sql.Tx, requester string, now, olderThan time.Time, maxBytes int64) (int, error) {
	var where []string
	args := []any{sqldb.Micros(now)}
	if !olderThan.IsZero() {
		where = append(where, `snapshot_at < ?`)
		args = append(args, sqldb.Micros(olderThan))
	}
	if maxBytes >= 0 {
		// The requester's snapshots, newest first, with the bytes of
		// those up to each: the ones past maxBytes go.
		where = append(where, `action_id IN (SELECT action_id FROM (
			SELECT action_id, SUM(snapshot_bytes) OVER (ORDER BY snapshot_at DESC, action_id DESC) AS kept
			FROM executor_actions WHERE requester = ? AND `+prunable+`) AS newest WHERE kept > ?)`)
		args = append(args, requester, maxBytes)
	}
	if len(where) == 0 {
		return 0, nil
	}
	n, err := rowsAffected(tx.ExecContext(ctx, s.d.Rebind(`UPDATE executor_actions SET snapshot = '', snapshot_bytes = 0, snapshot_pruned_at = ?
		WHERE `+prunable+` AND (`+strings.Join(where, ` OR `)+`)`), args...))
	if err != nil {
		return 0, fmt.Errorf("executor: prune snapshots: %w", err)
	}
	return n, nil
}

// rowsAffected is sqldb.Affected as an int, the executor's counts' type.
func rowsAffected(res sql.Result, err error) (int, error) {
	n, err := sqldb.Affected(res, err)
	return int(n), err
}

// forgetBatch is how many records a page of Forget reads at most.
const forgetBatch = 1000

// endedRecords is the condition of a record of an action that ended and
// can change nothing more: completed, denied or failed, or promoted or
// rolled back with its rollback snapshot gone (pruned by its bounds). It
// is the condition of the index executor_actions_ended, word for word.
const endedRecords = `snapshot = '' AND state IN ('completed', 'denied', 'failed', 'promoted', 'rolled_back')`

// endedRef names a record of endedRecords.
type endedRef struct {
	id, task string
	updated  time.Time
}

// ended returns up to forgetBatch records of endedRecords last changed
// before before and after the record after (by that time, then action id;
// the zero endedRef starts), oldest first.
func (s *store) ended(ctx context.Context, before time.Time, after endedRef) ([]endedRef, error) {
	var out []endedRef
	for rows, err := range sqldb.Rows(s.db.R.QueryContext(ctx, s.endedQuery(),
		sqldb.Micros(before), sqldb.Micros(after.updated), sqldb.Micros(after.updated), after.id, forgetBatch)) {
		var r endedRef
		var at int64
		if err == nil {
			err = rows.Scan(&r.id, &r.task, &at)
		}
		if err != nil {
			return nil, fmt.Errorf("executor: ended actions: %w", err)
		}
		r.updated = sqldb.FromMicros(at)
		out = append(out, r)
	}
	return out, nil
}

// endedQuery is ended's query, of five parameters (before, after's time
// twice, after's id, the limit).
func (s *store) endedQuery() string {
	hint := ""
	if s.d == sqldb.SQLite {
		// Without statistics SQLite's planner prefers the state index
		// and sorts every ended record.
		hint = "INDEXED BY executor_actions_ended "
	}
	return s.d.Rebind(`SELECT action_id, task, updated_at FROM executor_actions ` + hint +
		`WHERE ` + endedRecords + ` AND updated_at < ? AND (updated_at > ? OR updated_at = ? AND action_id > ?)
		ORDER BY updated_at, action_id LIMIT ?`)
}

// forget deletes the records ids that are still of endedRecords, and
// returns how many it deleted.
func (s *store) forget(ctx context.Context, ids []string) (int, error) {
	if len(ids) == 0 {
		return 0, nil
	}
	var n int
	err := s.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		args := make([]any, len(ids))
		for i, id := range ids {
			args[i] = id
		}
		res, err := tx.ExecContext(ctx, s.d.Rebind(`DELETE FROM executor_actions WHERE `+endedRecords+
			` AND action_id IN (?`+strings.Repeat(", ?", len(ids)-1)+`)`), args...)
		n, err = rowsAffected(res, err)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("executor: forget ended actions: %w", err)
	}
	return n, nil
}

// pruneOne empties, at now, the snapshot of actionID if it may be
// pruned.
func (s *store) pruneOne(ctx context.Context, actionID string, now time.Time) error {
	return s.write(ctx, "prune the snapshot of", actionID, func(ctx context.Context, tx *sql.Tx) error {
		_, err := s.pruneOneTx(ctx, tx, actionID, now)
		return err
	})
}

// pruneOneTx empties, at now and in tx, the snapshot of actionID if it
// may be pruned, and reports how many records it changed (0 or 1).
func (s *store) pruneOneTx(ctx context.Context, tx *sql.Tx, actionID string, now time.Time) (int, error) {
	return rowsAffected(tx.ExecContext(ctx, s.d.Rebind(`UPDATE executor_actions SET snapshot = '', snapshot_bytes = 0,
		snapshot_pruned_at = ? WHERE action_id = ? AND `+prunable), sqldb.Micros(now), actionID))
}

type scanner interface{ Scan(...any) error }

func scanRecord(sc scanner) (*record, error) {
	var (
		r                           record
		pre, snap                   string
		created, updated, rolledAt  int64
		snapAt, snapBytes, prunedAt int64
	)
	err := sc.Scan(&r.ActionID, &r.Task, &r.Requester, &r.ProposalID, &r.Action, &r.State, &r.Data,
		&r.Diff, &pre, &r.Reason, &snap, &created, &updated, &rolledAt, &snapAt, &snapBytes, &prunedAt,
		&r.Growth.Bytes, &r.Growth.Files, &r.Growth.Dirs, &r.Claim)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(pre), &r.PreImages); err != nil {
		return nil, fmt.Errorf("action %s: pre_images: %w", r.ActionID, err)
	}
	if snap != "" {
		r.Snapshot = []byte(snap)
	}
	r.Created, r.Updated, r.RolledBack = sqldb.FromMicros(created), sqldb.FromMicros(updated), sqldb.FromMicros(rolledAt)
	r.SnapshotAt, r.SnapshotPruned = sqldb.FromMicros(snapAt), sqldb.FromMicros(prunedAt)
	return &r, nil
}

func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
