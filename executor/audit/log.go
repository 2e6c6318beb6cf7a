package audit

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snapnode/snapnode/internal/sqldb"
)

// ErrClosed: the log was closed.
var ErrClosed = errors.New("audit log closed")

// migrationFiles are the log's SQL files, one folder per dialect (see
// sqldb.Migrations), recorded in snapnode_migrations as "audit" (older
// builds kept them in audit_migrations).
//
//go:embed migrations
var migrationFiles embed.FS

func migrations() sqldb.Migrations {
	return sqldb.Embedded(migrationFiles, "migrations", "audit").Replacing("audit_migrations")
}

// Options are the host's settings of a Log; nothing a proposer sends
// changes them. The zero value keeps every entry and uses time.Now.
type Options struct {
	// Now is the clock that dates entries and judges their age (default
	// time.Now).
	Now func() time.Time
	// Retain: Prune drops the entries older than this (0 keeps them).
	Retain time.Duration
	// MaxEntries: when the log holds more than this many entries, Prune
	// drops the oldest so that it holds this many, its own record of the
	// pruning included (0: no limit).
	MaxEntries int64
	// MaxDetail bounds an entry's Detail in bytes of compact JSON
	// (default DefaultMaxDetail, at most MaxDetailLimit).
	MaxDetail int
	// Signer, when set, signs the checkpoint of every pruning record, and
	// Verify then accepts only pruning records it signed (the node gives
	// its identity key: IdentitySigner). Nil: checkpoints are unsigned,
	// and Verify checks the signatures it finds against the address they
	// name.
	Signer Signer
	// SealRecord, when set, is the file, outside the database, where
	// Seal records the last seal this Log wrote (WriteSealRecord), and
	// which Seal and Prune check the chain against before they write
	// (CheckSealRecord): a chain rewritten while the Log was closed,
	// with the seals after the rewrite deleted, is not sealed or pruned.
	// One file per Log: processes sharing a database each keep their own.
	SealRecord string
	// SealEvery, when positive, makes RunSealer seal as soon as this Log
	// has committed that many entries since its last seal (or since it
	// opened), besides at its ticks: the entries no seal covers are then
	// at most that many, or the ticks' interval's. 0: at the ticks only.
	SealEvery int64
}

// pruneChunk is how many entries one pruning transaction drops at most.
const pruneChunk = 10_000

// Log is a hash-chained audit log kept in a database it may share with
// other components (the task store). It is safe for concurrent use, and
// several Logs, in one process or several, may append to one database:
// they build one chain.
type Log struct {
	db   *sqldb.DB
	d    *sqldb.Dialect
	opts Options
	// pruneChunk is pruneChunk but for tests.
	pruneChunk int64

	// Statements of the write path, prepared on the writer pool and used
	// inside transactions through tx.StmtContext.
	lockHead, insert, setLast *sql.Stmt
	// comb joins concurrent appends into one transaction.
	comb combiner

	// ownSeal is the entry of the last seal this Log wrote, which a later
	// Seal must find in the chain.
	sealMu  sync.Mutex
	ownSeal Anchor
	// ownHead is the last entry this Log committed (see Committed),
	// which Seal and Prune must find in the chain: the head does not go
	// back while the Log runs.
	ownHead Anchor
	// sinceSeal counts the entries this Log committed since its last
	// seal; due holds a request to seal (SealEvery).
	sinceSeal int64
	due       chan struct{}

	// open, when set, finds the first entry of an action still open
	// (KeepOpen), where Retain stops.
	open atomic.Pointer[OpenFunc]

	closed    atomic.Bool
	closeOnce sync.Once
}

// OpenFunc returns the seq of the first entry among from…to (both
// included) of an action that is still open, waiting for a decision or
// in the middle of one; 0 when none is. It reads in tx, the pruning
// transaction, and must read no more than those entries (at most 10,000)
// and what it looks up for each.
type OpenFunc func(ctx context.Context, tx *sql.Tx, from, to int64) (int64, error)

// KeepOpen makes Prune stop, for Retain, before the first entry of an
// action open tells is still open: an action held for an operator longer
// than the retention keeps its story from its first entry until it is
// decided, when its entries age as any others. Only a prefix of the chain
// is ever pruned, so the entries after that one stay too. MaxEntries is
// a bound on the whole log and does not wait. The executor on the log
// sets it (with its records of the actions).
func (l *Log) KeepOpen(open OpenFunc) { l.open.Store(&open) }

// New returns the log kept in db, after bringing its tables (audit_log,
// audit_head) up to date. Closing the Log leaves db open.
func New(ctx context.Context, db *sqldb.DB, opts Options) (*Log, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	switch {
	case opts.MaxDetail == 0:
		opts.MaxDetail = DefaultMaxDetail
	case opts.MaxDetail < 0 || opts.MaxDetail > MaxDetailLimit:
		return nil, fmt.Errorf("audit: MaxDetail %d: want 1 to %d", opts.MaxDetail, MaxDetailLimit)
	}
	if opts.Retain < 0 {
		return nil, fmt.Errorf("audit: Retain %v is negative", opts.Retain)
	}
	if opts.MaxEntries < 0 {
		return nil, fmt.Errorf("audit: MaxEntries %d is negative", opts.MaxEntries)
	}
	if opts.SealEvery < 0 {
		return nil, fmt.Errorf("audit: SealEvery %d is negative", opts.SealEvery)
	}
	if err := db.Migrate(ctx, migrations()); err != nil {
		return nil, fmt.Errorf("audit: %w", err)
	}
	l := &Log{db: db, d: db.Dialect, opts: opts, pruneChunk: pruneChunk, due: make(chan struct{}, 1)}
	var err error
	prep := func(q string) *sql.Stmt {
		if err != nil {
			return nil
		}
		var st *sql.Stmt
		if st, err = db.W.PrepareContext(ctx, l.d.Rebind(q)); err != nil {
			err = fmt.Errorf("audit: prepare %.40q…: %w", q, err)
		}
		return st
	}
	l.lockHead = prep("SELECT first_seq, first_prev, last_seq, last_hash FROM audit_head WHERE id = 1" + l.d.ForUpdate())
	l.insert = prep("INSERT INTO audit_log (" + entryColumns + ") VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
	l.setLast = prep("UPDATE audit_head SET last_seq = ?, last_hash = ? WHERE id = 1")
	if err != nil {
		l.closeStatements()
		return nil, err
	}
	return l, nil
}

// signer is the address every checkpoint must be signed by ("" for any).
func (l *Log) signer() string {
	if l.opts.Signer == nil {
		return ""
	}
	return l.opts.Signer.Address()
}

// DB returns the database the log is kept in: AppendTx takes the
// transactions of its Write.
func (l *Log) DB() *sqldb.DB { return l.db }

// Close releases the log's prepared statements; calls after it fail with
// ErrClosed, and calls in progress may fail. The database stays open. It
// is safe to call twice.
func (l *Log) Close() error {
	l.closeOnce.Do(func() {
		l.closed.Store(true)
		l.closeStatements()
	})
	return nil
}

func (l *Log) closeStatements() {
	for _, st := range []*sql.Stmt{l.lockHead, l.insert, l.setLast} {
		if st != nil {
			_ = st.Close()
		}
	}
}

// entryColumns are audit_log's columns in the order of scanEntry and
// insertArgs.
const entryColumns = "seq, ts, actor, task, action, step, decision, reason, policy_version, pre_hash, post_hash, detail, prev, hash"

// head is the audit_head row.
type head struct {
	first     int64  // first seq retained
	firstPrev string // the hash entry first chains to
	last      int64  // last seq (first-1 when the log is empty)
	lastHash  string // its hash (firstPrev when empty)
}

// Append adds e to the log and returns it as stored: with its Seq (the
// previous one + 1), Time (the log's clock), Prev and Hash, and Detail in
// its minimal form. Whatever e had in those four fields is ignored. The
// entry is committed (on disk, as the database's durability settings
// make it) when Append returns. An entry that breaks a rule of its fields
// is refused with an *EntryError (ErrInvalidEntry).
func (l *Log) Append(ctx context.Context, e Entry) (Entry, error) {
	out, err := l.AppendBatch(ctx, []Entry{e})
	if err != nil {
		return Entry{}, err
	}
	return out[0], nil
}

// MaxBatch bounds the entries of one AppendBatch.
const MaxBatch = 1000

// AppendBatch appends es (at most MaxBatch), in order, in one transaction:
// consecutive seqs, one time, all stored or none. The executor uses it for
// the steps of one action that happen together (e.g. validated and
// judged); steps that go with writes of the caller's own use AppendTx.
//
// Appends that a Log receives while another is being written are joined
// into the next transaction (each keeps its entries consecutive), so that
// concurrent appenders share one hold of the head row and one commit. A
// caller whose context ends while it waits leaves the queue if its
// entries were not taken yet; once taken, it waits for the outcome, which
// no longer depends on its context.
func (l *Log) AppendBatch(ctx context.Context, es []Entry) ([]Entry, error) {
	checked, err := l.checkBatch(es)
	if err != nil || len(checked) == 0 {
		return nil, err
	}
	out, err := l.appendCombined(ctx, checked)
	if err != nil {
		return nil, fmt.Errorf("audit: append: %w", err)
	}
	return out, nil
}

// AppendTx appends es (at most MaxBatch), in order, inside tx, a write
// transaction of the database the Log was made on (one that
// sqldb.DB.Write runs): the entries are checked, chained and stored as
// AppendBatch's are, and share tx's fate. They are committed with the
// caller's own writes, in one commit, or vanish with its rollback and
// leave the chain as it was. It returns them as they will be stored; they
// are appended only once tx commits. Give them to Committed once it has,
// so that the Log knows them as its own (Seal refuses a chain that lost
// them).
//
// An error leaves tx unusable for the log (on SQLite some entries may be
// written in it without the head record): the caller must roll tx back,
// as returning the error from Write's function does.
//
// On PostgreSQL AppendTx takes the head record's row lock, for which every
// appender of every process waits, and tx holds it until it ends. Call it
// last in tx, after the statements on the caller's own rows: the lock is
// then held shortly, and no transaction holding it waits for another
// lock (which, taken in the other order elsewhere, could deadlock). It
// does not join the Log's combined appends, but is ordered with them by
// that lock (on SQLite, by the single writer).
func (l *Log) AppendTx(ctx context.Context, tx *sql.Tx, es []Entry) ([]Entry, error) {
	checked, err := l.checkBatch(es)
	if err != nil || len(checked) == 0 {
		return nil, err
	}
	h, err := l.readHeadForUpdate(ctx, tx)
	if err != nil {
		return nil, fmt.Errorf("audit: append: %w", err)
	}
	out, err := l.appendTx(ctx, tx, &h, checked)
	if err != nil {
		return nil, fmt.Errorf("audit: append: %w", err)
	}
	return out, nil
}

// checkBatch validates es for AppendBatch and AppendTx: the Log is open
// (else ErrClosed), at most MaxBatch entries, each valid (StepPruned is
// the log's own, as is StepSealed), and returns them with Detail in its
// minimal form.
func (l *Log) checkBatch(es []Entry) ([]Entry, error) {
	if l.closed.Load() {
		return nil, ErrClosed
	}
	if len(es) > MaxBatch {
		return nil, fmt.Errorf("audit: append: %d entries in one batch, at most %d", len(es), MaxBatch)
	}
	checked := make([]Entry, len(es))
	for i, e := range es {
		c, err := e.check(l.opts.MaxDetail)
		if err == nil && (c.Step == StepPruned || c.Step == StepSealed) {
			err = &EntryError{"step", string(c.Step) + " is written by the log itself"}
		}
		if err != nil {
			return nil, fmt.Errorf("audit: append entry %d: %w", i, err)
		}
		checked[i] = c
	}
	return checked, nil
}

// readHeadForUpdate reads the head inside a write transaction, locking it
// on PostgreSQL until the transaction ends: appenders of every process
// queue here.
func (l *Log) readHeadForUpdate(ctx context.Context, tx *sql.Tx) (head, error) {
	var h head
	err := tx.StmtContext(ctx, l.lockHead).QueryRowContext(ctx).Scan(&h.first, &h.firstPrev, &h.last, &h.lastHash)
	if errors.Is(err, sql.ErrNoRows) {
		return h, &VerifyError{Kind: KindHead, Detail: "the head record is missing"}
	}
	if err != nil {
		return h, fmt.Errorf("read head: %w", err)
	}
	return h, nil
}

// appendTx chains es after h, inserts them and moves the head; h is
// updated. es have been checked.
func (l *Log) appendTx(ctx context.Context, tx *sql.Tx, h *head, es []Entry) ([]Entry, error) {
	return l.appendTxAt(ctx, tx, h, es, time.UnixMicro(l.opts.Now().UnixMicro()).UTC())
}

// appendTxAt is appendTx dating the entries now (to the microsecond, UTC).
func (l *Log) appendTxAt(ctx context.Context, tx *sql.Tx, h *head, es []Entry, now time.Time) ([]Entry, error) {
	out := make([]Entry, len(es))
	insert := tx.StmtContext(ctx, l.insert)
	seq, prev := h.last, h.lastHash
	for i, e := range es {
		seq++
		e.Seq, e.Time, e.Prev = seq, now, prev
		e.Hash = Hash(e)
		if _, err := insert.ExecContext(ctx, insertArgs(e)...); err != nil {
			return nil, fmt.Errorf("insert entry %d: %w", seq, err)
		}
		prev = e.Hash
		out[i] = e
	}
	if _, err := tx.StmtContext(ctx, l.setLast).ExecContext(ctx, seq, prev); err != nil {
		return nil, fmt.Errorf("update head: %w", err)
	}
	h.last, h.lastHash = seq, prev
	return out, nil
}

func insertArgs(e Entry) []any {
	return []any{e.Seq, e.Time.UnixMicro(), e.Actor, e.Task, e.Action, string(e.Step), e.Decision, e.Reason,
		e.PolicyVersion, e.PreHash, e.PostHash, string(e.Detail), e.Prev, e.Hash}
}

// scanEntry reads a row of entryColumns.
func scanEntry(rows *sql.Rows) (Entry, error) {
	var (
		e      Entry
		ts     int64
		step   string
		detail string
	)
	if err := rows.Scan(&e.Seq, &ts, &e.Actor, &e.Task, &e.Action, &step, &e.Decision, &e.Reason,
		&e.PolicyVersion, &e.PreHash, &e.PostHash, &detail, &e.Prev, &e.Hash); err != nil {
		return e, err
	}
	e.Time = time.UnixMicro(ts).UTC()
	e.Step = Step(step)
	if detail != "" {
		e.Detail = []byte(detail)
	}
	return e, nil
}

// Anchor is a point of the chain kept outside the database: the hash of
// the entry Seq. Report.Head is the anchor of the last entry verified; an
// operator who keeps it elsewhere (printed by `snapnode audit verify`,
// copied off the machine) and gives it to a later Verify learns whether
// the log was since cut back below it or rewritten up to it — which the
// database alone cannot tell.
type Anchor struct {
	Seq  int64  `json:"seq"`
	Hash string `json:"hash"`
}

// Head returns the anchor of the last entry appended: {0, Genesis} for a
// new log.
func (l *Log) Head(ctx context.Context) (Anchor, error) {
	if l.closed.Load() {
		return Anchor{}, ErrClosed
	}
	var a Anchor
	err := l.db.R.QueryRowContext(ctx, "SELECT last_seq, last_hash FROM audit_head WHERE id = 1").Scan(&a.Seq, &a.Hash)
	if errors.Is(err, sql.ErrNoRows) {
		return a, &VerifyError{Kind: KindHead, Detail: "the head record is missing"}
	}
	if err != nil {
		return a, fmt.Errorf("audit: head: %w", err)
	}
	return a, nil
}

// Filter selects entries for Query and Count; its zero value selects the
// first DefaultQueryLimit entries.
type Filter struct {
	Task   string    // entries of this task
	Action string    // entries of this action id
	Since  time.Time // entries appended at or after
	// AfterSeq pages: entries with a greater Seq.
	AfterSeq int64
	// BeforeSeq, when positive, pages back: entries with a smaller Seq.
	BeforeSeq int64
	// Limit bounds the result (default DefaultQueryLimit, at most
	// MaxQueryLimit).
	Limit int
	// Newest selects the last Limit entries the filter matches instead of
	// the first (still returned in Seq order): a task's newest entries,
	// read without the older ones. Count ignores it, as it does Limit.
	Newest bool
}

// Bounds of Filter.Limit.
const (
	DefaultQueryLimit = 1000
	MaxQueryLimit     = 10_000
)

// where returns the conditions of f (Limit and Newest aside), with ?
// placeholders, and their arguments: "" for none.
func (f Filter) where() (string, []any) {
	var (
		where []string
		args  []any
	)
	// The "<> ''" terms let SQLite use the partial indexes (task, seq)
	// and (action, seq), which it may only when the query implies their
	// WHERE: "task = ?" alone does not, and scanned the whole log.
	if f.Task != "" {
		where, args = append(where, "task = ? AND task <> ''"), append(args, f.Task)
	}
	if f.Action != "" {
		where, args = append(where, "action = ? AND action <> ''"), append(args, f.Action)
	}
	if !f.Since.IsZero() {
		where, args = append(where, "ts >= ?"), append(args, f.Since.UnixMicro())
	}
	if f.AfterSeq > 0 {
		where, args = append(where, "seq > ?"), append(args, f.AfterSeq)
	}
	if f.BeforeSeq > 0 {
		where, args = append(where, "seq < ?"), append(args, f.BeforeSeq)
	}
	if len(where) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(where, " AND "), args
}

// Query returns the entries f selects, in Seq order. The task and action
// filters use an index each, in either direction (Newest); Since alone
// scans.
func (l *Log) Query(ctx context.Context, f Filter) ([]Entry, error) {
	if l.closed.Load() {
		return nil, ErrClosed
	}
	limit := f.Limit
	switch {
	case limit <= 0:
		limit = DefaultQueryLimit
	case limit > MaxQueryLimit:
		return nil, fmt.Errorf("audit: query limit %d: at most %d", limit, MaxQueryLimit)
	}
	where, args := f.where()
	q := "SELECT " + entryColumns + " FROM audit_log" + where + " ORDER BY seq"
	if f.Newest {
		q += " DESC"
	}
	q += " LIMIT ?"
	args = append(args, limit)
	rows, err := l.db.R.QueryContext(ctx, l.d.Rebind(q), args...)
	if err != nil {
		return nil, fmt.Errorf("audit: query: %w", err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		e, err := scanEntry(rows)
		if err != nil {
			return nil, fmt.Errorf("audit: query: %w", err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("audit: query: %w", err)
	}
	if f.Newest {
		slices.Reverse(out)
	}
	return out, nil
}

// Count returns how many entries f selects, its Limit and Newest aside.
// With a Task or Action it counts in that filter's index, not reading the
// entries: the earlier entries of a task whose newest a page shows are
// Count(Filter{Task: id, BeforeSeq: shown[0].Seq}).
func (l *Log) Count(ctx context.Context, f Filter) (int64, error) {
	if l.closed.Load() {
		return 0, ErrClosed
	}
	where, args := f.where()
	var n int64
	if err := l.db.R.QueryRowContext(ctx, l.d.Rebind("SELECT COUNT(*) FROM audit_log"+where), args...).Scan(&n); err != nil {
		return 0, fmt.Errorf("audit: count: %w", err)
	}
	return n, nil
}

// readTx begins a read-only transaction on the reader pool: one snapshot
// of the log (SQLite's WAL snapshot; PostgreSQL's REPEATABLE READ), so
// that a long Verify or Export sees no append or prune that happens
// meanwhile.
func (l *Log) readTx(ctx context.Context) (*sql.Tx, error) {
	opts := &sql.TxOptions{ReadOnly: true}
	if l.d == sqldb.Postgres {
		opts.Isolation = sql.LevelRepeatableRead
	}
	tx, err := l.db.R.BeginTx(ctx, opts)
	if err != nil {
		return nil, fmt.Errorf("begin: %w", err)
	}
	return tx, nil
}

// readHead reads the head record in a read transaction; a missing one is a
// *VerifyError.
func readHead(ctx context.Context, tx *sql.Tx) (head, error) {
	var h head
	err := tx.QueryRowContext(ctx, "SELECT first_seq, first_prev, last_seq, last_hash FROM audit_head WHERE id = 1").
		Scan(&h.first, &h.firstPrev, &h.last, &h.lastHash)
	if errors.Is(err, sql.ErrNoRows) {
		return h, &VerifyError{Kind: KindHead, Detail: "the head record is missing"}
	}
	if err != nil {
		return h, fmt.Errorf("read head: %w", err)
	}
	return h, nil
}

// Committed tells the Log that es, as AppendTx returned them, committed
// with the caller's transaction, so that the Log knows them as its own
// (see Seal): until then, or without it, a Seal does not notice them cut.
// Entries the Log writes itself (Append, AppendBatch, Seal, Prune) it
// knows at once.
func (l *Log) Committed(es []Entry) {
	if len(es) == 0 {
		return
	}
	e := es[len(es)-1]
	l.sealMu.Lock()
	defer l.sealMu.Unlock()
	if e.Seq > l.ownHead.Seq {
		l.ownHead = Anchor{e.Seq, e.Hash}
	}
	l.sinceSeal += int64(len(es))
	if n := l.opts.SealEvery; n > 0 && l.sinceSeal >= n && l.opts.Signer != nil {
		select {
		case l.due <- struct{}{}:
		default: // asked already
		}
	}
}
