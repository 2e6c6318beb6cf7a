package relay

import (
	"sync"
	"time"
)

// dedupeKey names one event delivered to one subscription: the same event
// may rightly reach two subscriptions, but each only once.
type dedupeKey struct {
	sub uint64   // Subscription serial
	id  [32]byte // event id
}

// dedupeSet remembers keys for at most ttl and holds at most size of them;
// when full, the oldest is forgotten first. Keys are kept in insertion
// order, which is also their expiry order, so both bounds cost O(1)
// amortised. A key forgotten early (the set was full) can be delivered
// again: size must cover the events expected within ttl. It is safe for
// concurrent use.
type dedupeSet struct {
	mu    sync.Mutex
	size  int
	ttl   time.Duration
	now   func() time.Time
	seen  map[dedupeKey]struct{}
	queue []dedupeEntry // insertion order; queue[head:] is live
	head  int
}

type dedupeEntry struct {
	key dedupeKey
	at  int64 // Unix nanoseconds when added
}

func newDedupeSet(size int, ttl time.Duration, now func() time.Time) *dedupeSet {
	size = max(size, 1)
	return &dedupeSet{size: size, ttl: ttl, now: now, seen: make(map[dedupeKey]struct{}, min(size, 1024))}
}

// expire drops the keys older than ttl. d.mu must be held.
func (d *dedupeSet) expire(now int64) {
	for d.head < len(d.queue) && now-d.queue[d.head].at >= int64(d.ttl) {
		d.pop()
	}
}

// pop forgets the oldest key. d.mu must be held.
func (d *dedupeSet) pop() {
	delete(d.seen, d.queue[d.head].key)
	d.queue[d.head] = dedupeEntry{}
	d.head++
	if d.head == len(d.queue) {
		d.queue, d.head = d.queue[:0], 0
	} else if d.head >= 1024 && d.head*2 >= len(d.queue) {
		n := copy(d.queue, d.queue[d.head:])
		clear(d.queue[n:])
		d.queue, d.head = d.queue[:n], 0
	}
}

// contains reports whether k was added and not yet forgotten.
func (d *dedupeSet) contains(k dedupeKey) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.expire(d.now().UnixNano())
	_, ok := d.seen[k]
	return ok
}

// add records k and reports whether it is new. A repeated key keeps its
// first time: the ttl runs from the first sighting.
func (d *dedupeSet) add(k dedupeKey) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now().UnixNano()
	d.expire(now)
	if _, ok := d.seen[k]; ok {
		return false
	}
	for len(d.queue)-d.head >= d.size {
		d.pop()
	}
	d.seen[k] = struct{}{}
	d.queue = append(d.queue, dedupeEntry{key: k, at: now})
	return true
}

// len returns the number of keys remembered.
func (d *dedupeSet) len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.seen)
}
