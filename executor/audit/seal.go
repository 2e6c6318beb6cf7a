package audit

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/internal/periodic"
)

// ErrNoSigner: the log has no Options.Signer, and cannot seal.
var ErrNoSigner = errors.New("audit: no signer: the log cannot seal")

// Seal is a seal of the chain: a StepSealed entry, at Seq, whose Detail
// holds the head it seals (the entry just before it), signed with the
// node's key together with the seal's time. Verify checks every seal
// against the chain, so that a chain rewritten below a seal fails there
// unless its rewriter has the key.
type Seal struct {
	// Seq is the seal entry's seq; Head is the entry it seals (Seq-1 and
	// its hash).
	Seq  int64
	Head Anchor
	// Time is the seal entry's time, which the signature covers.
	Time time.Time
	// Signer is the address whose key signed it.
	Signer string
}

// sealDomain starts the signed encoding of a seal.
const sealDomain = "snapnode-audit-seal-v1"

// SealDigest returns what a seal's signature signs: the SHA-256 of
//
//	str("snapnode-audit-seal-v1") str(signer) i64(seq) str(hash)
//	i64(time as microseconds since 1970-01-01T00:00:00Z)
//
// in the encoding of Hash: the entry sealed (the one before the seal),
// its hash, when, and who signs.
func SealDigest(signer string, seq int64, hash string, t time.Time) [32]byte {
	b := appendStr(nil, sealDomain)
	b = appendStr(b, signer)
	b = binary.BigEndian.AppendUint64(b, uint64(seq))
	b = appendStr(b, hash)
	b = binary.BigEndian.AppendUint64(b, uint64(t.UnixMicro()))
	return sha256.Sum256(b)
}

// sealDetail is the Detail of a StepSealed entry.
type sealDetail struct {
	Seq    int64  `json:"seq"`
	Hash   string `json:"hash"`
	Signer string `json:"signer"`
	Sig    string `json:"sig"`
}

// check reports why the seal x (whose detail is d) does not hold, "" when
// it does: it must seal the entry just before it, as the chain gives it,
// and be signed by want (any signer when want is ""). The signature is
// checked before its signer: other is true for a seal its signer did
// sign, by another key than want.
func (d *sealDetail) check(x Entry, want string) (why string, other bool) {
	switch {
	case d.Seq != x.Seq-1 || d.Hash != x.Prev:
		return fmt.Sprintf("the seal signs entry %d with hash %s; the chain has entry %d with hash %s: the chain was rewritten", d.Seq, d.Hash, x.Seq-1, x.Prev), false
	case d.Signer == "" || d.Sig == "":
		return "the seal is not signed", false
	}
	return signatureProblem("the seal", d.Signer, d.Sig, SealDigest(d.Signer, d.Seq, d.Hash, x.Time), want)
}

// seal is the seal x (whose detail is d) as it reads.
func (d *sealDetail) seal(x Entry) *Seal {
	return &Seal{Seq: x.Seq, Head: Anchor{d.Seq, d.Hash}, Time: x.Time, Signer: d.Signer}
}

// sealError is the *VerifyError of the seal x (whose detail is d) that
// does not hold, want being the signer expected (see check): KindSeal,
// ErrOtherKey too when other.
func (d *sealDetail) sealError(x Entry, want, why string, other bool) *VerifyError {
	ve := &VerifyError{Seq: x.Seq, Kind: KindSeal, Detail: why, Seal: d.seal(x)}
	if other {
		ve.Signer, ve.Want = d.Signer, want
	}
	return ve
}

// lastSealQuery finds the newest seal at or after a seq (the partial
// index audit_log_sealed).
const lastSealQuery = "SELECT seq FROM audit_log WHERE step = 'sealed' AND seq >= ? ORDER BY seq DESC LIMIT 1"

// Seal appends a seal of the head: a StepSealed entry, actor "host",
// whose Detail ({"seq":…,"hash":"…","signer":"bc1p…","sig":"…"}) names
// the entry before it and carries the BIP-340 signature by
// Options.Signer of SealDigest (that entry, its hash, the seal's time).
// It returns the seal, or a zero Seal when there is nothing to seal: an
// empty log, or a head that is already a seal. Without a Signer it fails
// with ErrNoSigner.
//
// Seal vouches only for a chain that holds: it first verifies the entries
// from the last seal on (that seal's signature included) and, when this
// Log wrote a seal before, that it is still there, that the last entry
// this Log committed (see Committed) is still there with its hash (a
// head moved back, the entries after the last seal cut: KindTruncated;
// rewritten: KindAnchor), and that the chain holds the seal
// Options.SealRecord records (see CheckSealRecord); else
// it seals nothing and returns the *VerifyError. With a SealRecord, the
// seal written is recorded there; a record that cannot be written is an
// error (ErrSealRecord) returned with the Seal. The entries since the last seal are read
// outside the write transaction, so that appends wait only for those
// appended meanwhile.
func (l *Log) Seal(ctx context.Context) (Seal, error) {
	if l.closed.Load() {
		return Seal{}, ErrClosed
	}
	if l.opts.Signer == nil {
		return Seal{}, ErrNoSigner
	}
	rec, err := l.loadSealRecord()
	if err != nil {
		return Seal{}, fmt.Errorf("audit: seal: %w", err)
	}
	verified, err := l.verifySinceSeal(ctx)
	if err != nil {
		return Seal{}, fmt.Errorf("audit: seal: %w", err)
	}
	var (
		s   Seal
		own Anchor
	)
	err = l.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		s, own = Seal{}, Anchor{}
		h, err := l.readHeadForUpdate(ctx, tx)
		if err != nil {
			return err
		}
		// Before anything else: a head that went back is no reason to
		// seal nothing, as a head already sealed would be.
		if err := l.checkOwnSeal(ctx, tx, h); err != nil {
			return err
		}
		if err := l.checkOwnHead(ctx, tx, h); err != nil {
			return err
		}
		if h.last < h.first {
			return nil // empty
		}
		var step string
		if err := tx.QueryRowContext(ctx, l.d.Rebind("SELECT step FROM audit_log WHERE seq = ?"), h.last).Scan(&step); err != nil {
			if errors.Is(err, sql.ErrNoRows) {
				return &VerifyError{Seq: h.last, Kind: KindTruncated, Detail: "the head record's last entry is missing"}
			}
			return fmt.Errorf("read the head entry: %w", err)
		}
		if Step(step) == StepSealed {
			return nil // the head did not move
		}
		if err := l.checkSealRecord(ctx, tx, h, rec); err != nil {
			return err
		}
		if err := l.verifyAfter(ctx, tx, h, verified); err != nil {
			return err
		}
		now := time.UnixMicro(l.opts.Now().UnixMicro()).UTC()
		d := sealDetail{Seq: h.last, Hash: h.lastHash, Signer: l.opts.Signer.Address()}
		sig, err := l.opts.Signer.Sign(SealDigest(d.Signer, d.Seq, d.Hash, now))
		if err != nil {
			return fmt.Errorf("sign: %w", err)
		}
		d.Sig = hex.EncodeToString(sig[:])
		detail, err := jsonv2.Marshal(d)
		if err != nil {
			return err
		}
		out, err := l.appendTxAt(ctx, tx, &h, []Entry{{Actor: "host", Step: StepSealed, Decision: "seal", Detail: detail}}, now)
		if err != nil {
			return err
		}
		s = Seal{Seq: out[0].Seq, Head: Anchor{d.Seq, d.Hash}, Time: now, Signer: d.Signer}
		own = Anchor{out[0].Seq, out[0].Hash}
		return nil
	})
	if err != nil {
		return Seal{}, fmt.Errorf("audit: seal: %w", err)
	}
	if s.Seq > 0 {
		// What a later Seal must find.
		l.sealMu.Lock()
		l.ownSeal = own
		if own.Seq > l.ownHead.Seq {
			l.ownHead = own
		}
		l.sinceSeal = 0
		l.sealMu.Unlock()
		if p := l.opts.SealRecord; p != "" {
			if err := WriteSealRecord(p, SealRecord{Seq: own.Seq, Hash: own.Hash, Time: s.Time}); err != nil {
				return s, fmt.Errorf("audit: seal: entry %d written, its record not: %w", s.Seq, err)
			}
		}
	}
	return s, nil
}

// verifySinceSeal verifies, in one read snapshot, the chain from its last
// seal (the whole retained chain when it has none) to its head, and
// returns the head verified.
func (l *Log) verifySinceSeal(ctx context.Context) (Anchor, error) {
	tx, err := l.readTx(ctx)
	if err != nil {
		return Anchor{}, err
	}
	defer func() { _ = tx.Rollback() }()
	h, err := readHead(ctx, tx)
	if err != nil {
		return Anchor{}, err
	}
	from := h.first
	var s int64
	switch err := tx.QueryRowContext(ctx, l.d.Rebind(lastSealQuery), h.first).Scan(&s); {
	case err == nil:
		from = s
	case !errors.Is(err, sql.ErrNoRows):
		return Anchor{}, fmt.Errorf("find the last seal: %w", err)
	}
	if err := l.walk(ctx, tx, h, from, nil); err != nil {
		return Anchor{}, err
	}
	return Anchor{h.last, h.lastHash}, nil
}

// verifyAfter verifies, in the write transaction, the entries appended
// after the head verified before it (a): the first must chain to a.
func (l *Log) verifyAfter(ctx context.Context, tx *sql.Tx, h head, a Anchor) error {
	return l.walk(ctx, tx, h, a.Seq+1, []Anchor{a})
}

// walk verifies the entries from seq from to h's end (from after h.first:
// the first taken as given, or as an anchor just before it says) with
// the log's signer.
func (l *Log) walk(ctx context.Context, tx *sql.Tx, h head, from int64, anchors []Anchor) error {
	v, verr := newVerifier(h, from, anchors)
	if verr != nil {
		return verr
	}
	v.signer = l.signer()
	rows, err := tx.QueryContext(ctx, l.d.Rebind("SELECT "+entryColumns+" FROM audit_log WHERE seq >= ? ORDER BY seq"), v.next)
	if err != nil {
		return fmt.Errorf("read the entries: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		x, err := scanEntry(rows)
		if err != nil {
			return &VerifyError{Seq: v.next, Kind: KindEdited, Detail: fmt.Sprintf("unreadable row after entry %d: %v", v.next-1, err)}
		}
		if verr := v.observe(x); verr != nil {
			return verr
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("read the entries: %w", err)
	}
	if verr := v.finish(); verr != nil {
		return verr
	}
	return nil
}

// checkOwnSeal: the last seal this Log wrote, unless pruned since, is
// still in the chain as it wrote it. Seals removed with the chain after
// them rewritten leave a chain that verifies; the Log that wrote them
// does not seal it.
func (l *Log) checkOwnSeal(ctx context.Context, tx *sql.Tx, h head) error {
	own, ok := l.ownAnchor(&l.ownSeal, h)
	if !ok {
		return nil
	}
	var hash string
	err := tx.QueryRowContext(ctx, l.d.Rebind("SELECT hash FROM audit_log WHERE seq = ?"), own.Seq).Scan(&hash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return &VerifyError{Seq: own.Seq, Kind: KindSeal, Detail: "the seal this node wrote here is gone: the chain after the seal before it was cut or rewritten"}
	case err != nil:
		return fmt.Errorf("read the last seal written: %w", err)
	case hash != own.Hash:
		return &VerifyError{Seq: own.Seq, Kind: KindSeal, Detail: fmt.Sprintf("the seal this node wrote here had hash %s; the entry has %s", own.Hash, hash)}
	}
	return nil
}

// checkOwnHead: the last entry this Log committed (see Committed), unless
// pruned since, is still in the chain as it wrote it. The entries after
// the last seal cut with the head record moved back, or rewritten with
// every hash after them, leave a chain that verifies; the Log that wrote
// them does not seal or prune it. What it knows goes with it: a Log
// opened afterwards (the node restarted) knows only the record of the
// last seal (Options.SealRecord).
func (l *Log) checkOwnHead(ctx context.Context, tx *sql.Tx, h head) error {
	own, ok := l.ownAnchor(&l.ownHead, h)
	if !ok {
		return nil
	}
	wrote := fmt.Sprintf("this node appended entry %d (hash %s) since it started", own.Seq, own.Hash)
	if h.last < own.Seq {
		return &VerifyError{Seq: h.last + 1, Kind: KindTruncated, Detail: fmt.Sprintf("%s; the chain ends at entry %d: the entries after it were deleted, the head record moved back", wrote, h.last)}
	}
	x, missing, problem, err := l.entryAt(ctx, tx, own.Seq)
	switch {
	case err != nil:
		return fmt.Errorf("read the last entry written: %w", err)
	case missing:
		return &VerifyError{Seq: own.Seq, Kind: KindMissing, Detail: wrote + "; the chain has no entry there"}
	case problem != "":
		return &VerifyError{Seq: own.Seq, Kind: KindEdited, Detail: wrote + "; the entry " + problem}
	case x.Hash != own.Hash:
		return &VerifyError{Seq: own.Seq, Kind: KindAnchor, Detail: fmt.Sprintf("%s; the chain has hash %s there: it was rewritten", wrote, x.Hash)}
	}
	return nil
}

// ownAnchor reads *a, l.ownSeal or l.ownHead, under l.sealMu, and
// reports whether there is one to check in the chain of h: this Log
// wrote one, and it was not pruned since.
func (l *Log) ownAnchor(a *Anchor, h head) (Anchor, bool) {
	l.sealMu.Lock()
	own := *a
	l.sealMu.Unlock()
	return own, own.Seq != 0 && own.Seq >= h.first
}

// RunSealer seals the head (Seal) at every tick until ctx is done, and
// returns ctx's error; report, if not nil, is told of each round. The
// caller owns ticks, as RunPruner's. With Options.SealEvery, it seals
// too as soon as that many entries were committed since the last seal.
// Each seal is given up after bound (see periodic.Pass): the next tick,
// or the next SealEvery entries, try again.
func (l *Log) RunSealer(ctx context.Context, ticks <-chan time.Time, bound time.Duration, report func(Seal, error)) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticks:
		case <-l.due:
			// Asked again only after as many more: a seal refused (the
			// chain does not hold) is not tried at every append.
			l.sealMu.Lock()
			l.sinceSeal = 0
			l.sealMu.Unlock()
		}
		s, err := periodic.Pass(ctx, "audit seal", bound, l.Seal)
		if report != nil && ctx.Err() == nil {
			report(s, err)
		}
	}
}

// SealStatus is what a verification says of the seals, the summary that
// `snapnode audit verify` prints and the console shows (SealStatusOf).
type SealStatus struct {
	// Seals counts the seals verified.
	Seals int
	// Last is the newest seal the verification reached: the last that
	// verified (Valid), or the one it failed at (Problem says why); zero
	// when it reached none.
	Last    Seal
	Valid   bool
	Problem string
	// OtherKey: Last's signature holds, but by another key than Want,
	// the one expected (ErrOtherKey).
	OtherKey bool
	Want     string
	// Unsealed counts the entries after Last (every entry when there is
	// no seal) up to the head: no signature vouches for them, and they
	// can be cut or rewritten unseen.
	Unsealed int64
	// Stopped: the verification failed before the head, so that seals
	// after Last, if any, went unseen.
	Stopped bool
}

// SealStatusOf summarises the seals of a verification, from the Report
// and error Log.VerifyWith, Log.VerifyWithRecord or VerifyJSONLWith
// returned (a record that could not be read, a *RecordError, is no fault
// of the chain's: its Chain is the verification's error).
func SealStatusOf(rep Report, err error) SealStatus {
	err = withoutRecord(err)
	st := SealStatus{Seals: rep.Seals, Last: rep.LastSeal, Valid: rep.Seals > 0, Unsealed: rep.Unsealed}
	if err == nil {
		return st
	}
	st.Stopped = true
	var ve *VerifyError
	if errors.As(err, &ve) && ve.Kind == KindSeal && ve.Seal != nil {
		st.Last, st.Valid, st.Problem = *ve.Seal, false, ve.Detail
		st.OtherKey, st.Want = errors.Is(err, ErrOtherKey), ve.Want
	}
	// The entries after the seal up to the head, as the head record says:
	// the walk did not reach them all.
	after := rep.Checkpoint.Seq
	if st.Last.Seq > 0 {
		after = st.Last.Seq
	}
	st.Unsealed = max(rep.Head.Seq-after, 0)
	return st
}
