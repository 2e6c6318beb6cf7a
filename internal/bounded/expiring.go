package bounded

import (
	"errors"
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
	expires time.Time
	seq     uint64 // which queue entry is this one's
}

type expiringKey[K comparable] struct {
	k       K
	expires time.Time
	seq     uint64
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
	if !ok || !now.Before(x.expires) {
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
	if x, ok := e.m[k]; ok && now.Before(x.expires) {
		return x.v, false, nil
	}
	for len(e.m) >= e.size {
		if !e.evict || e.head == len(e.queue) {
			return prior, false, ErrFull
		}
		e.pop()
	}
	e.seq++
	e.m[k] = expiringEntry[V]{v: v, expires: expires, seq: e.seq}
	e.queue = append(e.queue, expiringKey[K]{k: k, expires: expires, seq: e.seq})
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
	if e.head == len(e.queue) {
		return time.Time{}, false
	}
	return e.queue[e.head].expires, true
}

// expire forgets the entries at the head expired at now. e.mu is held.
func (e *Expiring[K, V]) expire(now time.Time) {
	for e.head < len(e.queue) && !now.Before(e.queue[e.head].expires) {
		e.pop()
	}
}

// pop forgets the oldest entry, and compacts the queue when most of it is
// dead. e.mu is held.
func (e *Expiring[K, V]) pop() {
	q := e.queue[e.head]
	if x, ok := e.m[q.k]; ok && x.seq == q.seq {
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
