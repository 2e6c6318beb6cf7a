package snapnostr

import (
	"maps"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// The points read are written only once the epoch they were read in has
// ended and every request accepted up to then is finished; each relay
// gets the newest of the writable ones.
func TestWatermark(t *testing.T) {
	w := newWatermark()
	at := func(a, b nostr.Timestamp) map[string]nostr.Timestamp {
		m := map[string]nostr.Timestamp{"a": a}
		if b > 0 {
			m["b"] = b
		}
		return m
	}
	slow, fast := &nostr.Event{}, &nostr.Event{}
	if got := w.next(at(10, 0)); got != nil {
		t.Fatalf("the first points were written as they were read: %v", got)
	}
	if got := w.next(at(20, 0)); !maps.Equal(got, at(10, 0)) {
		t.Fatalf("no request in the epoch of the points 10: wrote %v, want them", got)
	}
	// In the epoch of the points 20: it may be one they include.
	w.accepted(slow)
	w.accepted(fast)
	w.finished(fast)
	for range 3 {
		if got := w.next(at(30, 0)); got != nil {
			t.Fatalf("a request accepted before them is not finished: wrote %v", got)
		}
	}
	w.finished(slow)
	w.finished(slow) // twice is once
	// A later subscription that has not heard from b yet: b's from the
	// older marks.
	if got := w.next(at(40, 0)); !maps.Equal(got, at(30, 0)) {
		t.Fatalf("every request finished: wrote %v, want %v", got, at(30, 0))
	}
	w.marks = nil
	w.next(at(50, 5))
	if got := w.next(at(60, 0)); !maps.Equal(got, at(50, 5)) {
		t.Fatalf("wrote %v, want %v", got, at(50, 5))
	}
	// A request never finished: the marks kept stay bounded.
	w.accepted(&nostr.Event{})
	for range 10 * maxMarks {
		w.next(at(70, 0))
	}
	if len(w.marks) > maxMarks {
		t.Fatalf("%d marks kept, want at most %d", len(w.marks), maxMarks)
	}
}

// As Run stops (last), the points read then are written at once when no
// request is left, and not at all past one left; a request kept aside
// and then taken up keeps the epoch it was kept in.
func TestWatermarkLast(t *testing.T) {
	at := func(a nostr.Timestamp) map[string]nostr.Timestamp { return map[string]nostr.Timestamp{"a": a} }
	w := newWatermark()
	w.next(at(10))
	if got := w.last(at(20)); !maps.Equal(got, at(20)) {
		t.Fatalf("no request left: wrote %v, want the points read as Run stopped", got)
	}

	w = newWatermark()
	dropped := &nostr.Event{}
	w.accepted(dropped) // dropped as Run stopped: never finished
	w.next(at(10))
	if got := w.last(at(20)); got != nil {
		t.Fatalf("a request dropped is left: wrote %v", got)
	}

	w = newWatermark()
	w.next(at(10))
	d, ev := &deferral{}, &nostr.Event{}
	w.accepted(d) // kept aside in the epoch of the points 10
	w.next(at(20))
	w.next(at(30))
	w.handOver(d, ev) // taken up two epochs later
	w.finished(d)     // counted as ev now: a no-op
	if got := w.next(at(40)); got != nil {
		t.Fatalf("a request taken up is left: wrote %v", got)
	}
	w.finished(ev)
	if got := w.last(at(50)); !maps.Equal(got, at(50)) {
		t.Fatalf("every request finished: wrote %v, want %v", got, at(50))
	}

	// Handed over to a request counted already: the older epoch holds,
	// and one finish ends it.
	w = newWatermark()
	w.accepted(ev)
	w.next(at(10))
	w.accepted(d)
	w.handOver(d, ev)
	w.finished(ev)
	if got := w.last(at(20)); !maps.Equal(got, at(20)) {
		t.Fatalf("wrote %v, want %v", got, at(20))
	}
}
