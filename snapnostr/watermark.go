package snapnostr

import (
	"math"
	"sync"

	"github.com/nbd-wtf/go-nostr"
)

// watermark tells which of the relays' points (relay.Subscription.Resume)
// a running inbox may write: those read before every request it had
// accepted then was finished. A point moves as a request is received,
// while the request may wait in the queue or be handled for minutes
// after; written then, a node that stopped uncleanly would not ask the
// relay for that request again once it is more than the lookback behind.
//
// Time is cut into epochs, one a write (reachEvery); each accepted
// request counts in the epoch it was queued in until it is finished. The
// points read as an epoch begins are written once that epoch has ended
// and no request of it or of an earlier one is left: a request whose
// created_at the points include was received before they were read, and
// so counted by the end of that epoch (the subscription's reader counts
// it at once, before the checkpoint is asked about it). A request that is never finished (a
// stream that runs for hours) holds the writes back meanwhile: the next
// start then asks the relays again for more, which the checkpoint's
// processed ids stop.
//
// A request is counted by its *nostr.Event once it is offered to the
// queue (admit), and by its *deferral while it is kept aside for another
// replica (Shares): it is in flight until its grace ends, another process
// is known to have taken it, or it is taken up here (handOver, keeping
// its epoch). A request dropped as Run stops (its checkpoint Seen failed
// on the ended context, or it was kept aside) is never finished: the
// points written at the stop (last) then stay behind it.
type watermark struct {
	mu    sync.Mutex
	epoch uint64
	open  map[uint64]int // by epoch, the requests accepted then and not finished
	of    map[any]uint64 // the epoch of each such request (*nostr.Event or *deferral)
	marks []mark         // points read and not yet writable, oldest first
}

// mark holds the points read as epoch began.
type mark struct {
	epoch  uint64
	points map[string]nostr.Timestamp
}

// maxMarks bounds the marks kept while a request holds the writes back:
// past it the oldest are let go (the newer ones, written once the
// request is finished, include them).
const maxMarks = 64

func newWatermark() *watermark {
	return &watermark{open: map[uint64]int{}, of: map[any]uint64{}}
}

// accepted counts req (a *nostr.Event or a *deferral) in the current
// epoch, unless it is counted already.
func (w *watermark) accepted(req any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.of[req]; ok {
		return
	}
	w.of[req] = w.epoch
	w.open[w.epoch]++
}

// finished stops counting req: it was handled, refused, or is known
// processed or taken by another process. A request not counted (or
// counted no longer) is let be.
func (w *watermark) finished(req any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if e, ok := w.take(req); ok {
		w.release(e)
	}
}

// handOver counts to, in from's place and epoch: a request kept aside
// (from, its *deferral) is taken up as the event to. A request counted
// twice so keeps the older epoch.
func (w *watermark) handOver(from, to any) {
	w.mu.Lock()
	defer w.mu.Unlock()
	e, ok := w.take(from)
	if !ok {
		return
	}
	if old, ok := w.of[to]; ok {
		w.release(max(e, old))
		e = min(e, old)
	}
	w.of[to] = e
}

// take removes req from the requests counted and returns its epoch;
// false: it was not counted. Its epoch's count is left to the caller
// (release, or the request it hands over to). w.mu is held.
func (w *watermark) take(req any) (uint64, bool) {
	e, ok := w.of[req]
	if ok {
		delete(w.of, req)
	}
	return e, ok
}

// release uncounts one request of epoch e. w.mu is held.
func (w *watermark) release(e uint64) {
	if w.open[e]--; w.open[e] == 0 {
		delete(w.open, e)
	}
}

// next begins a new epoch with the points read now, and returns the
// points that may be written: of each relay, the newest of the marks
// now writable (nil when none is).
func (w *watermark) next(points map[string]nostr.Timestamp) map[string]nostr.Timestamp {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.epoch++
	w.marks = append(w.marks, mark{epoch: w.epoch, points: points})
	return w.writable(w.epoch)
}

// last is next once no request is accepted any more (Run's
// subscriptions are closed, its queue drained): the points read now,
// which take in every request accepted, are writable with the others
// once no request of theirs or before is left, the current epoch
// included. The requests still counted are those dropped as Run
// stopped, and those kept aside for another replica.
func (w *watermark) last(points map[string]nostr.Timestamp) map[string]nostr.Timestamp {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.epoch++
	w.marks = append(w.marks, mark{epoch: w.epoch, points: points})
	return w.writable(w.epoch + 1)
}

// writable removes and returns, merged, the marks of epochs before ended
// that no request left precedes. w.mu is held.
func (w *watermark) writable(ended uint64) map[string]nostr.Timestamp {
	oldest := uint64(math.MaxUint64) // the oldest epoch with a request left
	for e := range w.open {
		oldest = min(oldest, e)
	}
	var out map[string]nostr.Timestamp
	i := 0
	for ; i < len(w.marks) && w.marks[i].epoch < ended && w.marks[i].epoch < oldest; i++ {
		// A later subscription (after one that ended) may not have
		// heard from every relay yet: each relay's newest of them all.
		for url, at := range w.marks[i].points {
			if out == nil {
				out = map[string]nostr.Timestamp{}
			}
			out[url] = max(out[url], at)
		}
	}
	w.marks = w.marks[i:]
	if n := len(w.marks) - maxMarks; n > 0 {
		w.marks = w.marks[n:]
	}
	return out
}
