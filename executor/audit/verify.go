package audit

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"slices"

	jsonv2 "github.com/go-json-experiment/json"
)

// ErrTampered: the log (or an export of it) is not what the log wrote.
// Every *VerifyError is one.
var ErrTampered = errors.New("audit log tampered with")

// ErrOtherKey: a seal or checkpoint is signed, and its signature holds,
// but by another key than the one the log expects: the node's key
// changed since (a new key file beside the old data), or another node's
// log was put in its place; the log alone cannot tell which. The
// *VerifyError names both addresses (Signer, Want), and errors.Is
// ErrTampered too: the log is not this key's.
var ErrOtherKey = errors.New("audit log signed by another key")

// Kind says how a log fails verification.
type Kind string

// The kinds of VerifyError.
const (
	// KindEdited: the entry's fields do not give its hash.
	KindEdited Kind = "edited"
	// KindMissing: there is no entry with this seq where one should be.
	KindMissing Kind = "missing"
	// KindReordered: the entry is out of its place: another entry stands
	// at its seq, or (in an export) it comes after later ones.
	KindReordered Kind = "reordered"
	// KindUnlinked: the entry is consistent with its own hash but does not
	// chain to the entry before it (that one was replaced, or entries
	// between them removed and the rest renumbered).
	KindUnlinked Kind = "unlinked"
	// KindExtra: an entry the head record does not account for, before
	// the start of the retained chain or after its end.
	KindExtra Kind = "extra"
	// KindTruncated: the chain ends before the head record, or an anchor,
	// says it does.
	KindTruncated Kind = "truncated"
	// KindHead: the head record is missing or malformed, or disagrees with
	// the chain (its last hash, or a start no pruning record accounts for).
	KindHead Kind = "head"
	// KindAnchor: the entry differs from an anchor kept outside the log:
	// the chain was rewritten.
	KindAnchor Kind = "anchor"
	// KindMalformed: a line of an export that is not an entry or header.
	KindMalformed Kind = "malformed"
	// KindCheckpoint: a pruning record's signature of its checkpoint is
	// missing, does not verify, or is not by the signer the log expects:
	// the checkpoint was forged or rewritten, or (ErrOtherKey, when its
	// signature holds) signed by another key.
	KindCheckpoint Kind = "checkpoint"
	// KindSeal: a seal does not hold: it signs another hash than the
	// chain gives for the entry before it (the chain was rewritten below
	// it), its signature is missing or does not verify, or it is not by
	// the signer expected (ErrOtherKey, when its signature holds: the
	// node's key changed, or another node's log was put in its place).
	KindSeal Kind = "seal"
	// KindRecord: the chain does not hold the seal that the node's record
	// of its last seal (SealRecord), kept outside the database, names:
	// the chain ends before it, or has another entry there. The seals
	// after a rewritten part were deleted with it.
	KindRecord Kind = "record"
)

// VerifyError names the first entry at which a log fails verification.
type VerifyError struct {
	// Seq is the seq of the bad entry: where it should be, for a missing
	// one; the seq after the last good one, for an unreadable row or line.
	Seq  int64
	Kind Kind
	// Line is the line of the export (from 1, the header) at which
	// VerifyJSONL found the fault; 0 for Verify, and for faults found at
	// the end of the export (KindTruncated, and KindHead but for a bad
	// header).
	Line   int64
	Detail string
	// Signer and Want are set when a seal or checkpoint is signed by
	// another key than the one expected (errors.Is ErrOtherKey): the
	// address whose signature holds, and the one expected.
	Signer, Want string
	// Seal is the seal that failed (KindSeal, when its detail was
	// readable), as it reads.
	Seal *Seal
}

func (e *VerifyError) Error() string {
	s := fmt.Sprintf("audit: entry %d %s", e.Seq, e.Kind)
	if e.Seq == 0 && (e.Kind == KindHead || e.Kind == KindMalformed) {
		s = "audit: " + string(e.Kind) // about the log or the export, not an entry
	}
	if e.Line > 0 {
		s += fmt.Sprintf(" (line %d)", e.Line)
	}
	if e.Detail != "" {
		s += ": " + e.Detail
	}
	return s
}

// Unwrap makes errors.Is(err, ErrTampered) hold, and errors.Is(err,
// ErrOtherKey) when Signer is set.
func (e *VerifyError) Unwrap() []error {
	if e.Signer != "" {
		return []error{ErrOtherKey, ErrTampered}
	}
	return []error{ErrTampered}
}

// Report describes a verified chain, or the part verified before the first
// error.
type Report struct {
	// Entries is how many entries were verified, First and Last their
	// seqs (0 when none).
	Entries     int64
	First, Last int64
	// Checkpoint is where the retained chain starts: the seq before the
	// first retained entry and the hash that entry chains to ({0, Genesis}
	// unless the log was pruned).
	Checkpoint Anchor
	// CheckpointSigner is the address whose signature of the checkpoint
	// verified, in the last pruning record ("" when the log was never
	// pruned, or pruned without a Signer). Verify requires it to be
	// Options.Signer's; an export's verifier should compare it with the
	// node's address.
	CheckpointSigner string
	// Head is the last entry's anchor, as the head record gives it; keep
	// it outside the machine to detect later truncation or rewriting.
	Head Anchor
	// Partial: an export that starts after the checkpoint; its first
	// entry's link to the one before was not checked, unless an anchor
	// gave that one's hash (then counted in AnchorsChecked).
	Partial bool
	// AnchorsChecked counts the anchors given that matched; AnchorsPruned
	// those that lie before the retained chain (or before a partial
	// export's first entry but one) and could not be checked.
	AnchorsChecked, AnchorsPruned int
	// Seals counts the seals verified, LastSeal is the last (zero when
	// none), and Unsealed counts the entries verified after it (every
	// entry when there is none): no signature vouches for them yet, and
	// they can be cut or rewritten unseen.
	Seals    int
	LastSeal Seal
	Unsealed int64
	// SealRecordChecked: VerifyOptions.SealRecord was given and the chain
	// holds the seal it names; false when none was given, or its seal
	// lies before the retained chain (pruned, not checkable).
	SealRecordChecked bool
	// SealRecord is the record of the last seal the chain was checked
	// against (VerifyOptions.SealRecord, or the file VerifyWithRecord
	// read); zero when none was given. From VerifyWithRecord, a Seq of 0
	// with its Path set: no record in that file (none written yet).
	SealRecord SealRecord
}

// VerifyOptions are what Log.VerifyWith and VerifyJSONLWith check beyond
// the chain itself.
type VerifyOptions struct {
	// Anchors are heads kept outside the log (see Anchor).
	Anchors []Anchor
	// Signer is the address every seal and checkpoint must be signed by:
	// the node's. Empty: Log.VerifyWith takes the Log's Options.Signer;
	// without either, any signer is accepted, the same for every seal and
	// signed checkpoint, and reported (Report.LastSeal.Signer,
	// Report.CheckpointSigner); a log with signed seals must have its
	// start vouched for by a checkpoint that signer signed.
	Signer string
	// SealRecord, when set, is the node's record of the last seal it
	// wrote (ReadSealRecord): the chain must hold that seal (KindRecord),
	// unless it was pruned behind a later checkpoint.
	SealRecord *SealRecord
}

// reorderWindow bounds the distance searched when an entry's hash fails,
// to tell an entry moved to another seq from an edited one: an entry moved
// further is reported edited.
const reorderWindow = 4096

// verifier walks a chain in seq order in constant memory: Verify feeds it
// the rows of the database, VerifyJSONL the lines of an export.
type verifier struct {
	h head
	// from is the first seq expected; partial when it is after h.first
	// (an export of the tail), and then prev is learnt from the first
	// entry.
	from    int64
	partial bool
	// next and prev are the seq and Prev the next entry must have.
	next int64
	prev string
	// pruned is the newest pruning record seen.
	pruned    *prunedDetail
	prunedSeq int64
	prunedBad string
	anchors   []Anchor // sorted by seq, from the next to check
	// signer, when set, is the only signer of checkpoints accepted, and
	// every pruning record must be signed by it.
	signer string
	// one, when signer is not set, is the signer of the first seal or
	// signed checkpoint of the walk: every later one must be its, and
	// the checkpoint that starts the chain signed by it (as the node's
	// key signs both).
	one string
	// startAnchor is an anchor at the entry just before a partial
	// export, which its first entry must chain to.
	startAnchor *Anchor
	// record is the seal the node's record names, until the walk reaches
	// it.
	record *SealRecord
	rep    Report
}

// prunedDetail is the Detail of a StepPruned entry.
type prunedDetail struct {
	FirstSeq  int64  `json:"first_seq"`
	FirstPrev string `json:"first_prev"`
	Removed   int64  `json:"removed"`
	// Signer and Sig: the address that signed CheckpointDigest of the
	// fields above, and its BIP-340 signature in hex (both absent when
	// the log has no Signer).
	Signer string `json:"signer,omitempty"`
	Sig    string `json:"sig,omitempty"`
}

// newVerifier checks the head record and prepares to walk from seq from.
func newVerifier(h head, from int64, anchors []Anchor) (*verifier, *VerifyError) {
	switch {
	case h.first < 1 || h.last < h.first-1:
		return nil, &VerifyError{Seq: h.last, Kind: KindHead, Detail: fmt.Sprintf("head record starts at seq %d and ends at %d", h.first, h.last)}
	case !isHexHash(h.firstPrev) || !isHexHash(h.lastHash):
		return nil, &VerifyError{Seq: h.last, Kind: KindHead, Detail: "head record holds a malformed hash"}
	case h.first == 1 && h.firstPrev != Genesis:
		return nil, &VerifyError{Seq: 1, Kind: KindHead, Detail: "head record: the first entry does not chain to the genesis value"}
	case h.last == h.first-1 && h.lastHash != h.firstPrev:
		return nil, &VerifyError{Seq: h.last, Kind: KindHead, Detail: "head record of an empty chain: its last hash is not its start"}
	}
	v := &verifier{h: h, from: from, next: from}
	if from > h.first {
		v.partial = true
	} else {
		v.from, v.next, v.prev = h.first, h.first, h.firstPrev
	}
	v.rep.Checkpoint = Anchor{Seq: h.first - 1, Hash: h.firstPrev}
	v.rep.Head = Anchor{Seq: h.last, Hash: h.lastHash}
	v.anchors = slices.Clone(anchors)
	slices.SortFunc(v.anchors, func(a, b Anchor) int { return cmp.Compare(a.Seq, b.Seq) })
	for len(v.anchors) > 0 && v.anchors[0].Seq < v.next-1 {
		v.rep.AnchorsPruned++
		v.anchors = v.anchors[1:]
	}
	for len(v.anchors) > 0 && v.anchors[0].Seq == v.next-1 {
		if v.partial {
			// The entry before the export: the first entry's Prev must
			// be its hash (checked by observe).
			a := v.anchors[0]
			v.startAnchor = &a
		} else if err := v.checkAnchor(v.anchors[0], v.prev); err != nil {
			return nil, err
		}
		v.anchors = v.anchors[1:]
	}
	return v, nil
}

func (v *verifier) checkAnchor(a Anchor, hash string) *VerifyError {
	if a.Hash != hash {
		return &VerifyError{Seq: a.Seq, Kind: KindAnchor, Detail: fmt.Sprintf("the anchor records hash %s, the chain gives %s", a.Hash, hash)}
	}
	v.rep.AnchorsChecked++
	return nil
}

// observe checks the next entry of the walk.
func (v *verifier) observe(x Entry) *VerifyError {
	e := v.next
	switch {
	case x.Seq < v.h.first:
		return &VerifyError{Seq: x.Seq, Kind: KindExtra, Detail: fmt.Sprintf("entry before the start of the chain (seq %d)", v.h.first)}
	case x.Seq < e:
		return &VerifyError{Seq: x.Seq, Kind: KindReordered, Detail: fmt.Sprintf("entry %d comes after entry %d", x.Seq, e-1)}
	case x.Seq > v.h.last && e > v.h.last:
		return &VerifyError{Seq: x.Seq, Kind: KindExtra, Detail: fmt.Sprintf("entry after the end of the chain (seq %d) in the head record", v.h.last)}
	case x.Seq > e:
		// A gap. Is x the entry e with its seq changed?
		if v.genuineAt(x, e) {
			return &VerifyError{Seq: e, Kind: KindEdited, Detail: fmt.Sprintf("the entry is stored with seq %d", x.Seq)}
		}
		return &VerifyError{Seq: e, Kind: KindMissing, Detail: fmt.Sprintf("the chain goes from entry %d to entry %d", e-1, x.Seq)}
	}
	if computed := Hash(x); computed != x.Hash {
		if x.Prev != v.prev || v.partial && v.prev == "" {
			if s, ok := v.movedFrom(x); ok {
				return &VerifyError{Seq: e, Kind: KindReordered, Detail: fmt.Sprintf("holds the entry written as seq %d", s)}
			}
		}
		return &VerifyError{Seq: e, Kind: KindEdited, Detail: fmt.Sprintf("its hash is %s, its fields give %s", x.Hash, computed)}
	}
	if v.prev == "" && v.partial {
		if a := v.startAnchor; a != nil {
			if err := v.checkAnchor(*a, x.Prev); err != nil {
				return err
			}
			v.startAnchor = nil
		}
		v.prev = x.Prev // the start of a partial export is taken as given, or as the anchor gives it
	}
	if x.Prev != v.prev {
		return &VerifyError{Seq: e, Kind: KindUnlinked, Detail: fmt.Sprintf("its prev is %s, the hash of entry %d is %s", x.Prev, e-1, v.prev)}
	}
	for len(v.anchors) > 0 && v.anchors[0].Seq == e {
		if err := v.checkAnchor(v.anchors[0], x.Hash); err != nil {
			return err
		}
		v.anchors = v.anchors[1:]
	}
	if r := v.record; r != nil && r.Seq == e {
		if verr := r.observe(x); verr != nil {
			return verr
		}
		v.record, v.rep.SealRecordChecked = nil, true
	}
	if x.Step == StepSealed {
		var d sealDetail
		want := cmp.Or(v.signer, v.one) // one signer for every seal and checkpoint
		if err := jsonv2.Unmarshal(x.Detail, &d); err != nil {
			return &VerifyError{Seq: e, Kind: KindSeal, Detail: "unreadable seal: " + err.Error()}
		}
		if bad, other := d.check(x, want); bad != "" {
			return d.sealError(x, want, bad, other)
		}
		v.rep.Seals++
		v.rep.LastSeal = *d.seal(x)
		v.one = cmp.Or(v.one, d.Signer)
		v.rep.Unsealed = -1 // the seal itself is signed
	}
	if x.Step == StepPruned {
		v.prunedSeq, v.pruned, v.prunedBad = e, nil, ""
		var d prunedDetail
		if err := jsonv2.Unmarshal(x.Detail, &d); err != nil {
			v.prunedBad = err.Error()
		} else {
			want := cmp.Or(v.signer, v.one)
			if bad, other := d.checkSignature(want); bad != "" {
				if v.signer == "" {
					bad += " (the signer of the log's seals and checkpoints before it)"
				}
				ve := &VerifyError{Seq: e, Kind: KindCheckpoint, Detail: bad}
				if other {
					ve.Signer, ve.Want = d.Signer, want
				}
				return ve
			}
			v.pruned = &d
			v.rep.CheckpointSigner = d.Signer
			v.one = cmp.Or(v.one, d.Signer)
		}
	}
	if v.rep.Entries == 0 {
		v.rep.First = e
	}
	v.rep.Entries++
	v.rep.Unsealed++
	v.rep.Last = e
	v.next, v.prev = e+1, x.Hash
	return nil
}

// genuineAt reports whether x, given seq s, is genuine and follows the
// chain: x is the entry s, renumbered.
func (v *verifier) genuineAt(x Entry, s int64) bool {
	if v.prev != "" && x.Prev != v.prev {
		return false
	}
	y := x
	y.Seq = s
	return Hash(y) == x.Hash
}

// movedFrom looks for the seq, within reorderWindow of x's, at which x's
// fields give its hash.
func (v *verifier) movedFrom(x Entry) (int64, bool) {
	want, err := hex.DecodeString(x.Hash)
	if err != nil || len(want) != 32 {
		return 0, false
	}
	enc := appendEncoding(nil, x)
	tail := enc[len(enc)-8:]
	lo, hi := v.h.first, max(v.h.last, x.Seq)
	for d := int64(1); d <= reorderWindow; d++ {
		for _, s := range [2]int64{x.Seq - d, x.Seq + d} {
			if s < lo || s > hi {
				continue
			}
			binary.BigEndian.PutUint64(tail, uint64(s))
			if sum := sha256.Sum256(enc); bytes.Equal(sum[:], want) {
				return s, true
			}
		}
	}
	return 0, false
}

// finish checks the end of the walk against the head record and the
// anchors left.
func (v *verifier) finish() *VerifyError {
	if v.next-1 < v.h.last {
		return &VerifyError{Seq: v.next, Kind: KindTruncated, Detail: fmt.Sprintf("the head record says the chain ends at entry %d; it ends at %d", v.h.last, v.next-1)}
	}
	if v.prev != "" && v.prev != v.h.lastHash {
		return &VerifyError{Seq: v.h.last, Kind: KindHead, Detail: fmt.Sprintf("the head record gives hash %s for the last entry, the chain %s", v.h.lastHash, v.prev)}
	}
	if v.h.first > 1 && !v.partial {
		switch {
		case v.prunedSeq == 0:
			return &VerifyError{Seq: v.h.first, Kind: KindHead, Detail: fmt.Sprintf("the chain starts at entry %d but no pruning record says so", v.h.first)}
		case v.pruned == nil:
			return &VerifyError{Seq: v.prunedSeq, Kind: KindHead, Detail: "unreadable pruning record: " + v.prunedBad}
		case v.pruned.FirstSeq != v.h.first || v.pruned.FirstPrev != v.h.firstPrev:
			return &VerifyError{Seq: v.h.first, Kind: KindHead, Detail: fmt.Sprintf("the chain starts at entry %d after %s; the last pruning record (entry %d) says %d after %s",
				v.h.first, v.h.firstPrev, v.prunedSeq, v.pruned.FirstSeq, v.pruned.FirstPrev)}
		case v.pruned.Signer == "" && v.one != "":
			// Unsigned, and seals after it signed: the key that sealed
			// the log signs its checkpoints too.
			return &VerifyError{Seq: v.prunedSeq, Kind: KindCheckpoint, Detail: "the checkpoint is not signed; the log's seals are signed by " + v.one}
		}
	}
	if a := v.startAnchor; a != nil { // a partial export without entries
		v.startAnchor = nil
		if err := v.checkAnchor(*a, v.h.lastHash); err != nil {
			return err
		}
	}
	if r := v.record; r != nil && r.Seq > v.h.last {
		return r.mismatch("the chain ends at entry %d: it was cut, or rewritten after the seal before", v.h.last)
	}
	if len(v.anchors) > 0 {
		a := v.anchors[len(v.anchors)-1]
		return &VerifyError{Seq: v.h.last + 1, Kind: KindTruncated, Detail: fmt.Sprintf("an anchor records entry %d; the chain ends at %d", a.Seq, v.h.last)}
	}
	return nil
}

func (v *verifier) report() Report { return v.rep }

// expectRecord makes the walk check the seal r names (nil: none), unless
// it lies before the walk's start.
func (v *verifier) expectRecord(r *SealRecord) {
	if r != nil {
		v.rep.SealRecord = *r
	}
	if r != nil && r.Seq >= v.next {
		v.record = r
	}
}

// mismatch is the *VerifyError of a chain that does not hold the seal r
// names: why, after what r says.
func (r *SealRecord) mismatch(format string, args ...any) *VerifyError {
	return &VerifyError{Seq: r.Seq, Kind: KindRecord, Detail: fmt.Sprintf("the record of the last seal this node wrote (%s) names entry %d with hash %s; ", r.Path, r.Seq, r.Hash) + fmt.Sprintf(format, args...)}
}

// observe checks x, the entry at r.Seq (whose hash holds): it must be the
// seal r names.
func (r *SealRecord) observe(x Entry) *VerifyError {
	switch {
	case x.Hash != r.Hash:
		return r.mismatch("the chain has hash %s there: the chain was rewritten", x.Hash)
	case x.Step != StepSealed:
		return r.mismatch("the entry there is %q, not a seal", x.Step)
	}
	return nil
}

// Verify walks the whole log in seq order, in one snapshot and constant
// memory, and checks that:
//
//   - every entry's fields give its hash (else KindEdited, or
//     KindReordered when they give it at another seq);
//
//   - the seqs run without gaps from the start recorded in the head
//     (KindMissing) and every entry chains to the one before (KindUnlinked);
//
//   - nothing lies before that start or after the end the head records
//     (KindExtra), and the chain reaches that end with its hash
//     (KindTruncated, KindHead);
//
//   - a start after seq 1 is the one the last pruning record set (KindHead);
//
//   - the anchors given match (KindAnchor) and none lies beyond the end
//     (KindTruncated).
//
//   - every seal signs the entry before it as the chain gives it, by the
//     Log's Signer (KindSeal): a chain rewritten below a seal fails there.
//
// It returns what it verified and, at the first failure, a *VerifyError
// (errors.Is ErrTampered) naming the entry. Other errors are the
// database's.
func (l *Log) Verify(ctx context.Context, anchors ...Anchor) (Report, error) {
	return l.VerifyWith(ctx, VerifyOptions{Anchors: anchors})
}

// VerifyWithRecord is VerifyWith checking the chain against the node's
// record of its last seal in the file record too (o.SealRecord, read by
// ReadSealRecord): the check that `snapnode audit verify` and the
// console make, which alone catches a chain cut back to before the seal
// recorded, or rewritten after the seal before it, its later seals
// deleted. No file there checks no record (the Report's SealRecord has
// Seq 0 and Path record). A record that cannot be read (ErrSealRecord:
// out of reach, or not a record) is a *RecordError: the chain verified
// without it all the same, its Report returned (SealRecord with Seq 0 and
// Path record) and its error the RecordError's Chain, so that whether
// the chain holds is known.
func (l *Log) VerifyWithRecord(ctx context.Context, o VerifyOptions, record string) (Report, error) {
	r, err := ReadSealRecord(record)
	if errors.Is(err, fs.ErrNotExist) {
		r, err = SealRecord{Path: record}, nil
	}
	if err != nil {
		o.SealRecord = nil
		rep, verr := l.VerifyWith(ctx, o)
		rep.SealRecord = SealRecord{Path: record}
		return rep, &RecordError{Record: err, Chain: verr}
	}
	if r.Seq > 0 {
		o.SealRecord = &r
	}
	rep, err := l.VerifyWith(ctx, o)
	rep.SealRecord = r
	return rep, err
}

// VerifyWith is Verify with o's anchors, and o's Signer, when set, as the
// signer of every seal and checkpoint instead of the Log's, and o's
// SealRecord checked.
func (l *Log) VerifyWith(ctx context.Context, o VerifyOptions) (Report, error) {
	if l.closed.Load() {
		return Report{}, ErrClosed
	}
	tx, err := l.readTx(ctx)
	if err != nil {
		return Report{}, fmt.Errorf("audit: verify: %w", err)
	}
	defer func() { _ = tx.Rollback() }()
	h, err := readHead(ctx, tx)
	var verr *VerifyError
	if errors.As(err, &verr) {
		return Report{}, verr
	}
	if err != nil {
		return Report{}, fmt.Errorf("audit: verify: %w", err)
	}
	v, verr := newVerifier(h, h.first, o.Anchors)
	if verr != nil {
		return Report{}, verr
	}
	v.signer = l.signer()
	if o.Signer != "" {
		v.signer = o.Signer
	}
	v.expectRecord(o.SealRecord)
	rows, err := tx.QueryContext(ctx, "SELECT "+entryColumns+" FROM audit_log ORDER BY seq")
	if err != nil {
		return v.report(), fmt.Errorf("audit: verify: %w", err)
	}
	defer rows.Close()
	for verr == nil && rows.Next() {
		x, err := scanEntry(rows)
		if err != nil {
			verr = &VerifyError{Seq: v.next, Kind: KindEdited, Detail: fmt.Sprintf("unreadable row after entry %d: %v", v.next-1, err)}
			break
		}
		verr = v.observe(x)
	}
	if verr == nil {
		if err := rows.Err(); err != nil {
			return v.report(), fmt.Errorf("audit: verify: %w", err)
		}
		verr = v.finish()
	}
	if verr != nil {
		return v.report(), verr
	}
	return v.report(), nil
}
