package snap

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// ErrClaimTaken reports that a request's replay record (its ReplayClaim)
// was not written because an earlier message with the same (from, id)
// holds it: the request is a duplicate, and whatever it asked for was not
// done. The Server answers it as a duplicate, as if validation had caught
// it.
var ErrClaimTaken = errors.New("snap: the request's replay record is held by an earlier message")

// ReplayClaim is the replay record of a verified request that the
// Validator has not written (see Config.ClaimMethods): the handler writes
// it in its first durable write, in the same transaction as that write's
// effect and only if the record is fresh (Claimed), or calls Remember
// before any effect. A Server remembers a claim its handler left
// pending once the handler returns, so a request refused without effect
// burns its id as a validated one does (save one that failed with 5001,
// 5002 or 5003, which SNAP tells the requester to retry: its id stays
// unspent, so that the retry is processed); when the claim turns out not to
// be fresh, the Server answers the request exactly as a duplicate caught
// by validation (2006, the kept result of a message/send, or silence for
// the same delivery), whatever the handler returned; save a request
// whose id its own record spent and that failed all the same — its
// write carrying the record failed without its outcome being known
// (Writing) and left the record there, or its handler failed after that
// write — which is answered with its kept result, or 2006 saying that
// the id is spent, never with an error telling it to retry.
//
// A ReplayClaim is used by the goroutine serving its request; its methods
// are safe for concurrent use all the same. The methods of a nil
// *ReplayClaim do nothing.
type ReplayClaim struct {
	// From and ID are the request's, Record the record to write.
	From, ID string
	Record   ReplayRecord

	v   *Validator // nil: a claim made outside a Validator (tests)
	m   *Message
	key uint64

	mu      sync.Mutex
	settled bool
	written bool  // the handler started a write carrying the record (Writing)
	own     bool  // settled by Remember on the record of this request's own write
	dup     error // the duplicate's answer when the record was taken
}

// Pending reports whether the claim's record has been neither written
// nor found taken yet.
func (c *ReplayClaim) Pending() bool {
	if c == nil {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.settled
}

// Remember writes the claim's record in the Validator's replay store if
// it is still pending, and returns nil when this request holds it: the
// handler may go on. A record held by an earlier message gives an error
// wrapping ErrClaimTaken, a failure of the store one that the Server
// answers as validation would (5003 for a full store, else 5001).
// After the claim was settled it only returns the outcome again.
func (c *ReplayClaim) Remember(ctx context.Context) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.settled {
		if c.v == nil || c.v.cfg.Replay == nil {
			return errors.New("snap: replay claim: no replay store")
		}
		prior, fresh, err := c.v.cfg.Replay.Remember(ctx, c.From, c.ID, c.Record)
		if err != nil {
			// Nothing was decided: a later Remember may try again.
			return c.v.storeError(err)
		}
		c.settle(prior, fresh)
		c.own = c.written && !fresh && prior.Fingerprint == c.Record.Fingerprint && prior.Via == c.Record.Via
	}
	return c.outcome()
}

// look settles a claim its handler left pending when it failed in a way
// the requester is told to retry (see Server.settleClaim): the record is
// looked up, not written, so that a request that had no effect leaves
// its id unspent and a retry of it is processed. It returns nil, the
// claim still pending, when no unexpired record holds (from, id): the
// handler's write carrying the record, if it made one, did not commit
// (one still in flight would meet a retry's at the record's key, and one
// of the two is a duplicate). A record found settles the claim as
// Remember does, as this request's own when it has its fingerprint and
// delivery and the handler was writing it (Writing). A store that fails
// gives its error, the claim still pending.
func (c *ReplayClaim) look(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.settled {
		if c.v == nil || c.v.cfg.Replay == nil {
			return errors.New("snap: replay claim: no replay store")
		}
		prior, ok, err := c.v.cfg.Replay.Lookup(ctx, c.From, c.ID, c.v.cfg.Now())
		if err != nil {
			return c.v.storeError(err)
		}
		if !ok {
			return nil
		}
		c.settle(prior, false)
		c.own = c.written && prior.Fingerprint == c.Record.Fingerprint && prior.Via == c.Record.Via
	}
	return c.outcome()
}

// Writing marks that the handler is starting a write that carries the
// claim's record with its effect. Should that write fail without its
// outcome being known (a connection lost after the commit), the Server's
// Remember may find the request's own record, with its fingerprint and
// delivery: the request is then answered with the result kept in that
// record, or 2006 saying that its id is spent, and not as a second
// delivery of the same event, which gets no answer.
func (c *ReplayClaim) Writing() {
	if c == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.written = true
}

// Claimed settles the claim after a write that wrote its record together
// with its effect: fresh when the record was written (and the effect
// made), else prior is the record that stopped it and nothing was made.
// It returns the outcome as Remember does. A claim settled already is
// left as it is.
func (c *ReplayClaim) Claimed(prior ReplayRecord, fresh bool) error {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.settled {
		c.settle(prior, fresh)
	}
	return c.outcome()
}

// settle records the outcome of writing the claim's record; c.mu is held.
func (c *ReplayClaim) settle(prior ReplayRecord, fresh bool) {
	c.settled = true
	if c.v == nil {
		if !fresh {
			c.dup = duplicateError(c.ID, prior.FirstSeen.Unix())
		}
		return
	}
	c.dup = c.v.remembered(c.m, c.key, c.Record, prior, fresh, c.v.cfg.Now())
}

// outcome is the error of a settled claim; c.mu is held.
func (c *ReplayClaim) outcome() error {
	if c.dup != nil {
		return fmt.Errorf("%w: %w", ErrClaimTaken, c.dup)
	}
	return nil
}

// duplicate returns the answer of a claim found taken, or nil.
func (c *ReplayClaim) duplicate() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.dup
}

// mine reports whether the claim's record holds its id for this
// request: written by it (Remember, Claimed fresh), or found written by
// its own write whose outcome the handler did not learn (see Writing).
func (c *ReplayClaim) mine() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.settled && (c.dup == nil || c.own)
}

// lost reports whether the claim was found taken by the record of its
// own write, whose outcome the handler did not learn (see Writing).
func (c *ReplayClaim) lost() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.own
}

// claims reports whether a request of method may have its replay record
// claimed by its handler.
func (v *Validator) claims(method string) bool {
	return slices.Contains(v.cfg.ClaimMethods, method)
}

// newClaim is the claim of m's record rec (its delivery in rec.Via).
func (v *Validator) newClaim(m *Message, key uint64, rec ReplayRecord) *ReplayClaim {
	return &ReplayClaim{From: m.From, ID: m.ID, Record: rec, v: v, m: m, key: key}
}
