package relay

import (
	"hash/maphash"
	"time"

	"github.com/snapnode/snapnode/internal/bounded"
)

// dedupeKey names one event delivered to one subscription: the same event
// may rightly reach two subscriptions, but each only once.
type dedupeKey struct {
	sub uint64   // Subscription serial
	id  [32]byte // event id
}

// dedupeSet remembers keys for at most ttl from their first sighting and
// holds at most size of them; when full, the oldest is forgotten first. A
// key forgotten early (the set was full) can be delivered again: size must
// cover the events expected within ttl. It is safe for concurrent use.
//
// It holds a 64-bit hash of each key under a random seed of its own,
// 24 bytes an entry in its map instead of 56 (a full set of 100,000 keys
// holds about 6 MB instead of 13). Two keys sharing a hash would have the
// second event dropped as seen: with n keys held, a chance of n in 2⁶⁴ an
// event (about 1 in 10¹⁴ at 100,000), which no sender can raise without
// knowing the seed.
type dedupeSet struct {
	ttl  time.Duration
	now  func() time.Time
	seed maphash.Seed
	keys *bounded.Expiring[uint64, struct{}]
}

func newDedupeSet(size int, ttl time.Duration, now func() time.Time) *dedupeSet {
	return &dedupeSet{ttl: ttl, now: now, seed: maphash.MakeSeed(), keys: bounded.NewExpiring[uint64, struct{}](size, true)}
}

func (d *dedupeSet) sum(k dedupeKey) uint64 { return maphash.Comparable(d.seed, k) }

// contains reports whether k was added and not yet forgotten.
func (d *dedupeSet) contains(k dedupeKey) bool {
	_, ok := d.keys.Get(d.sum(k), d.now())
	return ok
}

// add records k and reports whether it is new. A repeated key keeps its
// first time: the ttl runs from the first sighting.
func (d *dedupeSet) add(k dedupeKey) bool {
	now := d.now()
	_, added, _ := d.keys.Add(d.sum(k), struct{}{}, now.Add(d.ttl), now) // an evicting set is never full
	return added
}

// len returns the number of keys remembered.
func (d *dedupeSet) len() int { return d.keys.Len() }
