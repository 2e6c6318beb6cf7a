package embedded

import (
	"log/slog"
	"runtime"
	"slices"
	"strconv"
	"testing"
	"time"
)

func noticeItem(i int) outItem {
	return outItem{msg: message{label: labelNotice, text: strconv.Itoa(i)}}
}

// An outQueue keeps its order and bound, keeps its buffer while it is in
// use, and lets it go when trimmed empty.
func TestOutQueue(t *testing.T) {
	q := newOutQueue(40)
	if cap(q.items) != 0 {
		t.Fatalf("a new queue holds room for %d messages, want none", cap(q.items))
	}
	next := 0 // the next message expected out
	for i := range 40 {
		if !q.tryPut(noticeItem(i)) {
			t.Fatalf("put %d refused below the bound", i)
		}
		if i%3 == 0 { // take as it fills, so that the head moves
			it, ok := q.take()
			if !ok || it.msg.text != strconv.Itoa(next) {
				t.Fatalf("took %q, %v; want %d", it.msg.text, ok, next)
			}
			next++
		}
	}
	for i := 40; q.len() < 40; i++ {
		if !q.tryPut(noticeItem(i)) {
			t.Fatalf("put %d refused with %d queued", i, q.len())
		}
	}
	if q.tryPut(noticeItem(-1)) {
		t.Fatal("a full queue took one more")
	}
	for q.len() > 0 {
		it, _ := q.take()
		if it.msg.text != strconv.Itoa(next) {
			t.Fatalf("took %q, want %d", it.msg.text, next)
		}
		next++
	}
	if _, ok := q.take(); ok {
		t.Fatal("took from an empty queue")
	}
	if cap(q.items) < 40 {
		t.Fatalf("an emptied queue let its buffer go at once (room for %d): the next burst reallocates it", cap(q.items))
	}
	q.trim()
	if cap(q.items) > keepCap {
		t.Fatalf("a trimmed empty queue keeps room for %d messages, want at most %d", cap(q.items), keepCap)
	}
	for i := range 2 * keepCap { // grow it past keepCap again, then hold one
		q.tryPut(noticeItem(i))
	}
	for q.len() > 1 {
		q.take()
	}
	before := cap(q.items)
	q.trim()
	if it, ok := q.take(); !ok || it.msg.text != strconv.Itoa(2*keepCap-1) || cap(q.items) != before {
		t.Fatalf("trim of a queue holding a message: took %q (%v), room for %d (%d before)", it.msg.text, ok, cap(q.items), before)
	}
}

// Senders that find an outQueue full get room in the order they came, as
// on a channel: a freed slot is kept for the oldest, a newcomer does not
// take it, and a sender giving up passes its kept slot on.
func TestOutQueueWaitersInTurn(t *testing.T) {
	q := newOutQueue(2)
	q.tryPut(noticeItem(0))
	q.tryPut(noticeItem(1))
	okA, a := q.putOrWait(noticeItem(10))
	okB, b := q.putOrWait(noticeItem(11))
	okC, c := q.putOrWait(noticeItem(12))
	if okA || okB || okC {
		t.Fatal("a full queue took a message")
	}
	isClosed := func(w <-chan struct{}) bool {
		select {
		case <-w:
			return true
		default:
			return false
		}
	}
	q.take()
	if !isClosed(a) || isClosed(b) || isClosed(c) {
		t.Fatal("the freed slot was not kept for the sender waiting longest")
	}
	if q.tryPut(noticeItem(-1)) {
		t.Fatal("a newcomer took the slot kept for a waiting sender")
	}
	q.putKept(noticeItem(10))
	q.take()
	if !isClosed(b) || isClosed(c) {
		t.Fatal("the second slot was not kept for the second sender")
	}
	q.cancel(b) // b gives up after its slot was kept: c gets it
	if !isClosed(c) {
		t.Fatal("a slot given up was not passed on")
	}
	q.putKept(noticeItem(12))
	var got []string
	for it, ok := q.take(); ok; it, ok = q.take() {
		got = append(got, it.msg.text)
	}
	if want := []string{"10", "12"}; !slices.Equal(got, want) {
		t.Fatalf("queue held %q, want %q", got, want)
	}
	// A slot kept for a woken sender counts against the bound even once
	// nobody waits any more.
	one := newOutQueue(1)
	one.tryPut(noticeItem(0))
	_, w := one.putOrWait(noticeItem(1))
	one.take()
	<-w
	if one.tryPut(noticeItem(2)) {
		t.Fatal("a newcomer took the slot kept for a woken sender")
	}
	one.putKept(noticeItem(1))

	okD, d := q.putOrWait(noticeItem(13))
	if !okD || d != nil {
		t.Fatal("an empty queue made a sender wait")
	}
	q.tryPut(noticeItem(14))
	_, e := q.putOrWait(noticeItem(15))
	q.cancel(e) // gives up before its turn: leaves the line
	if len(q.waiters) != 0 || q.kept != 0 {
		t.Fatalf("%d waiting, %d slots kept after the only waiter left; want none", len(q.waiters), q.kept)
	}
}

// A control message waits for room up to WriteTimeout; a connection cut
// meanwhile answers errConnClosed, and a queue still full at the deadline
// disconnects the client as too slow.
func TestEnqueueWaitsForRoom(t *testing.T) {
	r := startRelay(t, Config{})
	rt := &recordTransport{flushed: make(chan struct{}, 8)}
	c := r.newConn(rt, slog.New(slog.DiscardHandler))
	for i := range ctrlQueue {
		if got := c.enqueue(c.ctrl, noticeItem(i), false); got != queued {
			t.Fatalf("message %d: %v, want queued", i, got)
		}
	}
	if got := c.enqueue(c.ctrl, noticeItem(ctrlQueue), false); got != queueFull {
		t.Fatalf("message past the bound without waiting: %v, want queueFull", got)
	}
	<-c.ready // the signal of the messages above
	sent := make(chan error, 1)
	go func() { sent <- c.notice("waiting") }()
	waitForWaiters(c.ctrl, 1)
	c.next() // room, kept for the one waiting
	if err := <-sent; err != nil {
		t.Fatalf("a sender waiting for room: %v", err)
	}
	select {
	case <-c.ready:
	default:
		t.Fatal("a message put after waiting did not wake the writer")
	}
	if got := c.ctrl.len(); got != ctrlQueue {
		t.Fatalf("%d messages queued, want %d", got, ctrlQueue)
	}
	go func() { sent <- c.notice("never") }()
	c.kill(1000, "")
	if err := <-sent; err != errConnClosed {
		t.Fatalf("a sender waiting on a closed connection: %v, want errConnClosed", err)
	}

	r = startRelay(t, Config{WriteTimeout: 20 * time.Millisecond})
	c = r.newConn(rt, slog.New(slog.DiscardHandler))
	for i := range ctrlQueue {
		c.enqueue(c.ctrl, noticeItem(i), false)
	}
	if err := c.notice("late"); err != errConnClosed {
		t.Fatalf("a sender still waiting at WriteTimeout: %v, want errConnClosed", err)
	}
	select {
	case <-c.done:
	default:
		t.Fatal("a client whose control queue stayed full is still connected")
	}
	if got := r.slowCuts.Load(); got != 1 {
		t.Fatalf("%d slow clients cut, want 1", got)
	}
}

// The writer takes from the control and the live queue in turn: a long
// stored result does not hold back live events (which would fill their
// queue and have the client cut as too slow).
func TestWriterAlternatesQueues(t *testing.T) {
	r := startRelay(t, Config{})
	rt := &recordTransport{flushed: make(chan struct{}, 8)}
	c := r.newConn(rt, slog.New(slog.DiscardHandler))
	for i := range 6 {
		c.enqueue(c.ctrl, outItem{msg: message{label: labelNotice, text: "c" + strconv.Itoa(i)}}, false)
	}
	for i := range 3 {
		c.enqueue(c.live, outItem{msg: message{label: labelNotice, text: "l" + strconv.Itoa(i)}}, false)
	}
	done := make(chan struct{})
	go func() { defer close(done); c.writeLoop() }()
	defer func() { c.kill(1000, ""); <-done }()
	<-rt.flushed
	want := []string{"begin", "write c0", "write l0", "write c1", "write l1", "write c2", "write l2", "write c3", "write c4", "write c5", "flush"}
	if got := rt.take(); !slices.Equal(got, want) {
		t.Fatalf("writer did %q, want %q", got, want)
	}
}

// waitForWaiters returns once n senders wait for room in q.
func waitForWaiters(q *outQueue, n int) {
	for {
		q.mu.Lock()
		w := len(q.waiters)
		q.mu.Unlock()
		if w >= n {
			return
		}
		runtime.Gosched()
	}
}
