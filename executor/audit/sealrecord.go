package audit

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/internal/readfile"
	"github.com/snapnode/snapnode/internal/syncdir"
)

// ErrSealRecord: the record of the last seal (Options.SealRecord) cannot
// be read or written.
var ErrSealRecord = errors.New("audit: seal record")

// SealRecord is the record, kept outside the database, of the last seal a
// Log wrote (Options.SealRecord): the seal entry's seq and hash, and its
// time. A seal that went missing from the chain together with every entry
// after the seal before it, the chain after that rewritten, leaves a
// chain that verifies; only the record says a seal is gone.
type SealRecord struct {
	Seq  int64     `json:"seq"`
	Hash string    `json:"hash"`
	Time time.Time `json:"time"`
	// Path is the file the record was read from ("" when not read from
	// one); the errors that name the record name it.
	Path string `json:"-"`
}

// maxSealRecord bounds the record file: its three fields fit in far less.
const maxSealRecord = 4096

// ReadSealRecord reads the record of the last seal in path. A missing
// file is an error that errors.Is fs.ErrNotExist (no seal recorded yet);
// one that is not a record is ErrSealRecord.
func ReadSealRecord(path string) (SealRecord, error) {
	// Opened without waiting, a regular file only: a FIFO put there
	// would block the node's start.
	b, err := readfile.Regular(path, maxSealRecord)
	if errors.Is(err, fs.ErrNotExist) {
		return SealRecord{}, err
	}
	if err != nil {
		return SealRecord{}, fmt.Errorf("%w: %w", ErrSealRecord, err)
	}
	var r SealRecord
	if err := jsonv2.Unmarshal(b, &r); err != nil {
		return SealRecord{}, fmt.Errorf("%w: %s: %w", ErrSealRecord, path, err)
	}
	if r.Seq < 1 || !isHexHash(r.Hash) {
		return SealRecord{}, fmt.Errorf("%w: %s: want a seal's seq (from 1) and hash (64 lowercase hex digits); got seq %d, hash %q", ErrSealRecord, path, r.Seq, r.Hash)
	}
	r.Path = path
	return r, nil
}

// WriteSealRecord writes r to path atomically, 0600: under a temporary
// name in its folder, synced, renamed over path, the folder synced.
func WriteSealRecord(path string, r SealRecord) error {
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", ErrSealRecord, path, err)
	}
	dir := filepath.Dir(path)
	// One process writes a data folder's record (the folder is locked):
	// a temporary file found here is one a crash left.
	stale, _ := filepath.Glob(filepath.Join(dir, "."+filepath.Base(path)+".*.tmp"))
	for _, name := range stale {
		_ = os.Remove(name)
	}
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("%w: %w", ErrSealRecord, err)
	}
	tmp := f.Name()
	fail := func(err error) error {
		_ = f.Close()
		_ = os.Remove(tmp)
		return fmt.Errorf("%w: %s: %w", ErrSealRecord, path, err)
	}
	if err := f.Chmod(0o600); err != nil {
		return fail(err)
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("%w: %s: %w", ErrSealRecord, path, err)
	}
	if err := syncdir.Sync(dir); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrSealRecord, path, err)
	}
	return nil
}

// loadSealRecord reads Options.SealRecord: the zero record, and no error,
// when there is none (no file, or no SealRecord set).
func (l *Log) loadSealRecord() (SealRecord, error) {
	if l.opts.SealRecord == "" {
		return SealRecord{}, nil
	}
	r, err := ReadSealRecord(l.opts.SealRecord)
	if errors.Is(err, fs.ErrNotExist) {
		return SealRecord{}, nil
	}
	return r, err
}

// CheckSealRecord checks that the chain holds the seal that
// Options.SealRecord records (see checkSealRecord), as Seal and Prune do
// before they write. It returns a *VerifyError (KindRecord, naming the
// record's file and the entry it expected) when the chain does not hold
// it; one that errors.Is ErrOtherKey (KindSeal, or KindCheckpoint when
// pruned past) when the chain holds it signed by another key than the
// log's Signer (the node's key changed), naming both addresses; and
// ErrSealRecord when the record cannot be read.
//
// Without a record (no file: none written yet, or it was removed), it
// looks at the chain's last seal alone, not verifying the chain: one
// signed, its signature holding, by another key than the log's Signer is
// ErrOtherKey too (KindSeal), for that key can neither seal nor prune
// the log; anything else about it is left to Verify and Seal.
func (l *Log) CheckSealRecord(ctx context.Context) error {
	if l.closed.Load() {
		return ErrClosed
	}
	r, err := l.loadSealRecord()
	if err != nil || r.Seq == 0 && l.opts.Signer == nil {
		return err
	}
	tx, err := l.readTx(ctx)
	if err != nil {
		return fmt.Errorf("audit: check the seal record: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	h, err := readHead(ctx, tx)
	if err != nil {
		return err
	}
	if r.Seq == 0 {
		return l.checkLastSealSigner(ctx, tx, h)
	}
	return l.checkSealRecord(ctx, tx, h, r)
}

// checkLastSealSigner: without a record, the chain's last seal, if any,
// must not be signed, validly, by another key than the log's: that is a
// *VerifyError that errors.Is ErrOtherKey, told as what CheckSealRecord
// finds without a record. A seal that does not hold otherwise is left to
// Verify and Seal, which walk the chain.
func (l *Log) checkLastSealSigner(ctx context.Context, tx *sql.Tx, h head) error {
	var seq int64
	switch err := tx.QueryRowContext(ctx, l.d.Rebind(lastSealQuery), h.first).Scan(&seq); {
	case errors.Is(err, sql.ErrNoRows):
		return nil
	case err != nil:
		return fmt.Errorf("audit: check the last seal: %w", err)
	}
	rows, err := tx.QueryContext(ctx, l.d.Rebind("SELECT "+entryColumns+" FROM audit_log WHERE seq = ?"), seq)
	if err != nil {
		return fmt.Errorf("audit: check the last seal: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		return rows.Err()
	}
	x, err := scanEntry(rows)
	if err != nil || Hash(x) != x.Hash {
		return nil // an edited entry: Verify's to name
	}
	var d sealDetail
	if err := jsonv2.Unmarshal(x.Detail, &d); err != nil {
		return nil
	}
	want := l.signer()
	why, other := d.check(x, want)
	if !other {
		return nil
	}
	ve := d.sealError(x, want, why, other)
	none := "no record of the last seal this node wrote"
	if p := l.opts.SealRecord; p != "" {
		none += " (" + p + ")"
	}
	ve.Detail = fmt.Sprintf("%s; the chain's last seal, entry %d, is signed by %s (its signature holds), not by the node's key, %s", none, x.Seq, ve.Signer, ve.Want)
	return ve
}

// checkSealRecord checks, in tx, that the chain whose head is h holds the
// seal r records: the entry at r.Seq is a seal, has r.Hash and its
// signature holds; or the chain starts after r.Seq, behind a checkpoint
// whose last pruning record the log's signer signed. A record beyond the
// chain's end, or contradicted by the chain, is a *VerifyError of
// KindRecord at r.Seq; a seal (or checkpoint) the chain holds, signed by
// another key than the log's, one that errors.Is ErrOtherKey.
func (l *Log) checkSealRecord(ctx context.Context, tx *sql.Tx, h head, r SealRecord) error {
	if r.Seq == 0 {
		return nil
	}
	bad := func(format string, args ...any) error { return r.mismatch(format, args...) }
	switch {
	case r.Seq > h.last:
		return bad("the chain ends at entry %d: it was cut, or rewritten after the seal before", h.last)
	case r.Seq < h.first:
		return l.checkPrunedPast(ctx, tx, h, r)
	}
	rows, err := tx.QueryContext(ctx, l.d.Rebind("SELECT "+entryColumns+" FROM audit_log WHERE seq = ?"), r.Seq)
	if err != nil {
		return fmt.Errorf("read the recorded seal: %w", err)
	}
	defer rows.Close()
	if !rows.Next() {
		if err := rows.Err(); err != nil {
			return fmt.Errorf("read the recorded seal: %w", err)
		}
		return bad("the chain has no entry %d", r.Seq)
	}
	x, err := scanEntry(rows)
	if err != nil {
		return bad("its entry %d is unreadable: %v", r.Seq, err)
	}
	if computed := Hash(x); computed != x.Hash {
		return bad("its fields give hash %s, not its own %s: the entry was edited", computed, x.Hash)
	}
	if verr := r.observe(x); verr != nil {
		return verr
	}
	var d sealDetail
	if err := jsonv2.Unmarshal(x.Detail, &d); err != nil {
		return bad("its seal is unreadable: %v", err)
	}
	want := l.signer()
	if why, other := d.check(x, want); other {
		return r.otherKey(d.sealError(x, want, why, other), "a seal the chain holds, signed by")
	} else if why != "" {
		return bad("%s", why)
	}
	return rows.Err()
}

// checkPrunedPast: the chain starts after the recorded seal, which only a
// pruning the node's key signed may do (the checkpoint a replica moved
// past this node's last seal): the last pruning record must name the
// chain's start and be signed by the log's signer.
func (l *Log) checkPrunedPast(ctx context.Context, tx *sql.Tx, h head, r SealRecord) error {
	bad := func(format string, args ...any) error { return r.mismatch(format, args...) }
	var (
		seq int64
		raw []byte
	)
	err := tx.QueryRowContext(ctx, l.d.Rebind("SELECT seq, detail FROM audit_log WHERE step = 'pruned' AND seq >= ? ORDER BY seq DESC LIMIT 1"), h.first).Scan(&seq, &raw)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return bad("the chain starts at entry %d and no pruning record says so", h.first)
	case err != nil:
		return fmt.Errorf("read the last pruning record: %w", err)
	}
	var d prunedDetail
	if err := jsonv2.Unmarshal(raw, &d); err != nil {
		return bad("the chain starts at entry %d; its last pruning record is unreadable: %v", h.first, err)
	}
	if d.FirstSeq != h.first || d.FirstPrev != h.firstPrev {
		return bad("the chain starts at entry %d after %s; its last pruning record says %d after %s", h.first, h.firstPrev, d.FirstSeq, d.FirstPrev)
	}
	if d.Signer == "" {
		return bad("the chain starts at entry %d behind a checkpoint no key signed", h.first)
	}
	want := l.signer()
	if why, other := d.checkSignature(want); other {
		return r.otherKey(&VerifyError{Seq: seq, Kind: KindCheckpoint, Detail: why, Signer: d.Signer, Want: want},
			"pruned since behind a checkpoint the chain holds, signed by")
	} else if why != "" {
		return bad("the chain starts at entry %d: %s", h.first, why)
	}
	return nil
}

// otherKey is ve, a seal or checkpoint signed by another key than the
// log's (ErrOtherKey), told as what the record r finds: the seal it
// names is what, signed by ve.Signer, not the log's key. The chain holds
// the seal recorded: the key changed, or both the database and the record
// are another node's.
func (r *SealRecord) otherKey(ve *VerifyError, what string) *VerifyError {
	ve.Detail = fmt.Sprintf("the record of the last seal this node wrote (%s) names entry %d, %s %s, not by the node's key, %s", r.Path, r.Seq, what, ve.Signer, ve.Want)
	return ve
}
