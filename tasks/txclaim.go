package tasks

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/snapnode/snapnode/snap"
)

// TxClaimer is implemented by stores that write a request's pending
// replay record (a snap.ReplayClaim) inside a transaction of another
// component on the same database (the executor's commit of an
// operator's decision), with the statement the store's own claims use.
// ClaimTx reports whether it wrote the record, or the record that
// stopped it; it neither marks nor settles c.
type TxClaimer interface {
	ClaimTx(ctx context.Context, tx *sql.Tx, c *snap.ReplayClaim) (prior snap.ReplayRecord, fresh bool, err error)
}

// TxClaim writes the replay record a request left to its handler (a
// pending snap.ReplayClaim) in the commit of the request's first effect
// when that commit is another component's: an operator's decision writes
// it in the executor's commit of the decision, so that a decision whose
// commit fails (the database busy, a connection lost: 5001) leaves the
// request's id unspent and the retry of the same message is carried out,
// and one that commits spends it. Make one per request (Service.TxClaim),
// call Ready before the work, In inside its commit, and Done with the
// work's error.
type TxClaim struct {
	c     *snap.ReplayClaim
	cl    TxClaimer // nil: the store writes no record in another's commit
	wrote bool      // In wrote the record in a commit not known to have failed
	taken *snap.ReplayRecord
}

// own reports whether prior, the record that stopped a claim, is the
// one c's own earlier commit wrote: its fingerprint, its delivery and
// its first sight, which the store keeps to the microsecond.
func own(c *snap.ReplayClaim, prior snap.ReplayRecord) bool {
	return prior.Fingerprint == c.Record.Fingerprint && prior.Via == c.Record.Via &&
		prior.FirstSeen.UnixMicro() == c.Record.FirstSeen.UnixMicro()
}

// TxClaim returns the claim of c on the Service's store, nil when c is
// nil or settled already (whose methods do nothing).
func (s *Service) TxClaim(c *snap.ReplayClaim) *TxClaim {
	cl, _ := s.store.(TxClaimer)
	return NewTxClaim(c, cl)
}

// NewTxClaim returns the claim of c written by cl (nil: a store that
// writes no record in a transaction, which Ready writes before the
// work), nil when c is nil or settled already. A store writing a claim
// in its own transaction uses it too, with the statement of its
// choosing.
func NewTxClaim(c *snap.ReplayClaim, cl TxClaimer) *TxClaim {
	if !c.Pending() {
		return nil
	}
	return &TxClaim{c: c, cl: cl}
}

// Pending reports whether the claim's record has been neither written
// nor found taken yet.
func (tc *TxClaim) Pending() bool { return tc != nil && tc.c.Pending() }

// Ready writes the record now, before the work, when the store cannot
// write it in the work's commit (it is no TxClaimer), and returns
// Remember's error: an error wrapping snap.ErrClaimTaken for a duplicate,
// when the work must not run.
func (tc *TxClaim) Ready(ctx context.Context) error {
	if tc == nil || tc.cl != nil {
		return nil
	}
	return tc.c.Remember(ctx)
}

// In writes the record in tx, the commit of the work's first effect. The
// work may call it again in a later commit (the executor runs an
// approval's first statement in each attempt's first commit, and again
// in the commit of a refusal after the commit that carried it rolled
// back): In then writes the record if that earlier commit did not keep
// it, and finds it there, written by this claim, if it did. A record
// held by an earlier message fails tx with an error wrapping
// snap.ErrClaimTaken, and the work must do nothing.
func (tc *TxClaim) In(ctx context.Context, tx *sql.Tx) error {
	if tc == nil || tc.cl == nil {
		return nil
	}
	if tc.taken != nil {
		return fmt.Errorf("tasks: replay claim %s: %w", tc.c.ID, snap.ErrClaimTaken)
	}
	if !tc.c.Pending() {
		return nil
	}
	// A commit whose result is lost may have written the record: the
	// server then knows it for this request's own.
	tc.c.Writing()
	prior, fresh, err := tc.cl.ClaimTx(ctx, tx, tc.c)
	if err != nil {
		return fmt.Errorf("tasks: replay claim: %w", err)
	}
	if !fresh && !(tc.wrote && own(tc.c, prior)) {
		tc.taken = &prior
		return fmt.Errorf("tasks: replay claim %s: %w", tc.c.ID, snap.ErrClaimTaken)
	}
	tc.wrote = true
	return nil
}

// Kept settles the claim as the request's own when the commit that
// carried In's record stood but the work failed later (an approval whose
// first commit recorded the decision): the id is spent, and the request
// is answered for what its work did, not told to retry the same message,
// which would be refused as a duplicate. Call it before Done.
func (tc *TxClaim) Kept() {
	if tc == nil || !tc.wrote || tc.taken != nil {
		return
	}
	tc.c.Claimed(snap.ReplayRecord{}, true)
}

// Done settles the claim once the work returned err: found taken by In,
// as a duplicate (its error, wrapping snap.ErrClaimTaken, replaces err);
// written by a work that succeeded, as the request's own. A work that
// failed leaves the claim pending for the server (snap.Server), which
// looks the record up after a failure the requester is told to retry
// (none there: the id stays unspent) and writes it after a refusal.
func (tc *TxClaim) Done(err error) error {
	switch {
	case tc == nil:
	case tc.taken != nil:
		return tc.c.Claimed(*tc.taken, false)
	case tc.wrote && err == nil:
		tc.c.Claimed(snap.ReplayRecord{}, true)
	}
	return err
}
