package relay

import (
	"errors"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// A relay's resume point takes in only the events handed over: one the
// relay brought as the subscription closed, and dropped for it, is not
// passed. Before, the point moved as the event was received, before its
// hand-over to take: a subscriber that kept the point (an inbox, across
// a restart) never asked that relay for the event again.
func TestPoolResumeStaysBehindADeliveryDroppedAsTheSubscriptionCloses(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}})
		var sub atomic.Pointer[Subscription]
		var taken []*nostr.Event
		// The gate closes the subscription as the second event comes, after
		// the relay brought it and before its hand-over.
		var seen atomic.Int32
		s, err := p.SubscribeGated(t.Context(), ptFilter(), func(ev *nostr.Event) { taken = append(taken, ev) },
			Gate{Pass: func([32]byte) bool {
				if seen.Add(1) == 2 {
					sub.Load().Close()
				}
				return true
			}, Aside: func(*nostr.Event) {}})
		if err != nil {
			t.Fatal(err)
		}
		sub.Store(s)
		synctest.Wait()
		a := n.last(t, "ws://a")
		a.eose(s.wireID)
		e1, e2 := ptEvent(t, ptNow()-60, "e1"), ptEvent(t, ptNow()-30, "e2")
		a.event(s.wireID, e1)
		a.event(s.wireID, e2)
		synctest.Wait()
		if len(taken) != 1 || taken[0].ID != e1.ID {
			t.Fatalf("taken %d events, want e1 alone", len(taken))
		}
		if got := s.Resume()["ws://a"]; got != e1.CreatedAt {
			t.Fatalf("point %d after the subscription closed, want %d (e1, the last handed over; e2 at %d was dropped)",
				got, e1.CreatedAt, e2.CreatedAt)
		}
	})
}

// An event dropped under the slow-consumer policy is not passed by any
// relay's point: neither by that of the relay whose copy was dropped, nor
// by that of another relay whose copy of it came while the first waited
// for room (a duplicate then, which moved its relay's point).
func TestPoolResumeStaysBehindAnEventDroppedForASlowConsumer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a", "ws://b"}, SubscriptionBuffer: 1, SlowConsumerTimeout: time.Second})
		s, err := p.Subscribe(t.Context(), ptFilter())
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		a, b := n.last(t, "ws://a"), n.last(t, "ws://b")
		a.eose(s.wireID)
		b.eose(s.wireID)
		e1, e2 := ptEvent(t, ptNow()-60, "e1"), ptEvent(t, ptNow()-30, "e2")
		a.event(s.wireID, e1) // fills the buffer
		a.event(s.wireID, e2) // waits for room
		synctest.Wait()
		b.event(s.wireID, e2) // a duplicate of the copy waiting
		time.Sleep(time.Second)
		synctest.Wait()
		if !errors.Is(s.Err(), ErrSlowConsumer) {
			t.Fatalf("Err %v, want the slow consumer's", s.Err())
		}
		points := s.Resume()
		if got := points["ws://a"]; got != e1.CreatedAt {
			t.Fatalf("A's point %d, want %d (e1, the last sent; e2 at %d was dropped)", got, e1.CreatedAt, e2.CreatedAt)
		}
		if got := points["ws://b"]; got >= e2.CreatedAt {
			t.Fatalf("B's point %d takes in e2 (%d), which was dropped", got, e2.CreatedAt)
		}
		if ev := <-s.Events(); ev.ID != e1.ID {
			t.Fatalf("buffered %q, want e1", ev.Content)
		}
	})
}

// Starts tells where each relay began: its own Since (under any spelling
// of its URL), else the filter's; a relay with neither is left out.
func TestSubscriptionStarts(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a", "ws://b"}})
		since := ptNow() - 60
		f := ptFilter()
		f.Since = &since
		s, err := p.SubscribeWith(t.Context(), f, SubscribeOptions{Since: map[string]nostr.Timestamp{"WS://A/": since - 600}})
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Starts(); len(got) != 2 || got["ws://a"] != since-600 || got["ws://b"] != since {
			t.Fatalf("Starts %v, want ws://a at %d and ws://b at %d", got, since-600, since)
		}
		s.Close()
		s, err = p.Subscribe(t.Context(), ptFilter())
		if err != nil {
			t.Fatal(err)
		}
		if got := s.Starts(); len(got) != 0 {
			t.Fatalf("Starts %v with no Since, want none", got)
		}
	})
}

// A relay's stored events that come after the subscription ended are
// dropped unhanded, and its EOSE then read does not move its point past
// them. end marks the subscription ended before it is taken out of the
// pool's table: the relay's reader may handle both meanwhile (the test
// stops end there).
func TestPoolResumeStaysBehindAStoredEventDroppedAsTheSubscriptionEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}})
		s, err := p.Subscribe(t.Context(), ptFilter())
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		a := n.last(t, "ws://a")
		e3, e2 := ptEvent(t, ptNow()-30, "e3"), ptEvent(t, ptNow()-60, "e2")
		a.event(s.wireID, e3) // stored events come newest first
		ptRecv(t, s)
		// end's first step: the subscription is ended, still in p.subs.
		s.doneOnce.Do(func() { s.err = ErrSubscriptionClosed; close(s.done) })
		a.event(s.wireID, e2) // dropped: the subscription ended
		a.eose(s.wireID)
		synctest.Wait()
		if got := s.Resume()["ws://a"]; got >= e2.CreatedAt {
			t.Fatalf("point %d passes e2 (%d), dropped as the subscription ended", got, e2.CreatedAt)
		}
	})
}
