package embedded

import "sync"

// outQueue is one of a conn's bounded queues of messages for its writer.
// It holds only what is queued: a buffered channel allocates its whole
// bound when made, 33 KiB for a connection's two queues of 256 and 64
// messages, which a relay serving a hundred idle clients kept for nothing
// (3.2 MiB). Hand-written because no channel or library queue both grows
// with its content and lets a sender wait for room beside its other
// cancellations (a connection's end, a time-out) in one select.
//
// The zero value is not usable: make one with newOutQueue.
type outQueue struct {
	mu    sync.Mutex
	items []outItem // items[head:] are queued
	head  int
	bound int
	// room, when not nil, is closed by the next take: senders that
	// found the queue full wait on it.
	room chan struct{}
}

// keepCap is the capacity a queue keeps when it empties: room for the
// usual burst, anything larger is let go.
const keepCap = 16

func newOutQueue(bound int) *outQueue { return &outQueue{bound: max(bound, 1)} }

// put queues it and returns true, unless the queue holds its bound: then
// it returns false and a channel closed as soon as a message is taken.
func (q *outQueue) put(it outItem) (bool, <-chan struct{}) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.items)-q.head >= q.bound {
		if q.room == nil {
			q.room = make(chan struct{})
		}
		return false, q.room
	}
	if q.head > 0 && len(q.items) == cap(q.items) {
		// Slide the queued messages down rather than grow.
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	q.items = append(q.items, it)
	return true, nil
}

// take removes and returns the oldest message, if there is one.
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
		if cap(q.items) > keepCap {
			q.items = nil
		}
	}
	if q.room != nil {
		close(q.room)
		q.room = nil
	}
	return it, true
}

// len returns the number of messages queued.
func (q *outQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items) - q.head
}
