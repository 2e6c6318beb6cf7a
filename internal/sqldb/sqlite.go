package sqldb

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync/atomic"

	_ "modernc.org/sqlite" // registers the pure-Go "sqlite" driver
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
//     The fsync is paid once per group commit, not once per write (below);
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

// openSQLite opens the writer and reader pools of the file at path.
func openSQLite(ctx context.Context, path string, opts Options) (w, r *sql.DB, err error) {
	syncMode := strings.ToUpper(opts.Synchronous)
	switch syncMode {
	case "":
		syncMode = "FULL"
	case "FULL", "NORMAL", "EXTRA":
	default:
		return nil, nil, fmt.Errorf("sqldb: synchronous %q: want FULL, NORMAL or EXTRA", opts.Synchronous)
	}
	// Tasks are private: a new database is created 0600 in a 0700
	// folder, and SQLite gives its -wal and -shm files the same mode.
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, nil, fmt.Errorf("sqldb: %w", err)
	}
	if _, err := PrivateFiles(path); err != nil {
		return nil, nil, err
	}
	common := fmt.Sprintf("_busy_timeout=%d&_foreign_keys=1&_synchronous=%s", sqliteBusyTimeoutMS, syncMode)
	w, err = sql.Open("sqlite", path+"?"+common+"&_journal_mode=WAL&_txlock=immediate")
	if err != nil {
		return nil, nil, fmt.Errorf("sqldb: open %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxIdleTime(0)
	w.SetConnMaxLifetime(0)
	// The writer connects first: it turns WAL on (a setting of the file),
	// which the read-only connections cannot do.
	if err := w.PingContext(ctx); err != nil {
		_ = w.Close()
		return nil, nil, fmt.Errorf("sqldb: open %s: %w", path, err)
	}
	r, err = sql.Open("sqlite", path+"?"+common+"&_query_only=1")
	if err != nil {
		_ = w.Close()
		return nil, nil, fmt.Errorf("sqldb: open %s: %w", path, err)
	}
	n := opts.MaxConns
	if n <= 0 {
		n = max(4, runtime.GOMAXPROCS(0))
	}
	r.SetMaxOpenConns(n)
	r.SetMaxIdleConns(n)
	return w, r, nil
}

// committer is the SQLite writer: one goroutine that owns the writer
// connection and runs the store's writes in group commits. It takes every
// write already waiting, up to maxBatch, runs each in its own savepoint of
// one transaction and commits once, so that concurrent writers share one
// fsync; a write that fails rolls back to its savepoint without disturbing
// the others. No write is delayed to wait for company: a lone writer
// commits at once.
//
// The writes of a batch run with the committer's context, not their
// callers': a canceled statement interrupts the SQLite connection, which
// would roll back the whole batch. A caller whose context is done before
// its write starts gets the context's error and nothing is written.
type committer struct {
	db   *sql.DB
	reqs chan *writeReq
	quit chan struct{} // closed by stop
	done chan struct{} // closed when run returns

	// batches and writes count the transactions and the writes they
	// carried (for tests and metrics).
	batches, writes atomic.Int64
}

type writeReq struct {
	ctx  context.Context
	op   func(context.Context, *sql.Tx) error
	err  error
	done chan struct{}
}

func newCommitter(db *sql.DB) *committer {
	c := &committer{db: db, reqs: make(chan *writeReq), quit: make(chan struct{}), done: make(chan struct{})}
	go c.run()
	return c
}

// stop ends the goroutine after the batch in progress; later writes get
// ErrClosed.
func (c *committer) stop() {
	close(c.quit)
	<-c.done
}

// do runs op in the next group commit and returns once that has committed
// (nil) or failed.
func (c *committer) do(ctx context.Context, op func(context.Context, *sql.Tx) error) error {
	r := &writeReq{ctx: ctx, op: op, done: make(chan struct{})}
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
	}
}

// commit runs the batch in one transaction and sets each request's err.
func (c *committer) commit(batch []*writeReq) {
	ctx := context.Background()
	live := batch[:0:0]
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			r.err = err
			continue
		}
		live = append(live, r)
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
	tx, err := c.db.BeginTx(ctx, nil)
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
