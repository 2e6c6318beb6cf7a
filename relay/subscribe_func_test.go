package relay

import (
	"fmt"
	"github.com/snapnode/snapnode/internal/testutil"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

	"github.com/nbd-wtf/go-nostr"
)

// SubscribeFunc hands each checked, deduplicated event to its function
// (nothing goes to Events), and never after the subscription is closed.
func TestPoolSubscribeFunc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a", "ws://b"}})
		if _, err := p.SubscribeFunc(t.Context(), ptFilter(), nil); err == nil {
			t.Fatal("SubscribeFunc with no function: no error")
		}
		var mu sync.Mutex
		var taken []string
		sub, err := p.SubscribeFunc(t.Context(), ptFilter(), func(ev *nostr.Event) {
			mu.Lock()
			defer mu.Unlock()
			taken = append(taken, ev.Content)
		})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		a, b := n.last(t, "ws://a"), n.last(t, "ws://b")
		good := ptEvent(t, ptNow(), "good")
		bad := ptEvent(t, ptNow(), "bad")
		bad.Sig = testutil.FlipHex(bad.Sig)
		a.event(sub.wireID, good)
		b.event(sub.wireID, good) // the same event from another relay
		a.event(sub.wireID, bad)
		synctest.Wait()
		select {
		case ev := <-sub.Events():
			t.Fatalf("an event on Events: %v", ev)
		default:
		}
		sub.Close()
		a.event(sub.wireID, ptEvent(t, ptNow(), "after close"))
		synctest.Wait()
		if _, ok := <-sub.Events(); ok {
			t.Fatal("Events not closed after Close")
		}
		mu.Lock()
		defer mu.Unlock()
		if len(taken) != 1 || taken[0] != "good" {
			t.Fatalf("taken %q, want [good]", taken)
		}
	})
}

// SubscribeGated asks Pass before checking an event: an event passed is
// verified and taken as by SubscribeFunc; one turned away goes to Aside
// unverified (a forged one too, and not counted invalid), is not marked
// delivered (another relay's copy is offered again), and never after the
// subscription is closed.
func TestPoolSubscribeGated(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a", "ws://b"}})
		pass := func(id [32]byte) bool { return id[0]%2 == 0 }
		if _, err := p.SubscribeGated(t.Context(), ptFilter(), func(*nostr.Event) {}, Gate{Pass: pass}); err == nil {
			t.Fatal("SubscribeGated with no Aside: no error")
		}
		var mu sync.Mutex
		var taken, aside []string
		sub, err := p.SubscribeGated(t.Context(), ptFilter(), func(ev *nostr.Event) {
			mu.Lock()
			defer mu.Unlock()
			taken = append(taken, ev.Content)
		}, Gate{Pass: pass, Aside: func(ev *nostr.Event) {
			mu.Lock()
			defer mu.Unlock()
			aside = append(aside, ev.Content)
		}})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		a, b := n.last(t, "ws://a"), n.last(t, "ws://b")
		// Events whose ids pass and events whose ids do not, each one
		// genuine and one forged.
		var passed, turned []*nostr.Event
		for i := 0; len(passed) < 2 || len(turned) < 2; i++ {
			ev := ptEvent(t, ptNow(), fmt.Sprintf("event %d", i))
			id, err := CheckID(ev)
			if err != nil {
				t.Fatal(err)
			}
			if pass(id) {
				passed = append(passed, ev)
			} else {
				turned = append(turned, ev)
			}
		}
		passed[1].Sig, turned[1].Sig = testutil.FlipHex(passed[1].Sig), testutil.FlipHex(turned[1].Sig)
		for _, ev := range []*nostr.Event{passed[0], passed[1], turned[0], turned[1]} {
			a.event(sub.wireID, ev)
		}
		b.event(sub.wireID, passed[0]) // delivered already: dropped
		b.event(sub.wireID, turned[0]) // not marked delivered: offered again
		synctest.Wait()
		invalid := 0
		for _, h := range p.Health() {
			invalid += int(h.EventsInvalid)
		}
		sub.Close()
		a.event(sub.wireID, turned[0])
		synctest.Wait()
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(taken, []string{passed[0].Content}) {
			t.Errorf("taken %q, want [%s]", taken, passed[0].Content)
		}
		want := []string{turned[0].Content, turned[0].Content, turned[1].Content}
		slices.Sort(want)
		slices.Sort(aside) // the relays' connections run side by side
		if !slices.Equal(aside, want) {
			t.Errorf("set aside %q, want the two turned away and the second copy of the first", aside)
		}
		if invalid != 1 {
			t.Errorf("%d events counted invalid, want 1 (the forged one passed)", invalid)
		}
	})
}

// SubscribeWith's Stored gets the events a relay brings before its stored
// events are all read, its catch-up pages' included; Take the live ones
// after.
func TestPoolSubscribeWithStored(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		n.manualPages = true
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}})
		if _, err := p.SubscribeWith(t.Context(), ptFilter(), SubscribeOptions{Stored: func(*nostr.Event) {}}); err == nil {
			t.Fatal("SubscribeWith with Stored and no Take: no error")
		}
		var x storedAndTaken
		sub, a, now := x.storedThenPaged(t, n, p)
		pages := a.pages()
		if len(pages) != 2 {
			t.Fatalf("pages asked: %+v, want two", pages)
		}
		a.event(sub.wireID, ptEvent(t, now-5, "live during the catch-up"))
		a.eose(pages[1].id) // nothing older: caught up
		synctest.Wait()
		a.event(sub.wireID, ptEvent(t, now, "live"))
		x.check(t, []string{"stored", "paged", "live during the catch-up"}, []string{"live"})
	})
}

// Once a relay's catch-up is cut (MaxCatchUpPages, or a page refused for
// good), its stored events will not all be read on this REQ: what it
// brings after is live, and goes to Take, not to Stored.
func TestPoolSubscribeWithStoredAfterACut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		n.manualPages = true
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}, MaxCatchUpPages: 1})
		var x storedAndTaken
		sub, a, now := x.storedThenPaged(t, n, p) // more to read, but no page left: cut
		if st := ptStatus(p, "ws://a"); st.CatchUpsCut != 1 {
			t.Fatalf("%d catch-ups cut, want 1", st.CatchUpsCut)
		}
		a.event(sub.wireID, ptEvent(t, now, "live"))
		x.check(t, []string{"stored", "paged"}, []string{"live"})
	})
}
