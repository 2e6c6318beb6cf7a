package executor

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"github.com/snapnode/snapnode/executor/sandbox"
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
// is staged (so that it is not held for an operator in vain) and again,
// under the executor's promotion lock, just before it is promoted: two
// actions of one requester in flight together in one process cannot both
// pass (processes sharing the database and the workspace each hold their
// own lock).
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

// ledgerKey is the ledger's key of a requester: addresses compare
// without regard to case.
func ledgerKey(requester string) string { return strings.ToLower(requester) }

// overQuota returns a *sandbox.LimitError naming the first quota that
// delta takes requester past, or nil. Only what grows is checked: an
// action that frees room always may.
func (e *Executor) overQuota(ctx context.Context, requester string, delta sandbox.Counts) error {
	if delta.Bytes <= 0 && delta.Files <= 0 && delta.Dirs <= 0 {
		return nil
	}
	used, err := e.store.usage(ctx, ledgerKey(requester))
	if err != nil {
		return err
	}
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
