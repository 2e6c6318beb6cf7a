package secp

import (
	"sync/atomic"

	"github.com/snapnode/snapnode/internal/bounded"
)

// PromoteAfter is how many signatures a key must verify, while it has no
// table, before it earns one (Tables.Verified): a table's build costs
// about four verifications, which eight make worth it for a key that
// keeps signing, and which a key that signs once or twice never pays.
const PromoteAfter = 8

// Uses counts the signatures a key verified toward its promotion. Keep
// one with each known key; the zero value is ready.
type Uses struct{ n atomic.Uint32 }

// Tables holds the keys that earned a table (Precomputed) by verifying
// PromoteAfter signatures, in a bounded cache: its memory is at most its
// size times PrecomputedBytes (32 keys: 1.3 MB in the btcec build,
// nothing in the libsecp256k1 build). A key evicted from it earns its
// table again with PromoteAfter more signatures, so however many keys
// pass, each table built is paid for by PromoteAfter signatures that
// verified, and a flood of valid messages can raise the CPU spent on
// verification by about half at most. Tables is safe for concurrent use.
type Tables[K comparable] struct {
	c *bounded.Cache[K, *PublicKey]
}

// NewTables returns a Tables of at most size keys (at least 1).
func NewTables[K comparable](size int) *Tables[K] {
	return &Tables[K]{c: bounded.NewCache[K, *PublicKey](size)}
}

// Get returns the precomputed key held under k.
func (t *Tables[K]) Get(k K) (*PublicKey, bool) { return t.c.Get(k) }

// Verified records that p, held by the caller under k with its count u,
// has verified a signature. At every PromoteAfter-th, unless k holds a
// table already, it builds p's table and keeps it under k, evicting an
// arbitrary key when full. Report only signatures that verified, and only
// through p, not through the key Get returns.
func (t *Tables[K]) Verified(k K, p *PublicKey, u *Uses) {
	if u.n.Add(1)%PromoteAfter != 0 {
		return
	}
	if _, ok := t.c.Get(k); ok {
		return
	}
	t.c.Put(k, p.Precomputed())
}

// Len returns the number of keys held.
func (t *Tables[K]) Len() int { return t.c.Len() }
