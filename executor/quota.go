package executor

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/sqldb"
)

// Quotas cap what one requester may add to the workspace: bytes of
// regular files, regular files and directories. A zero field takes its
// value from DefaultQuotas; there is no "unlimited".
//
// Who owns what. The executor keeps, per requester, the net change of
// its actions that are promoted and not rolled back (executor_usage):
// each promotion adds what it changed in the workspace's counts (a file
// created is +1 file and its bytes, a file replaced the difference of
// the sizes, a folder created +1 directory, a delete the opposite) to
// the row of the identity that proposed it, in the commit that records
// the promotion; a rollback takes it off again in the commit that
// records the rollback. A promotion a crash cut short is undone at start
// (RecoverInterrupted), one the sandbox left half-way at once, before it
// was ever counted. The sandbox keeps no owner per file: the ledger is
// what a requester has added, not what it owns now, which is what bounds
// how far one identity can grow the workspace. A count never goes below
// zero, so deleting files another requester added frees the deleter's
// quota down to zero at most, and not the quota of the one that added
// them. Files the operator puts in the workspace count for nobody.
//
// An action whose promotion would take its requester past a quota fails
// with LIMIT_EXCEEDED naming the quota (limit requester_bytes,
// requester_files or requester_dirs, with max and got), checked when it
// is staged (so that it is not held for an operator in vain) and again in
// the commit that records it "promoting" (quotaTx), against the usage row
// and what the requester's other actions still promoting add: two
// actions of one requester in flight together cannot both pass, whether
// in one process or in several sharing the database (PostgreSQL: the
// check holds a lock of the requester until that commit ends; SQLite:
// the database's single writer).
//
// The quotas bound each requester; the sandbox's caps bound the whole
// workspace, every requester together and the operator's files included
// (sandbox.Limits MaxTotalBytes and MaxTotalEntries, checked when an
// action is staged and again when it is promoted): past one, the action
// fails with LIMIT_EXCEEDED naming it (limit total_bytes or
// total_entries).
type Quotas struct {
	Bytes int64 // bytes of regular files one requester adds
	Files int64 // regular files one requester adds
	Dirs  int64 // directories one requester adds
}

// DefaultQuotas are the quotas used for the zero fields of Quotas: a
// third of the sandbox's default workspace cap in bytes, 10,000 files
// and 1,000 folders per requester.
func DefaultQuotas() Quotas {
	return Quotas{Bytes: 32 << 20, Files: 10_000, Dirs: 1_000}
}

func (q Quotas) filled() (Quotas, error) {
	if q.Bytes < 0 || q.Files < 0 || q.Dirs < 0 {
		return Quotas{}, fmt.Errorf("executor: negative quota in %+v", q)
	}
	d := DefaultQuotas()
	q.Bytes = cmp.Or(q.Bytes, d.Bytes)
	q.Files = cmp.Or(q.Files, d.Files)
	q.Dirs = cmp.Or(q.Dirs, d.Dirs)
	return q, nil
}

// The quotas of LIMIT_EXCEEDED.
const (
	LimitRequesterBytes sandbox.Limit = "requester_bytes"
	LimitRequesterFiles sandbox.Limit = "requester_files"
	LimitRequesterDirs  sandbox.Limit = "requester_dirs"
)

// quotaWords name what each quota counts, in LIMIT_EXCEEDED's message.
var quotaWords = map[sandbox.Limit]string{
	LimitRequesterBytes: "bytes",
	LimitRequesterFiles: "files",
	LimitRequesterDirs:  "directories",
}

// workspaceWords name what each node-wide cap of the workspace (the
// sandbox's) counts, in LIMIT_EXCEEDED's message.
var workspaceWords = map[sandbox.Limit]string{
	sandbox.LimitTotalBytes:   "bytes of files",
	sandbox.LimitTotalEntries: "files and folders",
}

// ledgerKey is the ledger's key of a requester: addresses compare
// without regard to case.
func ledgerKey(requester string) string { return strings.ToLower(requester) }

// overQuota returns a *sandbox.LimitError naming the first quota that
// delta takes requester past, or nil: the check at staging, against the
// ledger's row alone (quotaTx, at the promotion, counts the actions
// still promoting too). Only what grows is checked: an action that frees
// room always may.
func (e *Executor) overQuota(ctx context.Context, requester string, delta sandbox.Counts) error {
	if !grows(delta) {
		return nil
	}
	used, err := e.store.usage(ctx, ledgerKey(requester))
	if err != nil {
		return err
	}
	return e.pastQuota(used, delta)
}

// grows reports whether delta adds to one of the counts.
func grows(delta sandbox.Counts) bool { return delta.Bytes > 0 || delta.Files > 0 || delta.Dirs > 0 }

// growth is what delta adds: each count at zero or more.
func growth(delta sandbox.Counts) sandbox.Counts {
	return sandbox.Counts{Bytes: max(delta.Bytes, 0), Files: max(delta.Files, 0), Dirs: max(delta.Dirs, 0)}
}

// pastQuota returns a *sandbox.LimitError naming the first quota that
// delta takes a requester holding used past, or nil.
func (e *Executor) pastQuota(used, delta sandbox.Counts) error {
	for _, c := range []struct {
		limit       sandbox.Limit
		used, delta int64
		max         int64
	}{
		{LimitRequesterBytes, used.Bytes, delta.Bytes, e.quotas.Bytes},
		{LimitRequesterFiles, used.Files, delta.Files, e.quotas.Files},
		{LimitRequesterDirs, used.Dirs, delta.Dirs, e.quotas.Dirs},
	} {
		if c.delta > 0 && c.used+c.delta > c.max {
			return &sandbox.LimitError{Limit: c.limit, Max: c.max, Got: c.used + c.delta}
		}
	}
	return nil
}

// quotaTx is the check, in the transaction of the commit that records
// requester's action actionID "promoting", that the promotion's delta
// keeps requester within its quotas: the ledger's row, plus what the
// requester's other actions still promoting add (their growth), plus
// delta. That transaction writes the record's growth: once it commits,
// the next check counts it, until the record leaves "promoting" — by
// its promoted commit, which counts it in the ledger instead, or by any
// other way (failed, back to approval, undone by recovery), which drops
// it. On PostgreSQL the check holds an advisory lock of the requester
// until the commit ends, so that two processes' checks of one requester
// take turns; SQLite's single writer already does. A refusal is a
// *refusal whose cause is the *sandbox.LimitError: nothing of the
// commit stays, and the journal is as it was before it. An action that adds nothing is not checked (nil).
func (e *Executor) quotaTx(requester, actionID string, delta sandbox.Counts) txOp {
	if !grows(delta) {
		return nil
	}
	return func(ctx context.Context, tx *sql.Tx) error {
		key := ledgerKey(requester)
		if err := e.store.d.Lock(ctx, tx, sqldb.LockKey(quotaLock+key)); err != nil {
			return fmt.Errorf("executor: lock the quotas of %s: %w", requester, err)
		}
		held, err := e.store.heldTx(ctx, tx, key, actionID)
		if err != nil {
			return err
		}
		if err := e.pastQuota(held, delta); err != nil {
			return &refusal{err: err}
		}
		return nil
	}
}

// quotaLock names the advisory lock of a requester's quotas, with its
// ledger key after it.
const quotaLock = "snapnode executor quota "

// heldTx returns, in tx, what requester key holds as its quotas count
// it at a promotion: its ledger row plus the growth of its records still
// promoting, but that of except (the record being written). A record's
// requester is compared by its ledger key, in Go: the records promoting
// are those of the promotions in flight, a handful.
func (s *store) heldTx(ctx context.Context, tx *sql.Tx, key, except string) (sandbox.Counts, error) {
	var held sandbox.Counts
	for rows, err := range sqldb.Rows(tx.QueryContext(ctx, s.d.Rebind(`SELECT requester, bytes, files, dirs FROM executor_usage WHERE requester = ?
		UNION ALL
		SELECT requester, grow_bytes, grow_files, grow_dirs FROM executor_actions
		WHERE state = 'promoting' AND action_id <> ? AND (grow_bytes > 0 OR grow_files > 0 OR grow_dirs > 0)`), key, except)) {
		var who string
		var c sandbox.Counts
		if err == nil {
			err = rows.Scan(&who, &c.Bytes, &c.Files, &c.Dirs)
		}
		if err != nil {
			return sandbox.Counts{}, fmt.Errorf("executor: read usage: %w", err)
		}
		if ledgerKey(who) == key {
			held.Bytes, held.Files, held.Dirs = held.Bytes+c.Bytes, held.Files+c.Files, held.Dirs+c.Dirs
		}
	}
	return held, nil
}

// usage returns the ledger's row of key (zeros when it has none).
func (s *store) usage(ctx context.Context, key string) (sandbox.Counts, error) {
	var c sandbox.Counts
	err := s.db.R.QueryRowContext(ctx, s.d.Rebind(`SELECT bytes, files, dirs FROM executor_usage WHERE requester = ?`), key).
		Scan(&c.Bytes, &c.Files, &c.Dirs)
	if errors.Is(err, sql.ErrNoRows) {
		return sandbox.Counts{}, nil
	}
	if err != nil {
		return c, fmt.Errorf("executor: read usage: %w", err)
	}
	return c, nil
}

// Usage returns what requester has added to the workspace, as its quotas
// count it.
func (e *Executor) Usage(ctx context.Context, requester string) (sandbox.Counts, error) {
	return e.store.usage(ctx, ledgerKey(requester))
}

// countTx adds delta to the ledger's row of requester, in tx, each count
// kept at zero or more; a row back to all zeros is deleted.
func (s *store) countTx(ctx context.Context, tx *sql.Tx, requester string, delta sandbox.Counts) error {
	if delta == (sandbox.Counts{}) {
		return nil
	}
	key := ledgerKey(requester)
	pos := func(n int64) int64 { return max(n, 0) }
	const add = `CASE WHEN executor_usage.%[1]s + ? < 0 THEN 0 ELSE executor_usage.%[1]s + ? END`
	q := s.d.Rebind(`INSERT INTO executor_usage (requester, bytes, files, dirs) VALUES (?, ?, ?, ?)
		ON CONFLICT (requester) DO UPDATE SET bytes = ` + fmt.Sprintf(add, "bytes") +
		`, files = ` + fmt.Sprintf(add, "files") + `, dirs = ` + fmt.Sprintf(add, "dirs"))
	if _, err := tx.ExecContext(ctx, q, key, pos(delta.Bytes), pos(delta.Files), pos(delta.Dirs),
		delta.Bytes, delta.Bytes, delta.Files, delta.Files, delta.Dirs, delta.Dirs); err != nil {
		return fmt.Errorf("executor: count usage: %w", err)
	}
	if _, err := tx.ExecContext(ctx, s.d.Rebind(`DELETE FROM executor_usage
		WHERE requester = ? AND bytes = 0 AND files = 0 AND dirs = 0`), key); err != nil {
		return fmt.Errorf("executor: count usage: %w", err)
	}
	return nil
}

// negative returns the opposite of c.
func negative(c sandbox.Counts) sandbox.Counts {
	return sandbox.Counts{Bytes: -c.Bytes, Files: -c.Files, Dirs: -c.Dirs}
}
