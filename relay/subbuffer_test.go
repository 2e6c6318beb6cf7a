package relay

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// A relay that floods valid events of a megabyte to a subscriber that
// reads nothing fills the subscription's buffer up to
// DefaultSubscriptionBufferBytes (and one event), then the connection's
// backlog, then leaves the rest to TCP; once the subscriber reads,
// everything arrives, in order. Before, the buffer held up to 1,024
// verified events whatever their size: the heap grew by the whole flood
// (48 MB here, a gigabyte at 1,024).
func TestSlowSubscriberBoundsBufferedBytes(t *testing.T) {
	const frames = 48
	flood := make([]*nostr.Event, frames)
	for i := range flood {
		flood[i] = ptEvent(t, ptNow(), fmt.Sprintf("%03d", i)+strings.Repeat("x", wsReadLimit-2048))
	}
	sentinel := ptEvent(t, ptNow(), "sentinel")
	flooded := make(chan struct{})
	var once sync.Once
	// Made before the heap is first read: the flood is sent allocating
	// nothing (see eventFrames).
	fr := newEventFrames(t, append(flood, sentinel)...)
	bad := newHostileRelay(t, func(frame []byte, write func([]byte) error) {
		req, ok := nostr.ParseMessage(frame).(*nostr.ReqEnvelope)
		if !ok {
			return
		}
		once.Do(func() {
			for i := range flood {
				if write(fr.frame(i, req.SubscriptionID)) != nil {
					return
				}
			}
			close(flooded)
			_ = write(fr.frame(frames, req.SubscriptionID))
		})
	})
	var before, after runtime.MemStats
	_, sub, c := startCapturing(t, PoolConfig{URLs: []string{bad.url}, Logger: ptLogger(), SlowConsumerTimeout: time.Hour}, &before)
	itWaitFor(t, "the flood buffered, or the subscription and the connection holding back", func() bool {
		select {
		case <-flooded:
			if len(sub.Events()) >= frames {
				return true
			}
		default:
		}
		return sub.waits.Load() > 0 && c.stalls.Load() > 0 && c.backlog.full(MaxConnBacklog)
	})
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	t.Logf("%d events buffered, heap grew %d bytes", len(sub.Events()), grew)
	if n := len(sub.Events()); int64(n-1)*(wsReadLimit-2048) > DefaultSubscriptionBufferBytes {
		t.Errorf("%d events of a megabyte buffered, want at most %d bytes and one event", n, DefaultSubscriptionBufferBytes)
	}
	// The subscription's buffer and the event waiting for room in it, the
	// connection's backlog and the message past it, the frame being read.
	if limit := int64(DefaultSubscriptionBufferBytes + MaxConnBacklog + 6*wsReadLimit); grew > limit {
		t.Errorf("the heap grew by %d bytes while %d events of %d bytes came to a subscriber reading none, want at most %d",
			grew, frames, wsReadLimit, limit)
	}
	// The subscriber catches up: nothing was dropped.
	for _, ev := range flood {
		awaitEvent(t, sub, ev)
	}
	awaitEvent(t, sub, sentinel)
	if err := sub.Err(); err != nil {
		t.Fatalf("the subscription ended: %v", err)
	}
}

// A relay answering a query with valid events of a megabyte makes Query
// return at most DefaultQueryMaxBytes of them, with ErrQueryTruncated.
// Before, a query held up to QueryMaxEvents (10,000) events whatever
// their size: 10 GB of them, and 18 times that of events of many tags.
func TestQueryBoundsBytes(t *testing.T) {
	const frames = DefaultQueryMaxBytes/(wsReadLimit-2048) + 8
	stored := make([]*nostr.Event, frames)
	for i := range stored {
		stored[i] = ptEvent(t, ptNow(), fmt.Sprintf("%03d", i)+strings.Repeat("x", wsReadLimit-2048))
	}
	bad := newHostileRelay(t, func(frame []byte, write func([]byte) error) {
		req, ok := nostr.ParseMessage(frame).(*nostr.ReqEnvelope)
		if !ok {
			return
		}
		for _, ev := range stored {
			b, _ := nostr.EventEnvelope{SubscriptionID: &req.SubscriptionID, Event: *ev}.MarshalJSON()
			if write(b) != nil {
				return
			}
		}
		b, _ := nostr.EOSEEnvelope(req.SubscriptionID).MarshalJSON()
		_ = write(b)
	})
	// The relay sends some 72 MB: on a loaded machine that takes longer
	// than the default EOSETimeout, after which Query returns what it has
	// without an error, before the bound is reached.
	p := NewPool(PoolConfig{URLs: []string{bad.url}, Logger: ptLogger(), EOSETimeout: 10 * time.Minute})
	p.Start(t.Context())
	defer p.Close()
	itWaitFor(t, "the relay connected", func() bool { return itState(p, bad.url) == StateConnected })
	evs, err := p.Query(t.Context(), ptFilter())
	var bytes int64
	for _, ev := range evs {
		bytes += int64(len(ev.Content))
	}
	t.Logf("%d events of %d bytes of content, err %v", len(evs), bytes, err)
	if !errors.Is(err, ErrQueryTruncated) {
		t.Errorf("Query of %d events of a megabyte: err %v, want ErrQueryTruncated", frames, err)
	}
	if bytes > DefaultQueryMaxBytes {
		t.Errorf("Query returned %d events holding %d bytes, want at most %d", len(evs), bytes, DefaultQueryMaxBytes)
	}
}
