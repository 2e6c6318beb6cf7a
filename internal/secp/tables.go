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

// Tables holds the keys that earned a table (Precomputed) by verifying
// PromoteAfter signatures, at most size of them: its memory is at most
// its size times PrecomputedBytes (64 keys: 2.7 MB in the btcec build,
// nothing in the libsecp256k1 build). When it is full, a key that earns
// a table takes the place of the key idle longest, and only if that one
// verified nothing in the last IdleVerifications(size) verifications of
// this Tables: more busy keys than its size keep the tables they have
// instead of taking turns rebuilding them. The clock of idleness counts
// only signatures that verified (Verify): forged ones move nothing.
// However many keys pass, each table built is paid for by PromoteAfter
// signatures that verified without a table, so a flood of valid messages
// can raise the CPU spent on verification by at most a build (about
// 4.7 verifications) per eight, about 60 %. Tables is safe for concurrent
// use.
type Tables[K comparable] struct {
	size int
	tick atomic.Uint64 // verifications seen, the clock of idleness
	mu   sync.RWMutex
	m    map[K]*held
}

// held is a key with its table and the tick of its last use.
type held struct {
	pub  *PublicKey
	last atomic.Uint64
}

// IdleVerifications is how many verifications of a Tables of size keys
// must pass without one by a key for that key to count as idle: sixteen
// times the size, so that size keys taking turns with as many others
// stay well inside it.
func IdleVerifications(size int) uint64 { return 16 * uint64(max(size, 1)) }

// NewTables returns a Tables of at most size keys (at least 1).
func NewTables[K comparable](size int) *Tables[K] {
	return &Tables[K]{size: max(size, 1), m: make(map[K]*held)}
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
	if h := t.held(k); h != nil {
		if !h.pub.Verify(digest, sig) {
			return false
		}
		h.last.Store(t.tick.Add(1))
		return true
	}
	if !p.Verify(digest, sig) {
		return false
	}
	t.verified(k, p, u)
	return true
}

// verified records that p, held by the caller under k with its count u,
// has verified a signature. At every PromoteAfter-th, unless k holds a
// table already, it builds p's table and keeps it under k, if there is
// room or a key idle long enough to give way (see Tables). Only
// signatures that verified through p, not through a table, are reported:
// Verify does so.
func (t *Tables[K]) verified(k K, p *PublicKey, u *Uses) {
	now := t.tick.Add(1)
	if u.n.Add(1)%PromoteAfter != 0 {
		return
	}
	if !t.room(k, now) {
		return
	}
	pre := p.Precomputed() // outside the lock: it takes a few verifications' time
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.m[k]; ok {
		return
	}
	if len(t.m) >= t.size {
		victim, ok := t.idlest(t.tick.Load())
		if !ok {
			return
		}
		delete(t.m, victim)
	}
	h := &held{pub: pre}
	h.last.Store(now)
	t.m[k] = h
}

// room reports whether k, not held yet, would find a place at tick now.
func (t *Tables[K]) room(k K, now uint64) bool {
	t.mu.RLock()
	defer t.mu.RUnlock()
	if _, ok := t.m[k]; ok {
		return false
	}
	if len(t.m) < t.size {
		return true
	}
	_, ok := t.idlest(now)
	return ok
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
