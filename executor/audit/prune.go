package audit

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/internal/periodic"
	"github.com/snapnode/snapnode/internal/sqldb"
)

// Prune drops the entries Options.Retain and Options.MaxEntries no longer
// keep, oldest first, and returns how many it dropped. With a Signer it
// drops only entries a seal covers (see Seal), and Retain counts from the
// time of that seal, which the key signed, not from the entries' own:
// entries after the last seal are kept whatever their age, and a chain
// rewritten with its entries backdated is kept as long as the retention
// from the seal over it (today's, if the node sealed it). With KeepOpen,
// Retain stops before the first entry of an action still open. It only ever cuts
// a prefix of the chain: an old entry that follows a newer one (a clock
// set back) stays until those before it go, and so does a seal dated
// past the retention that follows one within it. Each transaction (at most
// 10,000 entries) then
//
//   - verifies the entries it drops, and that the first kept one chains to
//     the last dropped (with a Signer, the entries up to the seal that
//     covers them, and that seal), and refuses (a *VerifyError) if they
//     fail: pruning never erases the evidence of tampering;
//   - moves the start of the chain in the head record to the first entry
//     kept and the hash it chains to (the checkpoint);
//   - appends a StepPruned entry, actor "host", whose Detail records that
//     checkpoint ({"first_seq":…,"first_prev":"…","removed":…}) and, with
//     Options.Signer, its signature ("signer":"bc1p…","sig":"…", see
//     CheckpointDigest).
//
// Verify checks the retained chain from the checkpoint and that the last
// pruning record names it, so a start moved by hand shows; with a Signer,
// every pruning record must carry its valid signature, so a checkpoint
// rewritten without the node's key shows too (KindCheckpoint). With
// neither Retain nor MaxEntries set Prune does nothing.
func (l *Log) Prune(ctx context.Context) (int64, error) {
	if l.closed.Load() {
		return 0, ErrClosed
	}
	if l.opts.Retain <= 0 && l.opts.MaxEntries <= 0 {
		return 0, nil
	}
	rec, err := l.loadSealRecord()
	if err != nil {
		return 0, fmt.Errorf("audit: prune: %w", err)
	}
	var total int64
	for {
		n, more, err := l.pruneOnce(ctx, rec)
		total += n
		if err != nil {
			return total, fmt.Errorf("audit: prune: %w", err)
		}
		if !more {
			return total, nil
		}
	}
}

// pruneOnce drops at most l.pruneChunk entries in one transaction; more
// says whether others are due.
func (l *Log) pruneOnce(ctx context.Context, sealRec SealRecord) (removed int64, more bool, err error) {
	var rec []Entry // the pruning record written
	err = l.db.Write(ctx, func(ctx context.Context, tx *sql.Tx) error {
		removed, more, rec = 0, false, nil
		h, err := l.readHeadForUpdate(ctx, tx)
		if err != nil {
			return err
		}
		if err := l.checkSealRecord(ctx, tx, h, sealRec); err != nil {
			return err
		}
		now := l.opts.Now()
		cut := h.first - 1 // the last seq to drop
		bound := cut       // the last seq MaxEntries drops
		if m := l.opts.MaxEntries; m > 0 && h.last-(h.first-1) > m {
			// Over the limit: keep m-1, and the pruning record makes m.
			bound = h.last - (m - 1)
			cut = bound
		}
		sealed := l.opts.Signer != nil
		if l.opts.Retain > 0 && sealed {
			// By the time of the seals, which the key signed; the
			// entries' own could be anyone's. Not past a seal still
			// within the retention: a later one dated further back (the
			// clock moved back) does not make the entries before it old.
			old := now.Add(-l.opts.Retain).UnixMicro()
			young, err := l.sealAt(ctx, tx, "seq >= ? AND ts >= ?", "", h.first, old)
			if err != nil {
				return err
			}
			if young == 0 {
				young = h.last + 1
			}
			s, err := l.sealAt(ctx, tx, "seq >= ? AND seq < ? AND ts < ?", "DESC", h.first, young, old)
			if err != nil {
				return err
			}
			if s > 0 {
				cut = max(cut, s-1)
			}
		} else if l.opts.Retain > 0 {
			var keep int64
			err := tx.QueryRowContext(ctx, l.d.Rebind("SELECT seq FROM audit_log WHERE seq >= ? AND ts >= ? ORDER BY seq LIMIT 1"),
				h.first, now.Add(-l.opts.Retain).UnixMicro()).Scan(&keep)
			switch {
			case errors.Is(err, sql.ErrNoRows):
				cut = h.last
			case err != nil:
				return fmt.Errorf("find the oldest entry to keep: %w", err)
			default:
				cut = max(cut, keep-1)
			}
		}
		cut = min(cut, h.last)
		if sealed && cut > h.first-1 {
			// Only what a seal covers: up to the entry before the last
			// seal at or before cut+1.
			s, err := l.sealAt(ctx, tx, "seq >= ? AND seq <= ?", "DESC", h.first, cut+1)
			if err != nil {
				return err
			}
			cut = max(s-1, h.first-1)
		}
		if cut > h.first-1+l.pruneChunk {
			cut, more = h.first-1+l.pruneChunk, true
		}
		if open := l.open.Load(); open != nil && cut > h.first-1 && cut > bound {
			// Not past the first entry of an action still open, unless
			// MaxEntries must.
			s, err := (*open)(ctx, tx, h.first, cut)
			if err != nil {
				return fmt.Errorf("find the actions still open: %w", err)
			}
			if s > 0 && s-1 < cut {
				cut, more = max(s-1, min(bound, cut)), more && bound > s-1
			}
		}
		if cut <= h.first-1 {
			return nil
		}
		end := min(cut+1, h.last)
		if sealed {
			// Verified up to the seal that covers the cut, which must hold.
			if end, err = l.sealAt(ctx, tx, "seq > ?", "", cut); err != nil {
				return err
			}
		}
		cutHash, err := l.checkDropped(ctx, tx, h, cut, end)
		if err != nil {
			return err
		}
		if err := l.checkOwnHead(ctx, tx, h); err != nil {
			return err
		}
		if removed, err = sqldb.Affected(tx.ExecContext(ctx, l.d.Rebind("DELETE FROM audit_log WHERE seq <= ?"), cut)); err != nil {
			return fmt.Errorf("delete: %w", err)
		}
		if _, err := tx.ExecContext(ctx, l.d.Rebind("UPDATE audit_head SET first_seq = ?, first_prev = ? WHERE id = 1"), cut+1, cutHash); err != nil {
			return fmt.Errorf("move the checkpoint: %w", err)
		}
		d := prunedDetail{FirstSeq: cut + 1, FirstPrev: cutHash, Removed: removed}
		if l.opts.Signer != nil {
			if err := d.sign(l.opts.Signer); err != nil {
				return err
			}
		}
		detail, err := jsonv2.Marshal(d)
		if err != nil {
			return err
		}
		h.first, h.firstPrev = cut+1, cutHash
		rec, err = l.appendTx(ctx, tx, &h, []Entry{{
			Actor: "host", Step: StepPruned, Decision: "retain", Reason: l.retention(), Detail: detail,
		}})
		return err
	})
	if err != nil {
		return 0, false, err
	}
	l.Committed(rec)
	return removed, more, nil
}

// checkDropped verifies the entries h.first…cut about to be dropped, and
// those after up to end (the link of the first kept one to the last of
// them, and the seal that covers them); it returns the hash of entry cut.
func (l *Log) checkDropped(ctx context.Context, tx *sql.Tx, h head, cut, end int64) (string, error) {
	v, verr := newVerifier(head{first: h.first, firstPrev: h.firstPrev, last: h.last, lastHash: h.lastHash}, h.first, nil)
	if verr != nil {
		return "", verr
	}
	v.signer = l.signer()
	rows, err := tx.QueryContext(ctx, l.d.Rebind("SELECT "+entryColumns+" FROM audit_log WHERE seq <= ? ORDER BY seq"), end)
	if err != nil {
		return "", fmt.Errorf("read the entries to drop: %w", err)
	}
	defer rows.Close()
	var cutHash string
	for rows.Next() {
		x, err := scanEntry(rows)
		if err != nil {
			return "", &VerifyError{Seq: v.next, Kind: KindEdited, Detail: fmt.Sprintf("unreadable row after entry %d: %v", v.next-1, err)}
		}
		if verr := v.observe(x); verr != nil {
			return "", verr
		}
		if x.Seq == cut {
			cutHash = x.Hash
		}
	}
	if err := rows.Err(); err != nil {
		return "", fmt.Errorf("read the entries to drop: %w", err)
	}
	if v.next <= end {
		return "", &VerifyError{Seq: v.next, Kind: KindMissing, Detail: fmt.Sprintf("the chain ends at entry %d, before the head record's end %d", v.next-1, h.last)}
	}
	return cutHash, nil
}

// sealAt returns the seq of the first seal (order "", or the last:
// "DESC") that where selects, 0 when there is none.
func (l *Log) sealAt(ctx context.Context, tx *sql.Tx, where, order string, args ...any) (int64, error) {
	var s int64
	err := tx.QueryRowContext(ctx, l.d.Rebind("SELECT seq FROM audit_log WHERE step = 'sealed' AND "+where+" ORDER BY seq "+order+" LIMIT 1"), args...).Scan(&s)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("find a seal: %w", err)
	}
	return s, nil
}

// retention describes the options, for the pruning record's Reason.
func (l *Log) retention() string {
	switch o := l.opts; {
	case o.Retain > 0 && o.MaxEntries > 0:
		return fmt.Sprintf("retain %v, at most %d entries", o.Retain, o.MaxEntries)
	case o.Retain > 0:
		return fmt.Sprintf("retain %v", o.Retain)
	default:
		return fmt.Sprintf("at most %d entries", o.MaxEntries)
	}
}

// RunPruner prunes at every tick until ctx is done, and returns ctx's
// error. The caller owns ticks: a time.Ticker's C in production (stopped
// once RunPruner returns), a channel of its own in tests, which then move
// the log's clock (Options.Now) and tick. A failed prune is retried at the
// next tick; report, if not nil, is told of each round, after it.
//
// Each prune is given up after bound (see periodic.Pass).
func (l *Log) RunPruner(ctx context.Context, ticks <-chan time.Time, bound time.Duration, report func(removed int64, err error)) error {
	return periodic.Run(ctx, "audit prune", ticks, bound, func(ctx context.Context, _ time.Time) (int64, error) { return l.Prune(ctx) }, report)
}
