package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snapnode/snapnode/internal/periodic"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

var (
	// ErrClosed: the store (or its database) was closed.
	ErrClosed = sqldb.ErrClosed
	// ErrSchemaTooNew: the database was migrated by a newer build; this one
	// refuses to use a schema it does not know.
	ErrSchemaTooNew = sqldb.ErrSchemaTooNew
)

// Options tune a Store opened by OpenOptions. The zero value is the
// default.
type Options = sqldb.Options

// Migrations are the store's SQL files, embedded in the binary, one folder
// per dialect (see sqldb.Migrations), recorded in snapnode_migrations as
// "tasks" (older builds kept them in schema_migrations).
//
//go:embed migrations
var migrationFiles embed.FS

func migrations() sqldb.Migrations {
	return sqldb.Embedded(migrationFiles, "migrations", "tasks").Replacing("schema_migrations")
}

// Store is a tasks.Store, and through ReplayStore a snap.ReplayStore, kept
// in SQLite or PostgreSQL. It is safe for concurrent use, and several
// Stores (in one process or several) may share one database.
type Store struct {
	db  *sqldb.DB
	own bool // Close closes db
	d   *sqldb.Dialect
	// w takes the writes, r the reads; the same pool on PostgreSQL.
	w, r *sql.DB
	st   statements
	// replay and replayNoSync are its replay records (ReplayStore,
	// ReplayStoreNoSync).
	replay, replayNoSync *ReplayStore
	// live counts each owner's live tasks and refuses new ones past the
	// limits of NewLimited (nil: no limits).
	live *tasks.LiveCount

	closed    atomic.Bool
	closeOnce sync.Once
	closeErr  error
}

var (
	_ tasks.Store        = (*Store)(nil)
	_ tasks.ResultKeeper = (*Store)(nil)
	_ tasks.ClaimWriter  = (*Store)(nil)
	_ tasks.TxClaimer    = (*Store)(nil)
)

// Open opens the database named by dsn (see sqldb.Open), with default
// Options, and brings its schema up to date:
//
//	sqlite:/var/lib/snapnode/snapnode.db   SQLite (the file is created)
//	/var/lib/snapnode/snapnode.db          SQLite, a bare path
//	postgres://user:pw@host:5432/db?sslmode=verify-full
//	postgresql://…                         PostgreSQL (any pgx connection URL)
func Open(ctx context.Context, dsn string) (*Store, error) {
	return OpenOptions(ctx, dsn, Options{})
}

// OpenOptions is Open with options.
func OpenOptions(ctx context.Context, dsn string, opts Options) (*Store, error) {
	db, err := sqldb.Open(ctx, dsn, opts)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: %w", err)
	}
	s, err := New(ctx, db)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	s.own = true
	return s, nil
}

// New returns a Store on db, a database other components may share,
// after bringing the store's tables up to date. Closing the Store leaves
// db open. It takes live tasks without bound: a node's store is opened
// with NewLimited.
func New(ctx context.Context, db *sqldb.DB) (*Store, error) {
	return NewLimited(ctx, db, tasks.LiveLimits{})
}

// NewLimited is New with the store's live tasks bounded by lim, as a
// MemoryStore bounds them (tasks.LiveCount): a new live task past
// lim.PerOwner of its owner is refused with 5002, past lim.Total with
// 5003, both tasks.ErrStoreFull. The store counts the live tasks in
// memory, so that Create costs no query more: it reads them once here,
// with one grouped query, and then follows the tasks it creates, ends
// (Update, Apply, ApplyTx) and imports. Other processes writing to the
// database (replicas on one PostgreSQL) are caught up with by
// RecountLive.
func NewLimited(ctx context.Context, db *sqldb.DB, lim tasks.LiveLimits) (*Store, error) {
	s := &Store{db: db, d: db.Dialect, w: db.W, r: db.R, live: tasks.NewLiveCount(lim)}
	if err := db.Migrate(ctx, migrations()); err != nil {
		return nil, fmt.Errorf("sqlstore: %w", err)
	}
	if err := s.prepare(ctx); err != nil {
		s.st.close()
		return nil, err
	}
	s.replay, s.replayNoSync = &ReplayStore{s: s, batch: sweepBatch}, &ReplayStore{s: s, noSync: true, batch: sweepBatch}
	if err := s.RecountLive(ctx); err != nil {
		s.st.close()
		return nil, err
	}
	return s, nil
}

// countLiveQuery reads each owner's live tasks, from the index on state.
const countLiveQuery = "SELECT owner, COUNT(*) FROM tasks WHERE state IN ('submitted', 'working', 'input_required') GROUP BY owner"

// RecountLive reads each owner's live tasks from the database, with one
// grouped query, and sets the store's count to it (nothing to do with
// no limits). A store on a database other processes also write to (the
// replicas of a node on PostgreSQL) counts only what it did itself: a
// task another replica created, or ended, is counted when RecountLive
// runs next (see RunRecount).
func (s *Store) RecountLive(ctx context.Context) error {
	if s.live == nil {
		return nil
	}
	if err := s.start(ctx, "count live"); err != nil {
		return err
	}
	err := s.live.Recount(ctx, func(ctx context.Context) (map[string]int, error) {
		byOwner, err := sqldb.IntsByKey[string](s.r.QueryContext(ctx, countLiveQuery))
		if err != nil {
			return nil, dbError("count live", "", err)
		}
		out := make(map[string]int, len(byOwner))
		for owner, n := range byOwner {
			out[owner] = int(n)
		}
		return out, nil
	})
	if err != nil {
		return fmt.Errorf("sqlstore: %w", err)
	}
	return nil
}

// RunRecount runs RecountLive every interval until ctx is done, and
// returns ctx's error, each round given up after bound (see
// periodic.Pass); report, if not nil, is told of each failed round.
func (s *Store) RunRecount(ctx context.Context, interval, bound time.Duration, report func(error)) error {
	if err := periodic.Every(ctx, "live tasks recount", interval, bound, s.RecountLive, report); err != nil && ctx.Err() == nil {
		return fmt.Errorf("sqlstore: recount: %w", err)
	}
	return ctx.Err()
}

// Dialect returns "sqlite" or "postgres".
func (s *Store) Dialect() string { return s.d.Name() }

// DB returns the database the store keeps its tables in.
func (s *Store) DB() *sqldb.DB { return s.db }

// Close stops the store, and closes its database if Open opened it. Calls
// in progress finish first; later ones fail with ErrClosed. It is safe to
// call twice.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closed.Store(true)
		s.st.close()
		if s.own {
			s.closeErr = s.db.Close()
		}
	})
	return s.closeErr
}

// SchemaVersion returns the number of the last migration applied.
func (s *Store) SchemaVersion(ctx context.Context) (int, error) {
	return s.db.SchemaVersion(ctx, migrations().Component)
}

// statements are the store's SQL, prepared once: writes on the writer
// pool, reads on the reader pool (the same pool on PostgreSQL).
type statements struct {
	// Writes, used inside transactions through tx.StmtContext.
	insertTask, getForWrite, updateTask, updateHistory, updateArtifacts *sql.Stmt
	applyTask, continueTask, keepKey, keptWith                          *sql.Stmt
	insertEvent, prune                                                  *sql.Stmt
	remember, rememberPrior, saveResult, sweep                          *sql.Stmt
	// PostgreSQL's one-statement writes, run outside transactions (nil on
	// SQLite): Remember's, and Create's of a task, its event and the
	// request's kept result.
	rememberNoSync, createTask *sql.Stmt
	// claim: Remember's INSERT of a record that carries its request's
	// kept result; claimTask (PostgreSQL): that record and the task it
	// claims in one statement.
	claim, claimTask *sql.Stmt
	// Reads.
	getTask, byIdempotencyKey, lookup, loadResult, events, eventsPage, exists *sql.Stmt
}

// pruneQuery is Prune's statement: the oldest ended tasks, read from the
// partial index of ended tasks by status time. SQLite is told to use that
// index: without statistics its planner prefers tasks_state (an equality
// on state) and then sorts every ended task at each batch, which on a
// store of a million holds the writer for tens of seconds a batch.
func pruneQuery(dialect string) string {
	from := "tasks"
	if dialect == "sqlite" {
		from = "tasks INDEXED BY tasks_terminal"
	}
	return `DELETE FROM tasks WHERE id IN (SELECT id FROM ` + from + `
			WHERE state IN ('completed', 'failed', 'canceled') AND status_ts < ? ORDER BY status_ts, id LIMIT ?)`
}

// sweepQuery is Sweep's statement: records expired MinSweepMargin before
// now (read from replay_expires), and half their lifetime: expires +
// (expires − first_seen)/2 ≤ now, written so that no product can overflow.
const sweepQuery = `DELETE FROM replay WHERE (sender, msg_id) IN
	(SELECT sender, msg_id FROM replay WHERE expires <= ? AND expires - first_seen <= 2 * (? - expires) LIMIT ?)`

// byKeyQuery is FindByIdempotencyKey's: the newest of the task the key
// created (tasks.idempotency_key) and the task it was sent to
// (task_keys), in one query. The key is never empty; saying so lets the
// planner read the partial index of keyed tasks (tasks_idempotency), and
// the ids found (two at most) are sorted after: asking each arm for the
// order made SQLite read every task of the owner through tasks_owner, the
// index that has it, at each message/send with a key the service had not
// seen.
const byKeyQuery = "SELECT " + taskColumns + " FROM tasks WHERE id IN (" +
	"SELECT id FROM tasks WHERE owner = ? AND idempotency_key = ? AND idempotency_key <> '' UNION ALL " +
	"SELECT task_id FROM task_keys WHERE owner = ? AND idem_key = ?) " +
	"ORDER BY created_at DESC, id DESC LIMIT 1"

// rememberConflict ends Remember's INSERT: an unexpired record stays; an
// expired one is replaced. Of two concurrent calls the database lets one
// insert (or replace) and makes the other wait for it, then find the row
// unexpired.
const rememberConflict = `
	ON CONFLICT (sender, msg_id) DO UPDATE SET first_seen = excluded.first_seen, expires = excluded.expires,
	fingerprint = excluded.fingerprint, via = excluded.via, result = NULL WHERE replay.expires <= excluded.first_seen`

// claimConflict ends the INSERT of a claimed record (CreateKeeping with
// a snap.ReplayClaim): rememberConflict, the record carrying the
// request's result.
const claimConflict = `
	ON CONFLICT (sender, msg_id) DO UPDATE SET first_seen = excluded.first_seen, expires = excluded.expires,
	fingerprint = excluded.fingerprint, via = excluded.via, result = excluded.result WHERE replay.expires <= excluded.first_seen`

func (s *Store) prepare(ctx context.Context) error {
	var err error
	p := func(db *sql.DB, query string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var st *sql.Stmt
		if st, err = db.PrepareContext(ctx, s.d.Rebind(query)); err != nil {
			err = fmt.Errorf("sqlstore: prepare %.40q…: %w", query, err)
		}
		return st
	}
	s.st = statements{
		insertTask: p(s.w, `INSERT INTO tasks (id, owner, context_id, state, status_ts, status_message, version, idempotency_key,
			created_at, updated_at, history, artifacts, metadata) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING`),
		getForWrite: p(s.w, "SELECT "+taskColumns+" FROM tasks WHERE id = ?"+s.d.ForUpdate()),
		updateTask: p(s.w, `UPDATE tasks SET state = ?, status_ts = ?, status_message = ?, history = ?, artifacts = ?, metadata = ?,
			version = version + 1, updated_at = ? WHERE id = ? AND version = ?`),
		updateHistory:   p(s.w, "UPDATE tasks SET history = ?, version = version + 1, updated_at = ? WHERE id = ? AND version = ?"),
		updateArtifacts: p(s.w, "UPDATE tasks SET artifacts = ?, version = version + 1, updated_at = ? WHERE id = ? AND version = ?"),
		applyTask: p(s.w, `UPDATE tasks SET state = ?, status_ts = ?, status_message = ?, artifacts = ?,
			version = ?, updated_at = ? WHERE id = ? AND version = ?`),
		continueTask: p(s.w, `UPDATE tasks SET state = ?, status_ts = ?, status_message = ?, history = ?,
			version = version + 1, updated_at = ? WHERE id = ? AND version = ?`),
		keepKey:     p(s.w, "INSERT INTO task_keys (owner, idem_key, task_id) VALUES (?, ?, ?) ON CONFLICT (owner, idem_key) DO NOTHING"),
		keptWith:    p(s.w, "SELECT task_id FROM task_keys WHERE owner = ? AND idem_key = ?"),
		insertEvent: p(s.w, "INSERT INTO task_events (task_id, version, kind, body) VALUES (?, ?, ?, ?)"),
		prune:       p(s.w, pruneQuery(s.d.Name())),

		remember:      p(s.w, `INSERT INTO replay (sender, msg_id, first_seen, expires, fingerprint, via) VALUES (?, ?, ?, ?, ?, ?)`+rememberConflict),
		rememberPrior: p(s.w, "SELECT first_seen, expires, fingerprint, via FROM replay WHERE sender = ? AND msg_id = ?"),
		claim: p(s.w, `INSERT INTO replay (sender, msg_id, first_seen, expires, fingerprint, via, result) VALUES (?, ?, ?, ?, ?, ?, ?)`+
			claimConflict),
		saveResult: p(s.w, "UPDATE replay SET result = ?, expires = CASE WHEN expires < ? THEN ? ELSE expires END WHERE sender = ? AND msg_id = ?"),
		// Expired MinSweepMargin before now (the index), and half the
		// record's lifetime: expires + (expires − first_seen)/2 ≤ now,
		// written so that no product can overflow.
		sweep: p(s.w, sweepQuery),

		getTask:          p(s.r, "SELECT "+taskColumns+" FROM tasks WHERE id = ?"),
		byIdempotencyKey: p(s.r, byKeyQuery),
		lookup:           p(s.r, "SELECT first_seen, expires, fingerprint, via FROM replay WHERE sender = ? AND msg_id = ? AND expires > ?"),
		events:           p(s.r, "SELECT body FROM task_events WHERE task_id = ? AND version > ? ORDER BY version"),
		eventsPage:       p(s.r, "SELECT body FROM task_events WHERE task_id = ? AND version > ? ORDER BY version LIMIT ?"),
		exists:           p(s.r, "SELECT 1 FROM tasks WHERE id = ?"),
		loadResult:       p(s.r, "SELECT result FROM replay WHERE sender = ? AND msg_id = ? AND expires > ? AND result IS NOT NULL"),
	}
	if s.d == sqldb.Postgres {
		// Remember's statement, setting synchronous_commit off for its
		// own transaction (set_config(…, true) is SET LOCAL): an
		// autocommitted statement is one round trip, where BEGIN, SET
		// LOCAL, INSERT and COMMIT would be four.
		s.st.rememberNoSync = p(s.w, `INSERT INTO replay (sender, msg_id, first_seen, expires, fingerprint, via)
			SELECT ?::text, ?::text, ?::bigint, ?::bigint, ?::bytea, ?::text
			FROM (SELECT set_config('synchronous_commit', 'off', true)) AS no_sync`+rememberConflict)
		// Create's transaction as one statement: the task (unless its id
		// is taken), then, only if it was inserted, its creation event and
		// the request's result in its replay record (none when the sender
		// is NULL). It answers how many tasks it inserted.
		s.st.createTask = p(s.w, `WITH task AS (
				INSERT INTO tasks (id, owner, context_id, state, status_ts, status_message, version, idempotency_key,
				created_at, updated_at, history, artifacts, metadata) VALUES (?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (id) DO NOTHING RETURNING id
			), event AS (
				INSERT INTO task_events (task_id, version, kind, body) SELECT id, ?::bigint, ?::text, ?::text FROM task
			), kept AS (
				UPDATE replay SET result = ?, expires = CASE WHEN expires < ? THEN ? ELSE expires END
				WHERE sender = ? AND msg_id = ? AND EXISTS (SELECT 1 FROM task)
			)
			SELECT count(*) FROM task`)
		// CreateKeeping's statement for a claimed record: the record
		// (with the request's result) unless an unexpired one holds the
		// pair, then, only if it was written, the task (unless its id is
		// taken) and its creation event. The database makes the record's
		// INSERT … ON CONFLICT atomic across connections and processes:
		// of two statements claiming one pair, the second waits for the
		// first and then finds the row unexpired, and inserts no task. It
		// answers whether it wrote the record, and how many tasks.
		s.st.claimTask = p(s.w, `WITH claim AS (
				INSERT INTO replay (sender, msg_id, first_seen, expires, fingerprint, via, result)
				VALUES (?::text, ?::text, ?::bigint, ?::bigint, ?::bytea, ?::text, ?::bytea)`+claimConflict+` RETURNING 1
			), task AS (
				INSERT INTO tasks (id, owner, context_id, state, status_ts, status_message, version, idempotency_key,
				created_at, updated_at, history, artifacts, metadata)
				SELECT ?::text, ?::text, ?::text, ?::text, ?::bigint, ?::text, 1, ?::text, ?::bigint, ?::bigint, ?::text, ?::text, ?::text
				WHERE EXISTS (SELECT 1 FROM claim)
				ON CONFLICT (id) DO NOTHING RETURNING id
			), event AS (
				INSERT INTO task_events (task_id, version, kind, body) SELECT id, ?::bigint, ?::text, ?::text FROM task
			)
			SELECT (SELECT count(*) FROM claim), (SELECT count(*) FROM task)`)
	}
	return err
}

func (st *statements) close() {
	for _, x := range []*sql.Stmt{st.claim, st.claimTask, st.rememberNoSync, st.createTask, st.insertTask, st.getForWrite, st.updateTask, st.updateHistory, st.updateArtifacts, st.applyTask,
		st.continueTask, st.keepKey, st.keptWith, st.remember, st.rememberPrior, st.saveResult, st.sweep, st.getTask, st.byIdempotencyKey, st.lookup, st.loadResult,
		st.insertEvent, st.prune, st.events, st.eventsPage, st.exists} {
		if x != nil {
			_ = x.Close()
		}
	}
}

// write runs op in a transaction: on SQLite in the next group commit, on
// PostgreSQL in a transaction of its own. It returns once op's changes are
// committed, or with an error and nothing changed: op's own, or one of the
// transaction (begin, commit, a done context, a closed store) wrapped with
// the call's name and task id. When ctx carries a pending replay claim
// (WithClaim), the transaction writes the claim's record first and runs
// op only if it was written (see claiming).
func (s *Store) write(ctx context.Context, call, id string, op func(context.Context, *sql.Tx) error) error {
	if c, _ := ctx.Value(claimKey{}).(*snap.ReplayClaim); c.Pending() {
		return s.claiming(ctx, call, id, tasks.NewTxClaim(c, s), op)
	}
	return s.commit(ctx, s.db.Write, call, id, op)
}

// claimKey is the context key of the replay claim WithClaim hands to a
// store's writes.
type claimKey struct{}

// WithClaim implements tasks.ClaimWriter: the first write of a task made
// with the context it returns (Update, AppendHistory, AppendKeyed,
// AppendArtifact, Apply) writes c's record in its own transaction, as
// CreateKeeping does with a new task.
func (s *Store) WithClaim(ctx context.Context, c *snap.ReplayClaim) context.Context {
	return context.WithValue(ctx, claimKey{}, c)
}

// ClaimTx implements tasks.TxClaimer: it writes c's record in tx, a
// transaction on the store's database, with the INSERT … ON CONFLICT …
// WHERE expired every claim of this store uses (see claimIn), and
// reports whether it wrote it, or the record that stopped it. It
// neither marks nor settles c: its tasks.TxClaim does, once it knows
// whether tx committed (the executor's commit of an operator's
// decision, or the store's own, see claiming).
func (s *Store) ClaimTx(ctx context.Context, tx *sql.Tx, c *snap.ReplayClaim) (prior snap.ReplayRecord, fresh bool, err error) {
	return s.claimIn(ctx, tx, "replay claim", s.st.remember, c.From, c.ID, recordArgs(c.Record)...)
}

// recordArgs are the arguments of the remember statement after the pair:
// rec's times, fingerprint and delivery.
func recordArgs(rec snap.ReplayRecord) []any {
	return []any{micros(rec.FirstSeen), ceilMicros(rec.Expires), rec.Fingerprint[:], rec.Via}
}

// claiming is write for a change that carries a request's pending
// replay record (tc): in one transaction, tc.In writes the record, and
// op runs only if it did. The claim is settled (tc.Done) once the
// transaction is committed: fresh, or held by an earlier message, when
// op did not run and the error wraps snap.ErrClaimTaken. A transaction
// that failed leaves it pending: the server then finds no record, and
// the request's id stays unspent for its retry.
func (s *Store) claiming(ctx context.Context, call, id string, tc *tasks.TxClaim, op func(context.Context, *sql.Tx) error) error {
	err := s.commit(ctx, s.db.Write, call, id, func(ctx context.Context, tx *sql.Tx) error {
		if err := tc.In(ctx, tx); err != nil {
			if errors.Is(err, snap.ErrClaimTaken) {
				// Nothing written, and no error: the transaction's
				// commit, which makes the record that stopped this one
				// durable when both are in it (SQLite's group commit),
				// decides the outcome.
				return nil
			}
			return err
		}
		return op(ctx, tx)
	})
	if err != nil {
		return err
	}
	if err := tc.Done(nil); err != nil {
		return fmt.Errorf("sqlstore: %s %s: %w", call, id, err)
	}
	return nil
}

// claimStmt writes a claim's record with a statement other than
// ClaimTx's: stmt, with args after the pair (see claimIn).
type claimStmt struct {
	s    *Store
	stmt *sql.Stmt
	args []any
}

func (w claimStmt) ClaimTx(ctx context.Context, tx *sql.Tx, c *snap.ReplayClaim) (snap.ReplayRecord, bool, error) {
	return w.s.claimIn(ctx, tx, "replay claim", w.stmt, c.From, c.ID, w.args...)
}

// commit is write with the database's write function of the caller's
// choosing (sqldb.DB's Write or WriteNoSync).
func (s *Store) commit(ctx context.Context, write func(context.Context, func(context.Context, *sql.Tx) error) error,
	call, id string, op func(context.Context, *sql.Tx) error) error {
	var opFailed bool
	err := write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		err := op(ctx, tx)
		opFailed = err != nil
		return err
	})
	if err == nil || opFailed {
		return err
	}
	return dbError(call, id, err)
}

// exec1 runs one statement of the writer as a transaction of its own: on
// SQLite in the next group commit, on PostgreSQL as a single autocommitted
// statement (one round trip instead of BEGIN, statement, COMMIT).
func (s *Store) exec1(ctx context.Context, call, id string, stmt *sql.Stmt, args ...any) (sql.Result, error) {
	if s.d == sqldb.Postgres {
		res, err := stmt.ExecContext(ctx, args...)
		return res, dbError(call, id, err)
	}
	var res sql.Result
	// Not write: a replay claim is written with a change of a task only.
	err := s.commit(ctx, s.db.Write, call, id, func(ctx context.Context, tx *sql.Tx) error {
		var err error
		res, err = tx.StmtContext(ctx, stmt).ExecContext(ctx, args...)
		return dbError(call, id, err)
	})
	return res, err
}

// start checks what every call checks first.
func (s *Store) start(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("sqlstore: %s: %w", op, err)
	}
	if s.closed.Load() {
		return fmt.Errorf("sqlstore: %s: %w", op, ErrClosed)
	}
	return nil
}

// dbError wraps an error of the database. A full disk is also
// tasks.ErrStoreFull with a 5003 *snap.Error, like a full MemoryStore.
func dbError(op, id string, err error) error {
	if err == nil {
		return nil
	}
	if sqldb.DiskFull(err) {
		return fmt.Errorf("sqlstore: %s %s: %w: %w: %w", op, id, tasks.ErrStoreFull,
			snap.NewError(snap.CodeServiceUnavailable, "task store full; retry later",
				map[string]any{"reason": "the task database is out of space"}), err)
	}
	return fmt.Errorf("sqlstore: %s %s: %w", op, id, err)
}

// Create implements tasks.Store. The task is checked (tasks.CheckCreate,
// which depends on nothing stored) and encoded first; the write is then one
// INSERT … ON CONFLICT (id) DO NOTHING, and a task with the same id gives
// tasks.ErrExists.
func (s *Store) Create(ctx context.Context, t *tasks.Task) (*tasks.Task, error) {
	return s.create(ctx, t, nil)
}

// CreateKeeping implements tasks.ResultKeeper: Create, and in the same
// transaction SaveResult of kept in the replay record of its request; or,
// with kept.Claim, the replay record itself, carrying the result, and the
// task only if the record was written (see tasks.ResultKeeper).
func (s *Store) CreateKeeping(ctx context.Context, t *tasks.Task, kept tasks.KeptResult) (*tasks.Task, error) {
	return s.create(ctx, t, &kept)
}

// create is Create, keeping kept (when not nil) as a request's result in
// the task's transaction.
func (s *Store) create(ctx context.Context, t *tasks.Task, kept *tasks.KeptResult) (*tasks.Task, error) {
	if err := s.start(ctx, "create"); err != nil {
		return nil, err
	}
	if err := tasks.CheckCreate(t); err != nil {
		return nil, err
	}
	r, err := encode(t)
	if err != nil {
		return nil, err
	}
	r.version = 1
	created, err := r.task()
	if err != nil {
		return nil, err
	}
	if !created.Status.State.Terminal() {
		if err := s.live.Take(created.Owner, created.ID); err != nil {
			return nil, err
		}
		defer func() {
			if err != nil {
				s.live.Drop(created.Owner)
			}
		}()
	}
	claim := kept != nil && kept.Claim != nil
	if s.d == sqldb.Postgres {
		if claim {
			// A write whose result is lost may have committed the
			// record: the server then knows it for this request's own.
			kept.Claim.Writing()
			err = s.claimPostgres(ctx, r, created, kept)
		} else {
			err = s.createPostgres(ctx, r, created, kept)
		}
		if err != nil {
			return nil, err
		}
		return created, nil
	}
	insert := func(ctx context.Context, tx *sql.Tx) error {
		// ON CONFLICT DO NOTHING: no row means the id is taken.
		if n, err := sqldb.Affected(tx.StmtContext(ctx, s.st.insertTask).ExecContext(ctx, r.id, r.owner, r.contextID, r.state, r.statusTS,
			r.statusMessage, r.idemKey, r.createdAt, micros(time.Now()), string(r.history), string(r.artifacts), string(r.metadata))); err != nil {
			return dbError("create", r.id, err)
		} else if n == 0 {
			return fmt.Errorf("sqlstore: create %s: task %w", r.id, tasks.ErrExists)
		}
		if err := s.recordEvent(ctx, tx, "create", tasks.StatusEvent(created)); err != nil || kept == nil || claim {
			return err
		}
		exp := ceilMicros(kept.Expires)
		_, err := tx.StmtContext(ctx, s.st.saveResult).ExecContext(ctx, kept.Result, exp, exp, kept.From, kept.RequestID)
		return dbError("save result", kept.From+" "+kept.RequestID, err)
	}
	if claim {
		// The request's replay record first, with its result: the task
		// only if the record was written. SQLite's single writer holds
		// the database until commit: a record that stops this one is
		// there to read.
		c := kept.Claim
		err = s.claiming(ctx, "create", r.id, tasks.NewTxClaim(c, claimStmt{s, s.st.claim,
			[]any{micros(c.Record.FirstSeen), claimExpires(kept), c.Record.Fingerprint[:], c.Record.Via, kept.Result}}), insert)
	} else {
		err = s.write(ctx, "create", r.id, insert)
	}
	if err != nil {
		return nil, err
	}
	return created, nil
}

// claimExpires is the expiry of a claimed record that carries kept's
// result: the later of the record's own and the result's, as SaveResult
// extends a record.
func claimExpires(kept *tasks.KeptResult) int64 {
	return max(ceilMicros(kept.Claim.Record.Expires), ceilMicros(kept.Expires))
}

// claimPostgres is create's write on PostgreSQL for a task whose
// request's replay record is claimed (kept.Claim): one autocommitted
// statement (claimTask), one round trip, that writes the record with the
// request's result and, only if the record was written, the task and its
// event; it waits for the disk as every task write does. A claim found
// taken then reads the record that stopped it (a second round trip, for
// duplicates only); should that record be gone by then (expired and
// swept), the statement runs again.
func (s *Store) claimPostgres(ctx context.Context, r *row, created *tasks.Task, kept *tasks.KeptResult) error {
	ev := tasks.StatusEvent(created)
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("sqlstore: create %s: event: %w", ev.TaskID, err)
	}
	c, key, exp := kept.Claim, kept.From+" "+kept.RequestID, claimExpires(kept)
	inserted := 0
	prior, fresh, err := s.claimOrPrior(ctx, "replay claim", kept.From, kept.RequestID, func() (bool, error) {
		var claimed int
		err := s.st.claimTask.QueryRowContext(ctx, kept.From, kept.RequestID, micros(c.Record.FirstSeen), exp,
			c.Record.Fingerprint[:], c.Record.Via, kept.Result,
			r.id, r.owner, r.contextID, r.state, r.statusTS, r.statusMessage, r.idemKey,
			r.createdAt, micros(time.Now()), string(r.history), string(r.artifacts), string(r.metadata),
			ev.Version, string(ev.Kind), string(body)).Scan(&claimed, &inserted)
		if err != nil {
			return false, dbError("create", r.id, err)
		}
		return claimed > 0, nil
	})
	switch {
	case err != nil:
		return err
	case !fresh:
		return fmt.Errorf("sqlstore: create %s: %w", r.id, c.Claimed(prior, false))
	}
	c.Claimed(snap.ReplayRecord{}, true)
	if inserted == 0 {
		// The task's id is taken (never, with random ids): the record
		// stands, as a refused request's does, without the result of a
		// task that was not stored.
		if _, err := s.st.saveResult.ExecContext(ctx, nil, exp, exp, kept.From, kept.RequestID); err != nil {
			return dbError("save result", key, err)
		}
		return fmt.Errorf("sqlstore: create %s: task %w", r.id, tasks.ErrExists)
	}
	return nil
}

// createPostgres is create's write on PostgreSQL: one autocommitted
// statement (createTask), one round trip to the server where a
// transaction of its own took five (BEGIN, the task, its event, the kept
// result, COMMIT). It commits as every task write does, waiting for the
// disk.
func (s *Store) createPostgres(ctx context.Context, r *row, created *tasks.Task, kept *tasks.KeptResult) error {
	ev := tasks.StatusEvent(created)
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("sqlstore: create %s: event: %w", ev.TaskID, err)
	}
	var (
		result      []byte
		from, reqID any // NULL: nothing to keep
		expires     int64
		inserted    int
	)
	if kept != nil {
		result, from, reqID, expires = kept.Result, kept.From, kept.RequestID, ceilMicros(kept.Expires)
	}
	err = s.st.createTask.QueryRowContext(ctx, r.id, r.owner, r.contextID, r.state, r.statusTS, r.statusMessage, r.idemKey,
		r.createdAt, micros(time.Now()), string(r.history), string(r.artifacts), string(r.metadata),
		ev.Version, string(ev.Kind), string(body),
		result, expires, expires, from, reqID).Scan(&inserted)
	if err != nil {
		return dbError("create", r.id, err)
	}
	if inserted == 0 {
		return fmt.Errorf("sqlstore: create %s: task %w", r.id, tasks.ErrExists)
	}
	return nil
}

// recordEvent writes ev in tx, the transaction of the change it reports.
func (s *Store) recordEvent(ctx context.Context, tx *sql.Tx, op string, ev tasks.Event) error {
	body, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("sqlstore: %s %s: event: %w", op, ev.TaskID, err)
	}
	_, err = tx.StmtContext(ctx, s.st.insertEvent).ExecContext(ctx, ev.TaskID, ev.Version, string(ev.Kind), string(body))
	return dbError(op+" event", ev.TaskID, err)
}

// Get implements tasks.Store.
func (s *Store) Get(ctx context.Context, id string) (*tasks.Task, error) {
	if err := s.start(ctx, "get"); err != nil {
		return nil, err
	}
	var r row
	err := s.st.getTask.QueryRowContext(ctx, id).Scan(r.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlstore: get %s: %w", id, tasks.ErrNotFound)
	}
	if err != nil {
		return nil, dbError("get", id, err)
	}
	return r.task()
}

// FindByIdempotencyKey returns the newest task that owner created with the
// idempotency key, or sent a message to with it (AppendKeyed), or
// tasks.ErrNotFound. It lets a node honour a key after a restart, or one
// replica honour a key first seen by another. One query reads both.
func (s *Store) FindByIdempotencyKey(ctx context.Context, owner, key string) (*tasks.Task, error) {
	if err := s.start(ctx, "find by idempotency key"); err != nil {
		return nil, err
	}
	if key == "" {
		return nil, fmt.Errorf("sqlstore: find by idempotency key: empty key: %w", tasks.ErrNotFound)
	}
	var r row
	err := s.st.byIdempotencyKey.QueryRowContext(ctx, owner, key, owner, key).Scan(r.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlstore: find by idempotency key %q of %s: %w", key, owner, tasks.ErrNotFound)
	}
	if err != nil {
		return nil, dbError("find by idempotency key", key, err)
	}
	return r.task()
}

// forWrite reads the task id for a change inside tx, locking its row on
// PostgreSQL until tx ends; op names the change in its errors.
func (s *Store) forWrite(ctx context.Context, tx *sql.Tx, op, id string) (*row, error) {
	var r row
	err := tx.StmtContext(ctx, s.st.getForWrite).QueryRowContext(ctx, id).Scan(r.dest()...)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("sqlstore: %s %s: %w", op, id, tasks.ErrNotFound)
	}
	if err != nil {
		return nil, dbError(op, id, err)
	}
	return &r, nil
}

// current is forWrite, checking that the task is at version expected.
func (s *Store) current(ctx context.Context, tx *sql.Tx, op, id string, expected int64) (*row, error) {
	r, err := s.forWrite(ctx, tx, op, id)
	if err != nil {
		return nil, err
	}
	if r.version != expected {
		return nil, fmt.Errorf("sqlstore: %s %s: version %d, expected %d: %w", op, id, r.version, expected, tasks.ErrVersionConflict)
	}
	return r, nil
}

// exactlyOne checks that an UPDATE … WHERE version = expected changed the
// row. The row was read (and on PostgreSQL locked) in the same transaction
// at that version, so anything else is a conflict the lock missed.
func exactlyOne(op, id string, res sql.Result, err error) error {
	n, err := sqldb.Affected(res, err)
	if err != nil {
		return dbError(op, id, err)
	}
	if n != 1 {
		return fmt.Errorf("sqlstore: %s %s: %w", op, id, tasks.ErrVersionConflict)
	}
	return nil
}

// Update implements tasks.Store. Inside the transaction it reads the
// current task, checks the expected version and applies tasks.CheckUpdate,
// so the state machine holds in the database whoever writes to it. The
// current task handed to CheckUpdate carries every column but not the
// decoded history, artifacts and metadata, which CheckUpdate does not read
// (it judges the current id and state and the next task's contents).
func (s *Store) Update(ctx context.Context, t *tasks.Task, expected int64) (*tasks.Task, error) {
	if err := s.start(ctx, "update"); err != nil {
		return nil, err
	}
	if t == nil {
		return nil, fmt.Errorf("sqlstore: update nil task: %w", tasks.ErrInvalidTask)
	}
	next, err := encode(t)
	if err != nil {
		return nil, err
	}
	now := micros(time.Now())
	var ended bool
	err = s.write(ctx, "update", t.ID, func(ctx context.Context, tx *sql.Tx) error {
		cur, err := s.current(ctx, tx, "update", t.ID, expected)
		if err != nil {
			return err
		}
		ended = !tasks.State(cur.state).Terminal() && t.Status.State.Terminal()
		if err := tasks.CheckUpdate(cur.columns(), t); err != nil {
			return err
		}
		res, err := tx.StmtContext(ctx, s.st.updateTask).ExecContext(ctx, next.state, next.statusTS, next.statusMessage,
			string(next.history), string(next.artifacts), string(next.metadata), now, t.ID, expected)
		if err := exactlyOne("update", t.ID, res, err); err != nil {
			return err
		}
		// The fields Create set stay.
		next.owner, next.contextID, next.idemKey, next.createdAt = cur.owner, cur.contextID, cur.idemKey, cur.createdAt
		next.version = cur.version + 1
		if prev := cur.columns(); tasks.StatusChanged(prev, t) {
			ev := tasks.StatusEvent(t)
			ev.Version = next.version
			return s.recordEvent(ctx, tx, "update", ev)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if ended {
		s.live.Drop(next.owner)
	}
	return next.task()
}

// columns returns the task of r without decoding its JSON.
func (r *row) columns() *tasks.Task {
	return &tasks.Task{
		ID:             r.id,
		ContextID:      r.contextID,
		Status:         tasks.Status{State: tasks.State(r.state), Timestamp: fromMicros(r.statusTS), Message: r.statusMessage},
		Owner:          r.owner,
		Version:        r.version,
		IdempotencyKey: r.idemKey,
		CreatedAt:      fromMicros(r.createdAt),
	}
}

// AppendHistory implements tasks.Store. The messages are appended to the
// stored JSON array as bytes: the history is not decoded inside the
// transaction.
func (s *Store) AppendHistory(ctx context.Context, id string, expected int64, msgs ...tasks.Message) (*tasks.Task, error) {
	const op = "append history"
	if err := s.start(ctx, op); err != nil {
		return nil, err
	}
	add, err := marshal(msgs)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: %s %s: %w: %w", op, id, tasks.ErrInvalidTask, err)
	}
	return s.appendTo(ctx, op, id, expected, s.st.updateHistory, nil, func(cur *row) (string, error) {
		if len(msgs) > 0 {
			if cur.history, err = appendJSONArray(cur.history, add); err != nil {
				return "", fmt.Errorf("sqlstore: %s %s: stored history: %w", op, id, err)
			}
		}
		return string(cur.history), nil
	})
}

// AppendKeyed implements tasks.Store. Its transaction reads the task (its
// row locked on PostgreSQL), keeps the key with one INSERT … ON CONFLICT
// DO NOTHING (no row: the key is kept already, and one more read names
// its task), then appends the message as bytes to the stored history and
// records the status event of a resumed task. Against AppendHistory it
// costs one statement: the key's INSERT.
func (s *Store) AppendKeyed(ctx context.Context, id string, expected int64, key string, msg tasks.Message, at time.Time) (*tasks.Task, error) {
	const op = "append keyed"
	if err := s.start(ctx, op); err != nil {
		return nil, err
	}
	if key == "" || at.IsZero() {
		return nil, fmt.Errorf("sqlstore: %s %s: no key or no time: %w", op, id, tasks.ErrInvalidTask)
	}
	add, err := marshal([]tasks.Message{msg})
	if err != nil {
		return nil, fmt.Errorf("sqlstore: %s %s: %w: %w", op, id, tasks.ErrInvalidTask, err)
	}
	now := micros(time.Now())
	var out *row
	err = s.write(ctx, op, id, func(ctx context.Context, tx *sql.Tx) error {
		cur, err := s.forWrite(ctx, tx, op, id)
		if err != nil {
			return err
		}
		if n, err := sqldb.Affected(tx.StmtContext(ctx, s.st.keepKey).ExecContext(ctx, cur.owner, key, id)); err != nil {
			return dbError(op+" key", id, err)
		} else if n == 0 {
			kept := &tasks.KeyKeptError{Owner: cur.owner, Key: key}
			if err := tx.StmtContext(ctx, s.st.keptWith).QueryRowContext(ctx, cur.owner, key).Scan(&kept.TaskID); err != nil {
				return dbError(op+" key", id, err)
			}
			return kept
		}
		if cur.version != expected {
			return fmt.Errorf("sqlstore: %s %s: version %d, expected %d: %w", op, id, cur.version, expected, tasks.ErrVersionConflict)
		}
		st := tasks.State(cur.state)
		if st.Terminal() {
			return fmt.Errorf("sqlstore: %s %s: %s: %w", op, id, st, tasks.ErrTerminal)
		}
		if cur.history, err = appendJSONArray(cur.history, add); err != nil {
			return fmt.Errorf("sqlstore: %s %s: stored history: %w", op, id, err)
		}
		resumed := st == tasks.StateInputRequired
		if resumed {
			cur.state, cur.statusTS, cur.statusMessage = string(tasks.StateWorking), micros(at), ""
		}
		res, err := tx.StmtContext(ctx, s.st.continueTask).ExecContext(ctx, cur.state, cur.statusTS, cur.statusMessage,
			string(cur.history), now, id, expected)
		if err := exactlyOne(op, id, res, err); err != nil {
			return err
		}
		cur.version++
		out = cur
		if resumed {
			return s.recordEvent(ctx, tx, op, tasks.StatusEvent(cur.columns()))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out.task()
}

// AppendArtifact implements tasks.Store. Only the artifact ids are decoded
// inside the transaction, to check the limit and uniqueness.
func (s *Store) AppendArtifact(ctx context.Context, id string, expected int64, a tasks.Artifact) (*tasks.Task, error) {
	const op = "append artifact"
	if err := s.start(ctx, op); err != nil {
		return nil, err
	}
	add, err := marshal([]tasks.Artifact{a})
	if err != nil {
		return nil, fmt.Errorf("sqlstore: %s %s: %w: %w", op, id, tasks.ErrInvalidTask, err)
	}
	return s.appendTo(ctx, op, id, expected, s.st.updateArtifacts, &a, func(cur *row) (string, error) {
		var have []struct {
			ArtifactID string `json:"artifactId"`
		}
		if err := json.Unmarshal(cur.artifacts, &have); err != nil {
			return "", fmt.Errorf("sqlstore: %s %s: stored artifacts: %w", op, id, err)
		}
		if len(have) >= tasks.MaxArtifacts {
			return "", fmt.Errorf("sqlstore: %s %s: %d artifacts already: %w", op, id, len(have), tasks.ErrLimit)
		}
		for _, h := range have {
			if h.ArtifactID == a.ArtifactID {
				return "", fmt.Errorf("sqlstore: %s %s: artifact %s %w", op, id, a.ArtifactID, tasks.ErrExists)
			}
		}
		if cur.artifacts, err = appendJSONArray(cur.artifacts, add); err != nil {
			return "", fmt.Errorf("sqlstore: %s %s: stored artifacts: %w", op, id, err)
		}
		return string(cur.artifacts), nil
	})
}

// appendTo is the transaction both appends share: read the task at
// version expected, refuse a terminal one, let change extend the row and
// return the new column value, write it with update, bump the version and
// record the artifact's event when there is one.
func (s *Store) appendTo(ctx context.Context, op, id string, expected int64, update *sql.Stmt, artifact *tasks.Artifact, change func(cur *row) (string, error)) (*tasks.Task, error) {
	now := micros(time.Now())
	var out *row
	err := s.write(ctx, op, id, func(ctx context.Context, tx *sql.Tx) error {
		cur, err := s.current(ctx, tx, op, id, expected)
		if err != nil {
			return err
		}
		if st := tasks.State(cur.state); st.Terminal() {
			return fmt.Errorf("sqlstore: %s %s: %s: %w", op, id, st, tasks.ErrTerminal)
		}
		col, err := change(cur)
		if err != nil {
			return err
		}
		res, err := tx.StmtContext(ctx, update).ExecContext(ctx, col, now, id, expected)
		if err := exactlyOne(op, id, res, err); err != nil {
			return err
		}
		cur.version++
		out = cur
		if artifact != nil {
			return s.recordEvent(ctx, tx, op, tasks.ArtifactEvent(id, cur.version, *artifact))
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out.task()
}

// appendJSONArray returns the JSON array arr (or null) followed by the
// elements of the non-empty JSON array add.
func appendJSONArray(arr, add []byte) ([]byte, error) {
	arr = bytes.TrimSpace(arr)
	switch {
	case len(add) < 2 || add[0] != '[' || add[len(add)-1] != ']':
		return nil, fmt.Errorf("not a JSON array: %.20q", add)
	case string(arr) == "null" || string(arr) == "[]":
		return bytes.Clone(add), nil
	case len(arr) < 2 || arr[0] != '[' || arr[len(arr)-1] != ']':
		return nil, fmt.Errorf("not a JSON array: %.20q", arr)
	}
	out := make([]byte, 0, len(arr)+len(add))
	out = append(out, arr[:len(arr)-1]...)
	out = append(out, ',')
	return append(out, add[1:]...), nil
}

// List implements tasks.Store. The filters the node's callers set have
// their index (owner, state, or none, each followed by created_at and id,
// List's order); a context filter reads the owner's index if an owner is
// set too, else the whole table (migration 0007 dropped its index).
func (s *Store) List(ctx context.Context, f tasks.Filter) ([]*tasks.Task, error) {
	if err := s.start(ctx, "list"); err != nil {
		return nil, err
	}
	query, args := listQuery(f)
	rows, err := s.r.QueryContext(ctx, s.d.Rebind(query), args...)
	if err != nil {
		return nil, dbError("list", "", err)
	}
	defer rows.Close()
	var out []*tasks.Task
	for rows.Next() {
		var r row
		if err := rows.Scan(r.dest()...); err != nil {
			return nil, dbError("list", "", err)
		}
		t, err := r.task()
		if err != nil {
			return nil, err
		}
		out = append(out, t)
	}
	if err := rows.Err(); err != nil {
		return nil, dbError("list", "", err)
	}
	if f.Limit > 0 && f.Newest {
		slices.Reverse(out) // oldest first, as always
	}
	return out, nil
}

// listQuery returns List's query for f (with ? placeholders) and its
// arguments.
func listQuery(f tasks.Filter) (string, []any) {
	var (
		b    strings.Builder
		args []any
		and  = " WHERE "
	)
	columns := taskColumns
	if f.Brief {
		columns = briefColumns
	}
	b.WriteString("SELECT " + columns + " FROM tasks")
	if f.Owner != "" {
		b.WriteString(and + "owner = ?")
		args, and = append(args, f.Owner), " AND "
	}
	if f.ContextID != "" {
		b.WriteString(and + "context_id = ?")
		args, and = append(args, f.ContextID), " AND "
	}
	if len(f.States) > 0 {
		b.WriteString(and + "state IN (?" + strings.Repeat(", ?", len(f.States)-1) + ")")
		for _, st := range f.States {
			args = append(args, string(st))
		}
	}
	if f.Limit > 0 && f.Newest {
		b.WriteString(" ORDER BY created_at DESC, id DESC")
	} else {
		b.WriteString(" ORDER BY created_at, id")
	}
	if f.Limit > 0 {
		b.WriteString(" LIMIT ?")
		args = append(args, f.Limit)
	}
	return b.String(), args
}

// CountByState implements tasks.Store; the index on state serves it.
func (s *Store) CountByState(ctx context.Context) (map[tasks.State]int64, error) {
	if err := s.start(ctx, "count"); err != nil {
		return nil, err
	}
	out, err := sqldb.IntsByKey[tasks.State](s.r.QueryContext(ctx, "SELECT state, COUNT(*) FROM tasks GROUP BY state"))
	if err != nil {
		return nil, dbError("count", "", err)
	}
	return out, nil
}

// Events implements tasks.Store.
func (s *Store) Events(ctx context.Context, id string, after int64) ([]tasks.Event, error) {
	if err := s.start(ctx, "events"); err != nil {
		return nil, err
	}
	return s.readEvents(ctx, id, func() (*sql.Rows, error) { return s.st.events.QueryContext(ctx, id, after) }, math.MaxInt)
}

// EventsPage implements tasks.Store: the page's size is that of the
// events' stored bodies (JSON).
func (s *Store) EventsPage(ctx context.Context, id string, after int64, limit, maxBytes int) ([]tasks.Event, error) {
	if err := s.start(ctx, "events"); err != nil {
		return nil, err
	}
	limit = max(limit, 1)
	return s.readEvents(ctx, id, func() (*sql.Rows, error) { return s.st.eventsPage.QueryContext(ctx, id, after, limit) }, maxBytes)
}

// readEvents decodes the events query returns, stopping after the one
// whose body brings the bodies read to maxBytes. No event means no task
// (ErrNotFound), or nothing after the version asked for.
func (s *Store) readEvents(ctx context.Context, id string, query func() (*sql.Rows, error), maxBytes int) ([]tasks.Event, error) {
	var out []tasks.Event
	size := 0
	for rows, err := range sqldb.Rows(query()) {
		var body []byte
		if err == nil {
			err = rows.Scan(&body)
		}
		if err != nil {
			return nil, dbError("events", id, err)
		}
		var ev tasks.Event
		if err := json.Unmarshal(body, &ev); err != nil {
			return nil, fmt.Errorf("sqlstore: events %s: stored event: %w", id, err)
		}
		out = append(out, ev)
		if size += len(body); size >= maxBytes {
			break
		}
	}
	if len(out) == 0 {
		// Every task has its creation event; none means no task, or
		// nothing after `after`.
		var one int
		err := s.st.exists.QueryRowContext(ctx, id).Scan(&one)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("sqlstore: events %s: %w", id, tasks.ErrNotFound)
		}
		if err != nil {
			return nil, dbError("events", id, err)
		}
		out = []tasks.Event{}
	}
	return out, nil
}

// Prune implements tasks.Store. One DELETE removes the tasks; their events
// follow through ON DELETE CASCADE.
func (s *Store) Prune(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := s.start(ctx, "prune"); err != nil {
		return 0, err
	}
	if limit <= 0 {
		return 0, nil
	}
	// status_ts < ceil(before): a time kept in microseconds is before
	// `before` exactly when it is before its ceiling (micros would floor
	// a cut-off with nanoseconds, keeping a task that ended before it).
	res, err := s.exec1(ctx, "prune", "", s.st.prune, ceilMicros(before), limit)
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, dbError("prune", "", err)
	}
	return int(n), nil
}
