package relay

import (
	"maps"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// pages returns the REQs of catch-up pages a connection got, in order.
func (c *ptConn) pages() []ptFrame {
	var out []ptFrame
	for _, f := range c.reqs() {
		if !f.close && strings.Contains(f.id, pageSep) {
			out = append(out, f)
		}
	}
	return out
}

func eoseClosed(s *Subscription) bool {
	synctest.Wait()
	select {
	case <-s.EOSE():
		return true
	default:
		return false
	}
}

// ptLive has the relay a send a live event on sub's own REQ and checks
// that it is delivered at once; it returns the event.
func ptLive(t *testing.T, a *ptConn, sub *Subscription) *nostr.Event {
	t.Helper()
	live := ptEvent(t, ptNow(), "live")
	a.event(sub.wireID, live)
	if ev := ptRecv(t, sub); ev.ID != live.ID {
		t.Fatalf("got %q, want the live event", ev.Content)
	}
	return live
}

// catchUpFixture subscribes from an hour ago on one relay whose pages
// the test answers, and has it send two stored events and EOSE, as a
// relay capping a REQ's stored events at 2 would.
func catchUpFixture(t *testing.T, cfg PoolConfig) (*ptNet, *Subscription, *ptConn, [3]*nostr.Event) {
	n := newPTNet()
	n.manualPages = true
	cfg.URLs = []string{"ws://a"}
	p := newPTPool(t, n, cfg)
	now := ptNow()
	since := now - 3600
	f := ptFilter()
	f.Since = &since
	sub, err := p.Subscribe(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	a := n.last(t, "ws://a")
	evs := [3]*nostr.Event{ptEvent(t, now-30, "s1"), ptEvent(t, now-20, "s2"), ptEvent(t, now-10, "s3")}
	a.event(sub.wireID, evs[2])
	a.event(sub.wireID, evs[1])
	a.eose(sub.wireID)
	for _, want := range []*nostr.Event{evs[2], evs[1]} {
		if ev := ptRecv(t, sub); ev.ID != want.ID {
			t.Fatalf("got %q, want %q", ev.Content, want.Content)
		}
	}
	return n, sub, a, evs
}

// The stored events are paged back before the relay's point moves; live
// events are delivered meanwhile, at once, and count once the catch-up
// ends.
func TestPoolCatchUpPagesBackAndDeliversLiveEventsMeanwhile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sub, a, evs := catchUpFixture(t, PoolConfig{})
		pages := a.pages()
		if len(pages) != 1 || pages[0].f.Until == nil || *pages[0].f.Until != evs[1].CreatedAt ||
			pages[0].f.Since == nil || *pages[0].f.Since != *sub.filter.Since {
			t.Fatalf("pages asked: %+v, want one with the REQ's since and until %d", pages, evs[1].CreatedAt)
		}
		if eoseClosed(sub) {
			t.Fatal("EOSE before the catch-up ended")
		}

		live := ptLive(t, a, sub)
		if got := sub.Resume(); len(got) != 0 {
			t.Fatalf("Resume = %v while the catch-up goes on, want none", got)
		}

		// The page: the oldest second again, and one older event.
		p1 := pages[0].id
		a.event(p1, evs[1])
		a.event(p1, evs[0])
		a.eose(p1)
		if ev := ptRecv(t, sub); ev.ID != evs[0].ID {
			t.Fatalf("got %q, want s1", ev.Content)
		}
		ptNone(t, sub)
		if !a.closedSub(p1) {
			t.Fatal("the first page was not closed after its EOSE")
		}
		pages = a.pages()
		if len(pages) != 2 || *pages[1].f.Until != evs[0].CreatedAt {
			t.Fatalf("pages asked: %+v, want a second one until %d", pages, evs[0].CreatedAt)
		}
		// It brings nothing older: the relay is caught up.
		a.event(pages[1].id, evs[0])
		a.eose(pages[1].id)
		ptNone(t, sub)
		if !eoseClosed(sub) {
			t.Fatal("no EOSE after the catch-up")
		}
		want := map[string]nostr.Timestamp{"ws://a": live.CreatedAt}
		if got := sub.Resume(); !maps.Equal(got, want) {
			t.Fatalf("Resume = %v, want %v", got, want)
		}
		if st := ptStatus(sub.p, "ws://a"); st.CatchUpPages != 2 || st.CatchUpsCut != 0 {
			t.Fatalf("health: %d pages, %d cut; want 2, 0", st.CatchUpPages, st.CatchUpsCut)
		}
		if len(a.pages()) != 2 {
			t.Fatalf("pages asked: %+v, want no third", a.pages())
		}
	})
}

// A catch-up that reaches MaxCatchUpPages stops, and the relay's point
// stays where it was: after a reconnect the relay is asked from there
// again, not from the newest event it brought.
func TestPoolCatchUpCutAtTheBoundKeepsThePoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n, sub, a, evs := catchUpFixture(t, PoolConfig{MaxCatchUpPages: 1})
		p1 := a.pages()[0].id
		a.event(p1, evs[0])
		a.eose(p1)
		ptRecv(t, sub)
		if !eoseClosed(sub) {
			t.Fatal("no EOSE after the catch-up was cut")
		}
		if len(a.pages()) != 1 {
			t.Fatalf("pages asked: %+v, want 1", a.pages())
		}
		ptLive(t, a, sub)
		if got := sub.Resume(); len(got) != 0 {
			t.Fatalf("Resume = %v after a cut catch-up, want none", got)
		}
		if st := ptStatus(sub.p, "ws://a"); st.CatchUpsCut != 1 {
			t.Fatalf("%d catch-ups cut, want 1", st.CatchUpsCut)
		}

		a2 := ptReconnect(t, n, a, 2*time.Second)
		if got := a2.lastReq(t, sub.wireID); got.Since == nil || *got.Since != *sub.filter.Since {
			t.Fatalf("resubscribed with %v, want the first since %d", got, *sub.filter.Since)
		}
	})
}

// A relay that refuses a page for good (CLOSED, blocked:) ends the
// catch-up as the bound does; the subscription's own REQ stays open.
func TestPoolCatchUpPageRefusedKeepsThePoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sub, a, _ := catchUpFixture(t, PoolConfig{})
		a.send(ConnMessage{Label: "CLOSED", SubID: a.pages()[0].id, Reason: "blocked: no paging here"})
		if !eoseClosed(sub) {
			t.Fatal("no EOSE after the page was refused")
		}
		if got := sub.Resume(); len(got) != 0 {
			t.Fatalf("Resume = %v, want none", got)
		}
		if st := ptStatus(sub.p, "ws://a"); st.CatchUpsCut != 1 {
			t.Fatalf("%d catch-ups cut, want 1", st.CatchUpsCut)
		}
		ptLive(t, a, sub)
		if a.closedSub(sub.wireID) {
			t.Fatal("the subscription's own REQ was closed")
		}
	})
}

// A subscription closed while a page is awaited closes the page too.
func TestPoolCatchUpPageClosedWithTheSubscription(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sub, a, _ := catchUpFixture(t, PoolConfig{})
		sub.Close()
		synctest.Wait()
		if p1 := a.pages()[0].id; !a.closedSub(p1) || !a.closedSub(sub.wireID) {
			t.Fatalf("frames %+v: want both the page and the REQ closed", a.reqs())
		}
	})
}

// What asks for the newest stored events is not paged: a first REQ with
// a limit, and a Query.
func TestPoolCatchUpNotForLimitsNorQueries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		n.manualPages = true
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}})
		a := n.last(t, "ws://a")
		since := ptNow() - 3600
		f := ptFilter()
		f.Since, f.Limit = &since, 1
		sub, _ := p.Subscribe(t.Context(), f)
		synctest.Wait()
		a.event(sub.wireID, ptEvent(t, ptNow()-10, "newest"))
		a.eose(sub.wireID)
		ptRecv(t, sub)

		f.Limit = 0
		done := make(chan error, 1)
		go func() { _, err := p.Query(t.Context(), f); done <- err }()
		synctest.Wait()
		fs := a.reqs()
		qid := fs[len(fs)-1].id
		a.event(qid, ptEvent(t, ptNow()-10, "newest"))
		a.eose(qid)
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if pages := a.pages(); len(pages) != 0 {
			t.Fatalf("pages asked: %+v", pages)
		}
		if !eoseClosed(sub) {
			t.Fatal("no EOSE")
		}
	})
}

// A relay that answers every page with the REQ's own events, its until
// ignored, costs at most two pages: the second, from the second before
// the oldest (the first page was as full as the REQ, all of that
// second), brings nothing older than its until either. The point then
// moves: the relay withheld the rest, as a relay may.
func TestPoolCatchUpRelayRepeatingItselfIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sub, a, evs := catchUpFixture(t, PoolConfig{})
		for i := 0; i < 4 && !eoseClosed(sub); i++ {
			pages := a.pages()
			if len(pages) == 0 {
				t.Fatal("no page asked")
			}
			p := pages[len(pages)-1].id
			a.event(p, evs[2])
			a.event(p, evs[1])
			a.eose(p)
		}
		if !eoseClosed(sub) {
			t.Fatalf("no EOSE after %d pages", len(a.pages()))
		}
		if n := len(a.pages()); n != 2 {
			t.Fatalf("%d pages asked, want 2", n)
		}
		if u := a.pages()[1].f.Until; u == nil || *u != evs[1].CreatedAt-1 {
			t.Fatalf("second page until %v, want %d", u, evs[1].CreatedAt-1)
		}
		ptNone(t, sub)
		want := map[string]nostr.Timestamp{"ws://a": evs[2].CreatedAt}
		if got := sub.Resume(); !maps.Equal(got, want) {
			t.Fatalf("Resume = %v, want %v", got, want)
		}
	})
}

// A relay that refuses a page for a while (its cap on open subscriptions,
// a rate limit) is asked for it again after a backoff, as for a REQ, and
// the catch-up ends: before, the refusal cut it, and the relay's point
// stayed where it was for as long as the connection lasted (days, on a
// healthy relay), so that every restart read the whole gap again, until
// it outgrew the bound of pages and the point never moved again.
func TestPoolCatchUpPageRefusedForAWhileIsAskedAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sub, a, evs := catchUpFixture(t, PoolConfig{})
		first := a.pages()[0]
		a.send(ConnMessage{Label: "CLOSED", SubID: first.id, Reason: "rate-limited: too many open subscriptions"})
		a.eose(first.id) // a buggy relay's, after its CLOSED: it ends nothing
		synctest.Wait()
		if got := sub.Resume(); len(got) != 0 {
			t.Fatalf("Resume = %v after a page refused, want none", got)
		}
		if eoseClosed(sub) {
			t.Fatal("EOSE after a page refused for a while")
		}
		time.Sleep(time.Second) // BackoffBase
		synctest.Wait()
		pages := a.pages()
		if len(pages) != 2 || pages[1].id == first.id || pages[1].f.Until == nil || *pages[1].f.Until != *first.f.Until {
			t.Fatalf("pages asked: %+v, want the refused one asked again under a new id", pages)
		}
		a.event(pages[1].id, evs[0])
		a.eose(pages[1].id)
		ptRecv(t, sub)
		pages = a.pages()
		if len(pages) != 3 {
			t.Fatalf("pages asked: %+v, want a third", pages)
		}
		a.eose(pages[2].id)
		if !eoseClosed(sub) {
			t.Fatal("no EOSE after the catch-up")
		}
		want := map[string]nostr.Timestamp{"ws://a": evs[2].CreatedAt}
		if got := sub.Resume(); !maps.Equal(got, want) {
			t.Fatalf("Resume = %v, want %v", got, want)
		}
		if st := ptStatus(sub.p, "ws://a"); st.CatchUpsCut != 0 {
			t.Fatalf("%d catch-ups cut, want none", st.CatchUpsCut)
		}
	})
}

// A page refused again and again is asked for at most MaxCatchUpPages
// times in all, ever more slowly: then the catch-up is cut. (The relay
// refuses each at once: a page it left unanswered for EOSETimeout would
// cut the catch-up by itself.)
func TestPoolCatchUpPageRefusedAgainAndAgainIsBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sub, a, _ := catchUpFixture(t, PoolConfig{MaxCatchUpPages: 4})
		for i := 0; i < 10; i++ {
			pages := a.pages()
			a.send(ConnMessage{Label: "CLOSED", SubID: pages[len(pages)-1].id, Reason: "rate-limited: slow down"})
			for range 60 { // until it is asked again, if it is
				time.Sleep(time.Second)
				synctest.Wait()
				if len(a.pages()) > len(pages) {
					break
				}
			}
		}
		if n := len(a.pages()); n != 4 {
			t.Fatalf("%d pages asked, want 4", n)
		}
		if !eoseClosed(sub) {
			t.Fatal("no EOSE after the catch-up was cut")
		}
		if st := ptStatus(sub.p, "ws://a"); st.CatchUpsCut != 1 {
			t.Fatalf("%d catch-ups cut, want 1", st.CatchUpsCut)
		}
	})
}

// A pool closed while a page is awaited, or while a refused one waits to
// be asked again, leaves no goroutine behind (the bubble would not end)
// and asks nothing more.
func TestPoolClosedMidCatchUp(t *testing.T) {
	for _, refused := range []bool{false, true} {
		synctest.Test(t, func(t *testing.T) {
			_, sub, a, _ := catchUpFixture(t, PoolConfig{})
			if refused {
				a.send(ConnMessage{Label: "CLOSED", SubID: a.pages()[0].id, Reason: "rate-limited: later"})
				synctest.Wait()
			}
			sub.p.Close()
			synctest.Wait()
			time.Sleep(time.Minute)
			synctest.Wait()
			if n := len(a.pages()); n != 1 {
				t.Fatalf("%d pages asked, want 1", n)
			}
			select {
			case <-sub.EOSE():
			default:
				t.Fatal("EOSE not closed with the pool")
			}
		})
	}
}

// A relay that closes each subscription after its EOSE (its REQ is asked
// again after a backoff) still answers the pages meanwhile, and the
// catch-up goes on with them. Before, a page's EOSE after that CLOSED
// asked for no next page: the catch-up began again from the same point
// with the REQ asked again, which the relay closed again, and a backlog
// longer than the relay's cap never let the relay's point move.
func TestPoolCatchUpGoesOnAfterTheREQIsClosed(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sub, a, evs := catchUpFixture(t, PoolConfig{})
		a.send(ConnMessage{Label: "CLOSED", SubID: sub.wireID, Reason: "rate-limited: one at a time"})
		synctest.Wait()
		p1 := a.pages()[0].id
		a.event(p1, evs[0])
		a.eose(p1)
		ptRecv(t, sub)
		pages := a.pages()
		if len(pages) != 2 {
			t.Fatalf("pages asked: %+v, want a second one", pages)
		}
		a.eose(pages[1].id)
		synctest.Wait()
		want := map[string]nostr.Timestamp{"ws://a": evs[2].CreatedAt}
		if got := sub.Resume(); !maps.Equal(got, want) {
			t.Fatalf("Resume = %v, want %v", got, want)
		}
		// The REQ asked again, from the point.
		time.Sleep(time.Second)
		synctest.Wait()
		if f := a.lastReq(t, sub.wireID); f.Since == nil || *f.Since != evs[2].CreatedAt-sub.p.skew() {
			t.Fatalf("REQ asked again with %v, want a since from the newest event", f)
		}
	})
}

// A subscription closed while its REQ waits to be asked again after a
// CLOSED closes its open page too.
func TestPoolCatchUpPageClosedWhileTheREQWaits(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sub, a, _ := catchUpFixture(t, PoolConfig{})
		a.send(ConnMessage{Label: "CLOSED", SubID: sub.wireID, Reason: "rate-limited: one at a time"})
		synctest.Wait()
		sub.Close()
		synctest.Wait()
		if p1 := a.pages()[0].id; !a.closedSub(p1) {
			t.Fatalf("frames %+v: want the page closed", a.reqs())
		}
	})
}
