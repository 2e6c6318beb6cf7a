package relay

import (
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
type dedupeSet struct {
	ttl  time.Duration
	now  func() time.Time
	keys *bounded.Expiring[dedupeKey, struct{}]
}

func newDedupeSet(size int, ttl time.Duration, now func() time.Time) *dedupeSet {
	return &dedupeSet{ttl: ttl, now: now, keys: bounded.NewExpiring[dedupeKey, struct{}](size, true)}
}

// contains reports whether k was added and not yet forgotten.
func (d *dedupeSet) contains(k dedupeKey) bool {
	_, ok := d.keys.Get(k, d.now())
	return ok
}

// add records k and reports whether it is new. A repeated key keeps its
// first time: the ttl runs from the first sighting.
func (d *dedupeSet) add(k dedupeKey) bool {
	now := d.now()
	_, added, _ := d.keys.Add(k, struct{}{}, now.Add(d.ttl), now) // an evicting set is never full
	return added
}

// len returns the number of keys remembered.
func (d *dedupeSet) len() int { return d.keys.Len() }
