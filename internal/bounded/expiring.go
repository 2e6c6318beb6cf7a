package bounded

import (
	"errors"
	"math"
	"sync"
	"time"
)

// ErrFull: an Expiring made to refuse when full holds its bound of
// unexpired entries.
var ErrFull = errors.New("bounded: full")

// Expiring is a map whose entries expire, of bounded size, safe for
// concurrent use: the deduplication sets of the node (message ids seen by
// the replay check, event ids delivered by the relay pool, events processed
// by the inbox) are one. Entries are kept in the order they were added;
// each Add first forgets the entries expired at its now at the head of
// that order, with no goroutine, so both bounds cost O(1) amortised when
// expiry times grow with insertion (a fixed time to live). An entry that
// expires out of order is still absent to Get and Add once expired.
// Expiry follows the wall clock (times are kept as Unix nanoseconds: an
// entry costs its key and value and 16 bytes in the map, its key and 8
// bytes in the queue).
type Expiring[K comparable, V any] struct {
	mu    sync.Mutex
	size  int
	evict bool
	m     map[K]expiringEntry[V]
	queue []expiringKey[K] // insertion order; queue[head:] is live
	head  int
	seq   uint64
}

type expiringEntry[V any] struct {
	v       V
	expires int64  // Unix nanoseconds
	seq     uint64 // which queue entry is this one's
}

// expiringKey is a queue entry: it is k's only while k's entry in the map
// has its seq (a key added again after it expired has a new one).
type expiringKey[K comparable] struct {
	k   K
	seq uint64
}

// NewExpiring returns an Expiring of at most size entries (at least 1).
// When it is full, Add forgets the oldest entry if evictOldest (a key
// forgotten early can then be added again: size must cover the entries
// expected within their lifetime), else refuses with ErrFull.
func NewExpiring[K comparable, V any](size int, evictOldest bool) *Expiring[K, V] {
	size = max(size, 1)
	return &Expiring[K, V]{size: size, evict: evictOldest, m: make(map[K]expiringEntry[V], min(size, 1024))}
}

// Get returns the value of k if it is held and not expired at now (and
// forgets, as Add does, the entries expired at now at the head).
func (e *Expiring[K, V]) Get(k K, now time.Time) (V, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.expire(now)
	x, ok := e.m[k]
	if !ok || nanos(now) >= x.expires {
		var zero V
		return zero, false
	}
	return x.v, true
}

// Add stores v under k until expires unless k holds a value unexpired at
// now: then it returns that value and added false. It returns ErrFull
// when the Expiring refuses when full and is.
func (e *Expiring[K, V]) Add(k K, v V, expires, now time.Time) (prior V, added bool, err error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.expire(now)
	if x, ok := e.m[k]; ok && nanos(now) < x.expires {
		return x.v, false, nil
	}
	for len(e.m) >= e.size {
		if !e.evict || e.head == len(e.queue) {
			return prior, false, ErrFull
		}
		e.pop()
	}
	e.seq++
	e.m[k] = expiringEntry[V]{v: v, expires: nanos(expires), seq: e.seq}
	e.queue = append(e.queue, expiringKey[K]{k: k, seq: e.seq})
	return prior, true, nil
}

// Len returns the number of entries held, expired ones not yet forgotten
// included.
func (e *Expiring[K, V]) Len() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.m)
}

// NextExpiry returns when the oldest entry expires: when a full Expiring
// that refuses has room again.
func (e *Expiring[K, V]) NextExpiry() (time.Time, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for e.head < len(e.queue) {
		if x, ok := e.live(e.queue[e.head]); ok {
			return time.Unix(0, x.expires), true
		}
		e.pop() // a stale queue entry
	}
	return time.Time{}, false
}

// Unix nanoseconds hold the years 1678 to 2262; UnixNano is undefined
// outside them (an expiry in 2400 read as one in 1816: at once expired).
var (
	minNanos = time.Unix(0, math.MinInt64)
	maxNanos = time.Unix(0, math.MaxInt64)
)

// nanos is t in Unix nanoseconds, a time beyond their range taken as
// their bound: an entry expiring after 2262 is held until then.
func nanos(t time.Time) int64 {
	switch {
	case t.Before(minNanos):
		return math.MinInt64
	case t.After(maxNanos):
		return math.MaxInt64
	}
	return t.UnixNano()
}

// expire forgets the entries at the head expired at now, and the stale
// queue entries there. e.mu is held.
func (e *Expiring[K, V]) expire(now time.Time) {
	t := nanos(now)
	for e.head < len(e.queue) {
		if x, ok := e.live(e.queue[e.head]); ok && t < x.expires {
			return
		}
		e.pop()
	}
}

// live returns the map entry q stands for, unless the key was forgotten or
// added again since. e.mu is held.
func (e *Expiring[K, V]) live(q expiringKey[K]) (expiringEntry[V], bool) {
	x, ok := e.m[q.k]
	return x, ok && x.seq == q.seq
}

// pop forgets the oldest entry, and compacts the queue when most of it is
// dead. e.mu is held.
func (e *Expiring[K, V]) pop() {
	q := e.queue[e.head]
	if _, ok := e.live(q); ok {
		delete(e.m, q.k)
	}
	e.queue[e.head] = expiringKey[K]{}
	e.head++
	if e.head == len(e.queue) {
		e.queue, e.head = e.queue[:0], 0
	} else if e.head >= 1024 && e.head*2 >= len(e.queue) {
		n := copy(e.queue, e.queue[e.head:])
		clear(e.queue[n:])
		e.queue, e.head = e.queue[:n], 0
	}
}
