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
// be read or written: the file is out of reach (its permissions, an I/O
// error, something else than a regular file in its place) or is not a
// record (garbled, truncated, over the bound, naming no seal). It is not
// ErrTampered: the log wrote the record atomically, so a file it cannot
// read is damaged or out of reach, which says nothing of the chain
// (whoever could change the file could as well delete it). A record that
// reads but names a seal the chain does not hold is tampering
// (KindRecord).
var ErrSealRecord = errors.New("audit: seal record")

// RecordError is the error of a check against the record of the last
// seal that could not read the record (Record, which errors.Is
// ErrSealRecord): the check went on without it, and Chain is what it
// found, nil when nothing. CheckSealRecord then checks the chain's last
// seal, as without a record; Log.VerifyWithRecord verifies the whole
// chain. errors.Is sees both: ErrSealRecord, and ErrTampered when Chain
// is tampering.
type RecordError struct {
	Record error
	Chain  error
}

func (e *RecordError) Error() string {
	if e.Chain == nil {
		return e.Record.Error()
	}
	return e.Record.Error() + "; and without it: " + e.Chain.Error()
}

// Unwrap returns Record and Chain (when not nil).
func (e *RecordError) Unwrap() []error {
	if e.Chain == nil {
		return []error{e.Record}
	}
	return []error{e.Record, e.Chain}
}

// withoutRecord is err without a RecordError's Record: its Chain, or err.
func withoutRecord(err error) error {
	var re *RecordError
	if errors.As(err, &re) {
		return re.Chain
	}
	return err
}

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
// before they write, and that the chain's last seal holds. It returns a
// *VerifyError (KindRecord, naming the record's file and the entry it
// expected) when the chain does not hold the recorded seal; one that
// errors.Is ErrOtherKey (KindSeal, or KindCheckpoint when pruned past)
// when the chain holds it signed by another key than the log's Signer
// (the node's key changed), naming both addresses.
//
// The chain's last seal, with or without a record (none written yet, or
// it was removed), must hold too (see checkLastSeal), not verifying the
// chain: one signed, its signature holding, by another key than the
// log's Signer is ErrOtherKey (KindSeal), for that key can neither seal
// nor prune the log; one that does not hold otherwise (it signs another
// hash than the chain has before it, its signature fails, the entry was
// edited) is a *VerifyError of KindSeal (KindEdited), for the log cannot
// be sealed over it.
//
// The chain must end where the head record says it does (see
// checkHeadEntry): a chain that ends before it is a *VerifyError of
// KindTruncated (the entries after the last seal deleted, the head left
// as it was), one that goes on after it KindExtra, a last entry edited
// KindEdited, and one whose hash is not the head's KindHead. The node
// checks this at start so that it does not append after a gap.
//
// A record that cannot be read is a *RecordError (errors.Is
// ErrSealRecord, not ErrTampered unless the last seal does not hold):
// the chain's last seal checked as without a record, its error the
// RecordError's Chain.
func (l *Log) CheckSealRecord(ctx context.Context) error {
	if l.closed.Load() {
		return ErrClosed
	}
	r, rerr := l.loadSealRecord()
	if rerr == nil && r.Seq == 0 && l.opts.Signer == nil {
		return nil
	}
	err := l.checkRecordAndLastSeal(ctx, r)
	if rerr != nil {
		return &RecordError{Record: rerr, Chain: err}
	}
	return err
}

// checkRecordAndLastSeal is CheckSealRecord's check of the record r (none
// when its Seq is 0) and the chain's last seal, in one read snapshot.
func (l *Log) checkRecordAndLastSeal(ctx context.Context, r SealRecord) error {
	tx, err := l.readTx(ctx)
	if err != nil {
		return fmt.Errorf("audit: check the seal record: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	h, err := readHead(ctx, tx)
	if err != nil {
		return err
	}
	if err := l.checkSealRecord(ctx, tx, h, r); err != nil {
		return err
	}
	if err := l.checkLastSeal(ctx, tx, h, r); err != nil {
		return err
	}
	return l.checkHeadEntry(ctx, tx, h)
}

// checkHeadEntry: the chain ends where the head record says it does, at
// an entry whose fields give its hash and whose hash is the head's, with
// nothing after it. Two reads of the primary key, not a walk: enough for
// a start to find the entries after the last seal deleted with the head
// record left as it was, before the node appends after a gap it could
// never close (its next entry would chain to the head's hash across the
// missing ones). A tail cut with the head moved back with it is beyond
// this check, as beyond any without a seal or an anchor after it.
func (l *Log) checkHeadEntry(ctx context.Context, tx *sql.Tx, h head) error {
	var end sql.NullInt64
	if err := tx.QueryRowContext(ctx, "SELECT MAX(seq) FROM audit_log").Scan(&end); err != nil {
		return fmt.Errorf("audit: check the head: %w", err)
	}
	last := max(end.Int64, h.first-1)
	switch {
	case last > h.last:
		return &VerifyError{Seq: h.last + 1, Kind: KindExtra, Detail: fmt.Sprintf("entry after the end of the chain (seq %d) in the head record: the chain goes on to entry %d", h.last, last)}
	case last < h.last:
		return &VerifyError{Seq: last + 1, Kind: KindTruncated, Detail: fmt.Sprintf("the head record says the chain ends at entry %d; its last entry is %d: the entries after it were deleted", h.last, last)}
	case h.last < h.first:
		return nil // empty
	}
	x, missing, problem, err := l.entryAt(ctx, tx, h.last)
	switch {
	case err != nil:
		return fmt.Errorf("audit: check the head: %w", err)
	case missing:
		return &VerifyError{Seq: h.last, Kind: KindTruncated, Detail: "the head record's last entry is missing"}
	case problem != "":
		return &VerifyError{Seq: h.last, Kind: KindEdited, Detail: "the last entry " + problem}
	case x.Hash != h.lastHash:
		return &VerifyError{Seq: h.last, Kind: KindHead, Detail: fmt.Sprintf("the head record gives hash %s for the last entry, the chain %s", h.lastHash, x.Hash)}
	}
	return nil
}

// entryAt reads entry seq in tx and checks that its fields give its hash.
// A read that fails is an error; otherwise missing tells that the chain
// has no such entry, and problem, when not empty, what is wrong with the
// one it has ("is unreadable: …" or "was edited: …", to follow the
// caller's name for it).
func (l *Log) entryAt(ctx context.Context, tx *sql.Tx, seq int64) (x Entry, missing bool, problem string, err error) {
	rows, err := tx.QueryContext(ctx, l.d.Rebind("SELECT "+entryColumns+" FROM audit_log WHERE seq = ?"), seq)
	if err != nil {
		return x, false, "", err
	}
	defer rows.Close()
	if !rows.Next() {
		return x, rows.Err() == nil, "", rows.Err()
	}
	x, err = scanEntry(rows)
	switch {
	case err != nil:
		return x, false, fmt.Sprintf("is unreadable: %v", err), nil
	case Hash(x) != x.Hash:
		return x, false, fmt.Sprintf("was edited: its fields give hash %s, not its own %s", Hash(x), x.Hash), nil
	}
	return x, false, "", rows.Err()
}

// checkLastSeal: the chain's last seal, if any, after the seal the
// record r names (any, when r.Seq is 0: no record), must hold: a seal
// whose entry's fields give its hash, that signs the entry before it as
// the chain gives it, its signature holding, by the log's signer. It is
// not, in a *VerifyError: the entry edited (KindEdited), or the seal
// (KindSeal), ErrOtherKey too when signed, validly, by another key. The
// error says it is the last seal, and what the record was.
func (l *Log) checkLastSeal(ctx context.Context, tx *sql.Tx, h head, r SealRecord) error {
	var seq int64
	switch err := tx.QueryRowContext(ctx, l.d.Rebind(lastSealQuery), max(h.first, r.Seq+1)).Scan(&seq); {
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
	record := "no record of the last seal this node wrote"
	switch p := l.opts.SealRecord; {
	case r.Seq > 0:
		record = fmt.Sprintf("the record of the last seal this node wrote (%s) names entry %d, held by the chain", r.Path, r.Seq)
	case p != "":
		record += " (" + p + ")"
	}
	x, err := scanEntry(rows)
	if err != nil {
		return &VerifyError{Seq: seq, Kind: KindEdited, Detail: fmt.Sprintf("%s; the chain's last seal, entry %d, is unreadable: %v", record, seq, err)}
	}
	if computed := Hash(x); computed != x.Hash {
		return &VerifyError{Seq: seq, Kind: KindEdited, Detail: fmt.Sprintf("%s; the chain's last seal, entry %d: its fields give hash %s, not its own %s: the entry was edited", record, seq, computed, x.Hash)}
	}
	var d sealDetail
	if err := jsonv2.Unmarshal(x.Detail, &d); err != nil {
		return &VerifyError{Seq: seq, Kind: KindSeal, Detail: fmt.Sprintf("%s; the chain's last seal, entry %d, is unreadable: %v", record, seq, err)}
	}
	want := l.signer()
	why, other := d.check(x, want)
	if why == "" {
		return rows.Err()
	}
	ve := d.sealError(x, want, why, other)
	if other {
		ve.Detail = fmt.Sprintf("%s; the chain's last seal, entry %d, is signed by %s (its signature holds), not by the node's key, %s", record, x.Seq, ve.Signer, ve.Want)
	} else {
		ve.Detail = fmt.Sprintf("%s; the chain's last seal, entry %d, does not hold: %s", record, x.Seq, why)
	}
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
	x, missing, problem, err := l.entryAt(ctx, tx, r.Seq)
	switch {
	case err != nil:
		return fmt.Errorf("read the recorded seal: %w", err)
	case missing:
		return bad("the chain has no entry %d", r.Seq)
	case problem != "":
		return bad("its entry %d %s", r.Seq, problem)
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
	return nil
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
