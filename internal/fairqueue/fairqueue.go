package fairqueue

import (
	"context"
	"slices"
	"sync"
)

// Result is what Push did.
type Result int

const (
	// Queued: the item waits its turn.
	Queued Result = iota
	// Displaced: the item waits its turn, and the newest item of the
	// busiest key, which held at least two more items than the item's
	// key, was pushed out to make room (Push returns it).
	Displaced
	// Refused: the queue is full and no key holds two more items than
	// the item's (or the queue is closed); nothing changed.
	Refused
)

// Queue is a bounded round-robin queue of V by key K. It is safe for
// concurrent use.
type Queue[K comparable, V any] struct {
	mu       sync.Mutex
	nonEmpty *sync.Cond
	max      int
	total    int
	byKey    map[K]*fifo[V]
	ring     []K // keys with items not held, in turn order; ring[0] is next
	// held holds the keys Hold set aside until Release; parked, those
	// of them with items, in the order they were held.
	held   map[K]struct{}
	parked []K
	closed bool
	// room, when a Wait waits, is closed as an item leaves (or the
	// queue closes) and set to nil.
	room chan struct{}
}

type fifo[V any] struct{ items []V }

// New returns a Queue holding at most size items (at least 1).
func New[K comparable, V any](size int) *Queue[K, V] {
	q := &Queue[K, V]{max: max(1, size), byKey: make(map[K]*fifo[V]), held: make(map[K]struct{})}
	q.nonEmpty = sync.NewCond(&q.mu)
	return q
}

// Push adds v at the end of key's turn. See Result for what it may do;
// out is the displaced item when the result is Displaced.
func (q *Queue[K, V]) Push(key K, v V) (out V, res Result) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return out, Refused
	}
	if q.total >= q.max {
		var ok bool
		if out, ok = q.evict(key); !ok {
			return out, Refused
		}
		res = Displaced
	}
	q.add(key, v)
	return out, res
}

// Evict removes and returns the item Push would push out for an item of
// key on a full queue, full or not: the busiest key's newest, when key
// holds fewer than that key would after. It reports false, removing
// nothing, when that would not make the queue fairer. A caller bounding
// the queue by more than its count (bytes, say) makes room so, by key in
// turn as Push does.
func (q *Queue[K, V]) Evict(key K) (out V, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	out, ok = q.evict(key)
	if ok {
		q.roomMade()
	}
	return out, ok
}

// evict is Evict with q.mu held.
func (q *Queue[K, V]) evict(key K) (out V, ok bool) {
	if q.total == 0 {
		return out, false
	}
	// Push out only what makes the queue fairer: after the swap key
	// must still hold fewer than the busiest held. Among equals the
	// items already waiting keep their places.
	busiest, n := q.busiest()
	if n <= q.len(key)+1 {
		return out, false
	}
	f := q.byKey[busiest]
	out = f.items[len(f.items)-1]
	var zero V
	f.items[len(f.items)-1] = zero
	f.items = f.items[:len(f.items)-1]
	q.total--
	if len(f.items) == 0 {
		q.drop(busiest)
	}
	return out, true
}

// Wait adds v at the end of key's turn once the queue has room for it,
// pushing nothing out, and reports whether it did: false when ctx ends or
// the queue is closed first. Push may take the room first: an item Wait
// adds waits behind those.
func (q *Queue[K, V]) Wait(ctx context.Context, key K, v V) bool {
	for {
		q.mu.Lock()
		if q.closed {
			q.mu.Unlock()
			return false
		}
		if q.total < q.max {
			q.add(key, v)
			q.mu.Unlock()
			return true
		}
		if q.room == nil {
			q.room = make(chan struct{})
		}
		room := q.room
		q.mu.Unlock()
		select {
		case <-room:
		case <-ctx.Done():
			return false
		}
	}
}

// add adds v at the end of key's turn. q.mu is held, and there is room.
func (q *Queue[K, V]) add(key K, v V) {
	f := q.fifo(key)
	f.items = append(f.items, v)
	q.total++
	q.nonEmpty.Signal()
}

// fifo returns key's items, made and given a turn (or parked, when key
// is held) when it has none. q.mu is held.
func (q *Queue[K, V]) fifo(key K) *fifo[V] {
	f, ok := q.byKey[key]
	if !ok {
		f = &fifo[V]{}
		q.byKey[key] = f
		if _, held := q.held[key]; held {
			q.parked = append(q.parked, key)
		} else {
			q.ring = append(q.ring, key)
		}
	}
	return f
}

// Return puts vs, items of key popped before, back at the head of key's
// turn, in their order, before the items key still has waiting. They go
// past the queue's bound when it is full: they had their place in it,
// and so the queue holds at most its size and what its poppers hold at
// once. Return reports false, adding nothing, once the queue is closed.
func (q *Queue[K, V]) Return(key K, vs ...V) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return false
	}
	if len(vs) == 0 {
		return true
	}
	f := q.fifo(key)
	f.items = append(slices.Clone(vs), f.items...)
	q.total += len(vs)
	// Several items may be poppable now: a Signal would wake one Pop,
	// and the others would sleep on beside the rest.
	q.nonEmpty.Broadcast()
	return true
}

// Hold sets key's items aside until Release: Pop and TryPop pass over
// them, and over those key adds meanwhile, while they still count
// against the bound and may be pushed out as any others. The keys not
// held go on being served in turn. Close releases every key. A key held
// already stays so.
func (q *Queue[K, V]) Hold(key K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return
	}
	if _, held := q.held[key]; held {
		return
	}
	q.held[key] = struct{}{}
	if i := slices.Index(q.ring, key); i >= 0 {
		q.ring = slices.Delete(q.ring, i, i+1)
		q.parked = append(q.parked, key)
	}
}

// Release ends Hold for key: its items take their turn again, at the end
// of the round.
func (q *Queue[K, V]) Release(key K) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.release(key)
}

// release is Release with q.mu held.
func (q *Queue[K, V]) release(key K) {
	if _, held := q.held[key]; !held {
		return
	}
	delete(q.held, key)
	if i := slices.Index(q.parked, key); i >= 0 {
		q.parked = slices.Delete(q.parked, i, i+1)
		q.ring = append(q.ring, key)
		q.nonEmpty.Broadcast() // its items, all poppable now (see Return)
	}
}

// roomMade wakes the Waits, if any. q.mu is held.
func (q *Queue[K, V]) roomMade() {
	if q.room != nil {
		close(q.room)
		q.room = nil
	}
}

// Pop waits for an item of a key not held and returns the oldest of the
// key whose turn it is; that key's turn then passes to the next. After
// Close it returns the items still queued, then false.
func (q *Queue[K, V]) Pop() (v V, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.ring) == 0 {
		if q.closed {
			return v, false
		}
		q.nonEmpty.Wait()
	}
	return q.pop(), true
}

// TryPop is Pop without the wait: it reports false at once when no item
// of a key not held is queued.
func (q *Queue[K, V]) TryPop() (v V, ok bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.ring) == 0 {
		return v, false
	}
	return q.pop(), true
}

// pop removes and returns the next item. q.mu is held and q.ring is not
// empty.
func (q *Queue[K, V]) pop() (v V) {
	key := q.ring[0]
	f := q.byKey[key]
	v = f.items[0]
	var zero V
	f.items[0] = zero
	f.items = f.items[1:]
	q.total--
	q.ring = append(q.ring[1:], key) // its turn passes
	if len(f.items) == 0 {
		q.drop(key)
	}
	q.roomMade()
	return v
}

// Len returns the number of items waiting, those of keys held included.
func (q *Queue[K, V]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.total
}

// Close refuses further items, releases the keys held and wakes the
// waiting Pops; the items queued are still popped.
func (q *Queue[K, V]) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	for key := range q.held {
		q.release(key)
	}
	q.closed = true
	q.nonEmpty.Broadcast()
	q.roomMade()
}

func (q *Queue[K, V]) len(key K) int {
	if f, ok := q.byKey[key]; ok {
		return len(f.items)
	}
	return 0
}

// busiest returns the key with the most items, held or not (the first in
// turn order among equals, then the first held). q.total > 0.
func (q *Queue[K, V]) busiest() (K, int) {
	var best K
	n := -1
	for _, keys := range [][]K{q.ring, q.parked} {
		for _, k := range keys {
			if l := len(q.byKey[k].items); l > n {
				best, n = k, l
			}
		}
	}
	return best, n
}

// drop removes key, which has no items, from the map and the ring (or
// the keys parked); a key held stays held.
func (q *Queue[K, V]) drop(key K) {
	delete(q.byKey, key)
	for _, keys := range []*[]K{&q.ring, &q.parked} {
		if i := slices.Index(*keys, key); i >= 0 {
			*keys = slices.Delete(*keys, i, i+1)
			return
		}
	}
}
