package secp

import (
	"sync"
	"sync/atomic"
)

// PromoteAfter is how many signatures a key must verify, while it has no
// table, before it earns one (Tables.Verify): a table's build costs
// about four verifications, which eight make worth it for a key that
// keeps signing, and which a key that signs once or twice never pays.
const PromoteAfter = 8

// Uses counts the signatures a key verified toward its promotion. Keep
// one with each known key; the zero value is ready.
type Uses struct{ n atomic.Uint32 }

// ReplaceEvery is the budget of a full Tables: once it has no free place,
// it builds a table to replace a key at most once per ReplaceEvery
// verifications (after a first replacement at once). A build costs about
// 4.7 verifications, so a flood of valid signatures from fresh keys can
// raise the CPU spent on verification by at most 4.7/48, about 10 %.
const ReplaceEvery = 48

// Tables holds the keys that earned a table (Precomputed) by verifying
// PromoteAfter signatures, at most size of them: its memory is at most
// its size times PrecomputedBytes (64 keys: 2.7 MB in the btcec build,
// nothing in the libsecp256k1 build). While it has a free place, a key
// that earns a table gets one at once. When it is full, a key that earns
// a table takes the place of the key idle longest, and only if that one
// verified nothing in the last IdleVerifications(size) verifications of
// this Tables: more busy keys than its size keep the tables they have
// instead of taking turns rebuilding them. The clock of idleness counts
// only signatures that verified (Verify): forged ones move nothing. Nor
// does the second signature of one request checked through the same key
// (VerifyOutputAgain: a Nostr event's, then its message's), so that the
// clock counts requests, by whatever path they come.
//
// A full Tables also replaces keys at most once per ReplaceEvery
// verifications, so that a flood of valid messages from fresh keys,
// however many, raises the CPU spent on verification by at most a build
// (about 4.7 verifications) per ReplaceEvery, about 10 %, instead of one
// per PromoteAfter. A key that earns a table while the budget is spent
// waits in line if it has verified more signatures than the key already
// waiting, and the next replacement builds the table of whichever of the
// two verified more. A key with steady traffic is thus first in line
// once it has verified more signatures than any key of the flood (at its
// 2·PromoteAfter-th against keys signing PromoteAfter messages each),
// and gets its table at the first request for one, by any key, once
// ReplaceEvery verifications have passed since the last replacement:
// under such a flood, within ReplaceEvery+PromoteAfter verifications if
// the flood's keys sign one after another, and at the latest at its own
// first PromoteAfter-th signature ReplaceEvery verifications after.
// Tables is safe for concurrent use.
type Tables[K comparable] struct {
	size   int
	every  uint64        // ReplaceEvery
	builds atomic.Uint64 // tables built, for the tests
	tick   atomic.Uint64 // verifications seen, the clock of idleness
	mu     sync.RWMutex
	m      map[K]*held
	// Guarded by mu: the keys whose table is being built outside it,
	// how many of those will take a free place, the tick before which
	// no other key may be replaced, and the key waiting for that tick.
	building map[K]struct{}
	filling  int
	next     uint64
	waiting  *candidate[K]
}

// held is a key with its table and the tick of its last use.
type held struct {
	pub  *PublicKey
	last atomic.Uint64
}

// candidate is a key that earned a table, with its count.
type candidate[K comparable] struct {
	k K
	p *PublicKey
	u *Uses
}

// IdleVerifications is how many verifications of a Tables of size keys
// must pass without one by a key for that key to count as idle: sixteen
// times the size, so that size keys taking turns with as many others
// stay well inside it.
func IdleVerifications(size int) uint64 { return 16 * uint64(max(size, 1)) }

// NewTables returns a Tables of at most size keys (at least 1).
func NewTables[K comparable](size int) *Tables[K] {
	return &Tables[K]{
		size:     max(size, 1),
		every:    ReplaceEvery,
		m:        make(map[K]*held),
		building: make(map[K]struct{}),
	}
}

// Get returns the precomputed key held under k. It counts no use of it:
// Verify does, for a signature that verified.
func (t *Tables[K]) Get(k K) (*PublicKey, bool) {
	if h := t.held(k); h != nil {
		return h.pub, true
	}
	return nil, false
}

func (t *Tables[K]) held(k K) *held {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.m[k]
}

// Verify reports whether sig is a valid BIP-340 signature of digest by p,
// the key the caller holds under k with its count u: through k's table
// when k holds one, else through p, counting a signature that verified
// toward k's table (verified). Only signatures that verify move the clock
// of idleness or count as a use of a table: forgeries, which cost nothing
// to make, can neither keep a key's table nor make other keys look idle.
func (t *Tables[K]) Verify(k K, p *PublicKey, u *Uses, digest [32]byte, sig [64]byte) bool {
	return t.check(k, p, u, false, func(p *PublicKey) bool { return p.Verify(digest, sig) })
}

// VerifyOutput is Verify for a signature by o, the output key of p
// (PublicKey.VerifyOutput): it verifies through the table of p held under
// k and counts toward it, so that an agent's internal key and its output
// key share one table and one place in t.
func (t *Tables[K]) VerifyOutput(k K, p *PublicKey, u *Uses, o *OutputKey, digest [32]byte, sig [64]byte) bool {
	return t.check(k, p, u, false, func(p *PublicKey) bool { return p.VerifyOutput(o, digest, sig) })
}

// VerifyOutputAgain is VerifyOutput for the second signature of a request
// whose first, by p, t verified under k already (Verify): a Nostr event's
// signature by an agent's internal key, then that of the message the
// event carries, by its output key. It counts as a use of k's table, or
// toward it, like VerifyOutput, but does not move the clock of idleness:
// a request counts once, so a key's table falls idle after
// IdleVerifications(size) requests by other keys whichever way they come,
// not half as many when each carries two signatures. The budget of
// replacements runs on the same clock: one per ReplaceEvery requests of
// two signatures is half the CPU bound of one per ReplaceEvery
// verifications.
func (t *Tables[K]) VerifyOutputAgain(k K, p *PublicKey, u *Uses, o *OutputKey, digest [32]byte, sig [64]byte) bool {
	return t.check(k, p, u, true, func(p *PublicKey) bool { return p.VerifyOutput(o, digest, sig) })
}

// check is Verify, VerifyOutput and VerifyOutputAgain: valid tells
// whether the signature verifies by a key, p or the one held under k;
// again, whether the clock stays (VerifyOutputAgain).
func (t *Tables[K]) check(k K, p *PublicKey, u *Uses, again bool, valid func(*PublicKey) bool) bool {
	if h := t.held(k); h != nil {
		if !valid(h.pub) {
			return false
		}
		h.last.Store(t.clock(again))
		return true
	}
	if !valid(p) {
		return false
	}
	t.counted(k, p, u, t.clock(again))
	return true
}

// clock returns the tick of a signature that verified: the next one, or
// the current one for a request's second (again).
func (t *Tables[K]) clock(again bool) uint64 {
	if again {
		return t.tick.Load()
	}
	return t.tick.Add(1)
}

// verified records that p, held by the caller under k with its count u,
// has verified a signature. At every PromoteAfter-th, unless k holds a
// table already, it builds p's table (or the waiting key's) and keeps it,
// if there is room, or a key idle long enough to give way and budget to
// replace it (see Tables). Only signatures that verified through p, not
// through a table, are reported: Verify does so.
func (t *Tables[K]) verified(k K, p *PublicKey, u *Uses) { t.counted(k, p, u, t.tick.Add(1)) }

// counted is verified at tick now, which the caller took from the clock.
func (t *Tables[K]) counted(k K, p *PublicKey, u *Uses, now uint64) {
	if u.n.Add(1)%PromoteAfter != 0 {
		return
	}
	c, fill, ok := t.reserve(candidate[K]{k, p, u}, now)
	if !ok {
		return
	}
	t.builds.Add(1)
	pre := c.p.Precomputed() // outside the lock: it takes a few verifications' time
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.building, c.k)
	if fill {
		t.filling--
	} else if len(t.m)+t.filling >= t.size {
		victim, ok := t.idlest(t.tick.Load())
		if !ok {
			return
		}
		delete(t.m, victim)
	}
	h := &held{pub: pre}
	h.last.Store(now)
	t.m[c.k] = h
}

// reserve decides, at tick now, whether c, which has just earned a table,
// or the waiting key gets one built, and returns the key to build and
// whether its table takes a free place (else it replaces a key). It
// reserves that place, or spends the budget of replacements; when the
// budget is spent, c waits in line if it outranks the waiting key.
func (t *Tables[K]) reserve(c candidate[K], now uint64) (candidate[K], bool, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.wants(c.k) {
		return c, false, false
	}
	if len(t.m)+t.filling < t.size {
		t.filling++
		t.building[c.k] = struct{}{}
		return c, true, true
	}
	w := t.waiting
	if w != nil && !t.wants(w.k) {
		t.waiting, w = nil, nil
	}
	if _, idle := t.idlest(now); !idle || now < t.next {
		if w == nil || c.u.n.Load() > w.u.n.Load() {
			t.waiting = &c
		}
		return c, false, false
	}
	t.next = now + t.every
	if w != nil && w.u.n.Load() > c.u.n.Load() {
		// w is built; c takes its place in line (a copy: c is reused).
		asked := c
		t.waiting, c = &asked, *w
	}
	t.building[c.k] = struct{}{}
	return c, false, true
}

// wants reports whether k holds no table and none is being built for it;
// the caller holds mu.
func (t *Tables[K]) wants(k K) bool {
	_, held := t.m[k]
	_, building := t.building[k]
	return !held && !building
}

// idlest returns the key used longest ago, if it is idle at tick now; the
// caller holds mu. A key used at a tick after now (a concurrent Verify
// through its table) is not idle.
func (t *Tables[K]) idlest(now uint64) (K, bool) {
	var victim K
	oldest, found := uint64(0), false
	for k, h := range t.m {
		if last := h.last.Load(); !found || last < oldest {
			victim, oldest, found = k, last, true
		}
	}
	return victim, found && now > oldest && now-oldest > IdleVerifications(t.size)
}

// Len returns the number of keys held.
func (t *Tables[K]) Len() int {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return len(t.m)
}
