package sqldb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	sqlite3 "modernc.org/sqlite/lib"
)

// SQLite runs with:
//
//   - WAL, so that readers never wait for the writer nor it for them;
//   - synchronous=FULL by default: every commit is on disk (fsync of the WAL)
//     before the call that made it returns. An accepted task is one the
//     requester has been told about, so it must survive the machine losing
//     power, not only the process dying. NORMAL survives a killed process
//     (the WAL is in the OS's cache) but may lose the last commits on a
//     power cut; Options.Synchronous offers it where that trade is wanted.
//     The fsync is paid once per group commit, not once per write (below),
//     and not at all by a batch of writes that asked not to wait for the
//     disk (DB.WriteNoSync), which the writer commits at NORMAL;
//   - busy_timeout 10 s, for the other processes sharing the file;
//   - foreign keys on;
//   - one writer connection (SetMaxOpenConns(1)) whose transactions are
//     BEGIN IMMEDIATE, so that two processes queue for the write lock
//     instead of failing to upgrade a read lock; and a pool of read-only
//     connections (query_only) for Get, List and Lookup.
const (
	sqliteBusyTimeoutMS = 10_000
	// maxBatch bounds a group commit.
	maxBatch = 128
)

// sqliteSync returns the synchronous setting opts ask for.
func sqliteSync(opts Options) (string, error) {
	switch mode := strings.ToUpper(opts.Synchronous); mode {
	case "":
		return "FULL", nil
	case "FULL", "NORMAL", "EXTRA":
		return mode, nil
	}
	return "", fmt.Errorf("sqldb: synchronous %q: want FULL, NORMAL or EXTRA", opts.Synchronous)
}

// openSQLite opens the writer and reader pools of the file at path, every
// connection at the synchronous setting syncMode, counting in sent the
// statements they run.
func openSQLite(ctx context.Context, path, syncMode string, opts Options, sent *atomic.Int64) (w, r *sql.DB, err error) {
	// Tasks are private: a new database is created 0600 in a 0700
	// folder, and SQLite gives its -wal and -shm files the same mode.
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, fmt.Errorf("sqldb: %w", err)
	}
	if _, err := PrivateFiles(path); err != nil {
		return nil, nil, err
	}
	common := fmt.Sprintf("_busy_timeout=%d&_foreign_keys=1&_synchronous=%s", sqliteBusyTimeoutMS, syncMode)
	w = openSQLiteCounting(path+"?"+common+"&_journal_mode=WAL&_txlock=immediate", sent)
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)
	// The writer connects first: it turns WAL on (a setting of the file),
	// which the read-only connections cannot do.
	if err := connectWriter(ctx, w); err != nil {
		_ = w.Close()
		return nil, nil, fmt.Errorf("sqldb: open %s: %w", path, err)
	}
	r = openSQLiteCounting(path+"?"+common+"&_query_only=1", sent)
	n := opts.MaxConns
	if n <= 0 {
		n = max(4, runtime.GOMAXPROCS(0))
	}
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	return w, r, nil
}

// connectWriter connects w, the writer. Its first connection to a new
// file turns WAL on, which takes the file's exclusive lock; SQLite answers
// SQLITE_BUSY at once, without waiting as busy_timeout says, when another
// process holds a lock on the file then (processes opening a new database
// together), so connecting is tried again until busy_timeout has passed
// since the first try (a try itself may wait up to busy_timeout).
func connectWriter(ctx context.Context, w *sql.DB) error {
	deadline := time.Now().Add(sqliteBusyTimeoutMS * time.Millisecond)
	for wait := time.Millisecond; ; wait = min(2*wait, 100*time.Millisecond) {
		err := w.PingContext(ctx)
		if sqlitePrimary(err) != sqlite3.SQLITE_BUSY || time.Now().After(deadline) {
			return err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

// sqlitePrimary returns the primary result code of a SQLite error (the
// low byte of the extended code the driver's errors report by their Code
// method), 0 for any other error or none.
func sqlitePrimary(err error) int {
	var se interface{ Code() int }
	if errors.As(err, &se) {
		return se.Code() & 0xff
	}
	return 0
}

// committer is the SQLite writer: one goroutine that owns the writer
// connection and runs the store's writes in group commits. It takes every
// write already waiting, up to maxBatch, runs each in its own savepoint of
// one transaction and commits once, so that concurrent writers share one
// fsync; a write that fails rolls back to its savepoint without disturbing
// the others. No write is delayed to wait for company: a lone writer
// commits at once.
//
// A batch made only of writes that need not wait for the disk
// (DB.WriteNoSync) commits with synchronous=NORMAL: its WAL frames are
// written (a killed process loses nothing: they are in the OS's cache) but
// not fsynced. The next batch that waits for the disk sets the
// connection's own setting back first, and its fsync of the WAL carries
// the earlier frames to the disk too: SQLite appends frames to the WAL in
// commit order and fsync flushes the whole file. A batch mixing both kinds
// waits for the disk.
//
// The writes of a batch run with the committer's context, not their
// callers': a canceled statement interrupts the SQLite connection, which
// would roll back the whole batch. A caller whose context is done before
// its write starts gets the context's error and nothing is written.
type committer struct {
	db     *sql.DB
	reader *sql.DB // the read pool, for the checkpoints
	reqs   chan *writeReq
	quit   chan struct{} // closed by stop
	done   chan struct{} // closed when run returns
	// cpWant asks the checkpointer for a checkpoint (buffered 1); cpDone
	// is closed when it returns.
	cpWant, cpDone chan struct{}
	// cpCtx bounds the checkpoints; stop cancels it, so that closing
	// never waits for a reader to become free.
	cpCtx    context.Context
	cpCancel context.CancelFunc

	// sync is the database's synchronous setting (FULL, NORMAL or
	// EXTRA); mode the one the writer connection was last set to, "" when
	// unknown. Only run's goroutine touches mode.
	sync, mode string

	// batches and writes count the transactions and the writes they
	// carried, unsynced the transactions that did not wait for the disk
	// (for tests and metrics).
	batches, writes, unsynced atomic.Int64
	// checkpoints and checkpointErrs count the committer's own WAL
	// checkpoints, done and failed.
	checkpoints, checkpointErrs atomic.Int64
	log                         *slog.Logger
	// afterCheckpoint, when set (tests, before the first write), runs
	// after each checkpoint.
	afterCheckpoint func()
}

type writeReq struct {
	ctx context.Context
	op  func(context.Context, *sql.Tx) error
	// noSync: the write's commit need not wait for the disk.
	noSync bool
	err    error
	done   chan struct{}
}

func newCommitter(db, reader *sql.DB, syncMode string, logger *slog.Logger) *committer {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	c := &committer{db: db, reader: reader, reqs: make(chan *writeReq), quit: make(chan struct{}), done: make(chan struct{}),
		cpWant: make(chan struct{}, 1), cpDone: make(chan struct{}), sync: syncMode, mode: syncMode, log: logger}
	go c.run()
	c.cpCtx, c.cpCancel = context.WithCancel(context.Background())
	go c.checkpointer()
	return c
}

// stop ends the goroutines after the batch in progress (a checkpoint in
// progress is interrupted); later writes get ErrClosed.
func (c *committer) stop() {
	close(c.quit)
	c.cpCancel()
	<-c.done
	<-c.cpDone
}

// do runs op in the next group commit and returns once that has committed
// (nil) or failed. With noSync the commit may not have reached the disk
// yet (see committer).
func (c *committer) do(ctx context.Context, noSync bool, op func(context.Context, *sql.Tx) error) error {
	r := &writeReq{ctx: ctx, op: op, noSync: noSync, done: make(chan struct{})}
	select {
	case c.reqs <- r:
	case <-ctx.Done():
		return ctx.Err()
	case <-c.quit:
		return ErrClosed
	}
	// Once taken, the write is either done or refused shortly; the caller
	// waits for the outcome so that it never reports a failure for a write
	// that committed.
	<-r.done
	return r.err
}

func (c *committer) run() {
	defer close(c.done)
	batch := make([]*writeReq, 0, maxBatch)
	since := 0 // batches since the last checkpoint asked for
	for {
		select {
		case r := <-c.reqs:
			batch = append(batch[:0], r)
		case <-c.quit:
			return
		}
	drain:
		for len(batch) < maxBatch {
			select {
			case r := <-c.reqs:
				batch = append(batch, r)
			default:
				break drain
			}
		}
		c.commit(batch)
		c.batches.Add(1)
		c.writes.Add(int64(len(batch)))
		for i, r := range batch {
			close(r.done)
			batch[i] = nil
		}
		if since++; since >= checkpointEvery {
			select {
			case c.cpWant <- struct{}{}:
			default: // one is running or asked for already
			}
			since = 0
		}
	}
}

// checkpointEvery is how many batches the committer lets pass between the
// checkpoints of the WAL it asks for.
const checkpointEvery = 16

// checkpointer copies the WAL's committed pages into the database file
// (PRAGMA wal_checkpoint(PASSIVE)) each time the committer asks, on a
// connection of the read pool (a checkpoint is not a change of the
// database, which query_only allows) and beside the writer, which goes on
// committing meanwhile. Left to SQLite alone, the checkpoint runs inside
// the commit that takes the WAL past 1,000 pages, and the caller of that
// one write waits for 1,000 pages to be copied and the database file to be
// fsynced: the tail of the writes' latency. Asked for every
// checkpointEvery batches, no write waits for these; the WAL starts afresh
// at the next write after one that copied everything, and when writes
// never pause long enough for that, SQLite's own checkpoint at 1,000
// pages finds almost every page copied already. A failed checkpoint is
// counted and left for the next; the first of a run of failures is logged
// as a warning, the others at debug level.
func (c *committer) checkpointer() {
	defer close(c.cpDone)
	failing := false
	for {
		select {
		case <-c.cpWant:
		case <-c.quit:
			return
		}
		if _, err := c.reader.ExecContext(c.cpCtx, "PRAGMA wal_checkpoint(PASSIVE)"); err != nil {
			c.checkpointErrs.Add(1)
			if c.cpCtx.Err() == nil {
				level := slog.LevelWarn
				if failing {
					level = slog.LevelDebug
				}
				c.log.Log(c.cpCtx, level, "sqlite: WAL checkpoint failed; the next will try again", "err", err)
			}
			failing = true
		} else {
			c.checkpoints.Add(1)
			failing = false
		}
		if c.afterCheckpoint != nil {
			c.afterCheckpoint()
		}
	}
}

// commit runs the batch in one transaction and sets each request's err.
func (c *committer) commit(batch []*writeReq) {
	ctx := context.Background()
	live := batch[:0:0]
	noSync := true
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		live = append(live, r)
		noSync = noSync && r.noSync
	}
	if len(live) == 0 {
		return
	}
	fail := func(err error) {
		for _, r := range live {
			if r.err == nil {
				r.err = err
			}
		}
	}
	// The setting is the connection's, and cannot change inside a
	// transaction: the batch holds the one writer connection from the
	// pragma to the commit.
	conn, err := c.db.Conn(ctx)
	if err != nil {
		fail(fmt.Errorf("writer connection: %w", err))
		return
	}
	defer conn.Close()
	want := c.sync
	if noSync && c.sync != "NORMAL" {
		want = "NORMAL"
	}
	if err := c.setSync(ctx, conn, want); err != nil {
		fail(err)
		return
	}
	if want != c.sync {
		c.unsynced.Add(1)
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		fail(fmt.Errorf("begin: %w", err))
		return
	}
	if len(live) == 1 {
		// No savepoint needed: the transaction is the write.
		r := live[0]
		if r.err = r.op(ctx, tx); r.err != nil {
			_ = tx.Rollback()
			return
		}
	} else {
		for _, r := range live {
			if _, err := tx.ExecContext(ctx, "SAVEPOINT w"); err != nil {
				_ = tx.Rollback()
				fail(fmt.Errorf("savepoint: %w", err))
				return
			}
			r.err = r.op(ctx, tx)
			if r.err != nil {
				if _, err := tx.ExecContext(ctx, "ROLLBACK TO w"); err != nil {
					_ = tx.Rollback()
					fail(fmt.Errorf("rollback to savepoint: %w (after: %v)", err, r.err))
					return
				}
			}
			if _, err := tx.ExecContext(ctx, "RELEASE w"); err != nil {
				_ = tx.Rollback()
				fail(fmt.Errorf("release savepoint: %w", err))
				return
			}
		}
	}
	if err := tx.Commit(); err != nil {
		fail(fmt.Errorf("commit: %w", err))
	}
}

// setSync sets the writer connection's synchronous setting to mode unless
// it is known to be set. A connection the pool opens afresh (after a
// broken one) starts at the database's own setting, never lower; a
// failure forgets what the setting is, so that the next batch sets it
// again before it commits.
func (c *committer) setSync(ctx context.Context, conn *sql.Conn, mode string) error {
	if c.mode == mode {
		return nil
	}
	c.mode = ""
	if _, err := conn.ExecContext(ctx, "PRAGMA synchronous = "+mode); err != nil {
		return fmt.Errorf("synchronous %s: %w", mode, err)
	}
	c.mode = mode
	return nil
}
