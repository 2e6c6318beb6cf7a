package embedded

import (
	"slices"
	"sync"
)

// outQueue is one of a conn's bounded queues of messages for its writer.
// It holds only what is queued: a buffered channel allocates its whole
// bound when made, 33 KiB for a connection's two queues of 256 and 64
// messages, which a relay serving a hundred idle clients kept for nothing
// (3.2 MiB); what it grew to is let go once the connection is idle (see
// trim). Like a channel, it lets senders wait for room in turn: a
// slot freed is kept for the sender that has waited longest, and no
// newcomer takes it. Hand-written because no channel or library queue
// both grows with its content and lets a sender wait for room beside its
// other cancellations (a connection's end, a time-out) in one select.
//
// The zero value is not usable: make one with newOutQueue.
type outQueue struct {
	mu    sync.Mutex
	items []outItem // items[head:] are queued
	head  int
	bound int
	// waiters are the senders that found no room, oldest first; a
	// sender's channel is closed when a slot is kept for it.
	waiters []chan struct{}
	// kept counts the slots kept for woken senders that have not yet
	// put their message.
	kept int
}

// keepCap is the capacity an empty queue keeps through trim: room for
// the usual burst.
const keepCap = 16

func newOutQueue(bound int) *outQueue { return &outQueue{bound: max(bound, 1)} }

// tryPut queues it and returns true, unless there is no room for it (the
// bound is reached, or senders wait for room before it).
func (q *outQueue) tryPut(it outItem) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.room() {
		return false
	}
	q.push(it)
	return true
}

// putOrWait queues it and returns true, or, when there is no room,
// returns false and a channel closed once a slot is kept for the caller,
// who must then call putKept, or cancel with the channel if it gives up
// waiting.
func (q *outQueue) putOrWait(it outItem) (bool, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.room() {
		q.push(it)
		return true, nil
	}
	w := make(chan struct{})
	q.waiters = append(q.waiters, w)
	return false, w
}

// putKept queues it in the slot kept for the caller (see putOrWait).
func (q *outQueue) putKept(it outItem) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.kept--
	q.push(it)
}

// cancel withdraws the caller's wait (w from putOrWait): it leaves the
// line, or, when a slot was kept for it meanwhile, passes the slot on.
func (q *outQueue) cancel(w <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if i := slices.IndexFunc(q.waiters, func(c chan struct{}) bool { return c == w }); i >= 0 {
		q.waiters = slices.Delete(q.waiters, i, i+1)
		return
	}
	q.kept--
	q.wake()
}

// take removes and returns the oldest message, if there is one, and keeps
// the slot it frees for the sender waiting longest.
func (q *outQueue) take() (outItem, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.items) {
		return outItem{}, false
	}
	it := q.items[q.head]
	q.items[q.head] = outItem{}
	q.head++
	if q.head == len(q.items) {
		q.items, q.head = q.items[:0], 0
	}
	q.wake()
	return it, true
}

// trim lets the buffer go if the queue is empty and it holds room for
// more than keepCap messages. The writer calls it when it pings (every
// trimEvery when it does not), so that a connection gone idle keeps no
// large buffer while a busy one does not reallocate its buffer at every
// turn.
func (q *outQueue) trim() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.head == len(q.items) && cap(q.items) > keepCap {
		q.items, q.head = nil, 0
	}
}

// len returns the number of messages queued.
func (q *outQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) - q.head
}

// idle reports whether q holds nothing and nobody waits to put: what is
// written now goes out after everything queued before it.
func (q *outQueue) idle() bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) == q.head && q.kept == 0 && len(q.waiters) == 0
}

// room reports whether a newcomer may put a message now. q.mu is held.
func (q *outQueue) room() bool {
	return len(q.waiters) == 0 && len(q.items)-q.head+q.kept < q.bound
}

// wake keeps a slot for each waiting sender there is room for, oldest
// first. q.mu is held.
func (q *outQueue) wake() {
	for len(q.waiters) > 0 && len(q.items)-q.head+q.kept < q.bound {
		close(q.waiters[0])
		q.waiters[0] = nil
		q.waiters = q.waiters[1:]
		q.kept++
	}
	if len(q.waiters) == 0 {
		q.waiters = nil
	}
}

// push appends it. q.mu is held.
func (q *outQueue) push(it outItem) {
	if q.head > 0 && len(q.items) == cap(q.items) {
		// Slide the queued messages down rather than grow.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, it)
}
