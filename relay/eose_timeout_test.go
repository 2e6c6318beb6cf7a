package relay

import (
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/testutil"
)

// eoseLateWarnings returns the warnings logged about a relay whose EOSE
// did not come in time.
func eoseLateWarnings(h *testutil.Records) int {
	n := 0
	for _, r := range h.All() {
		if r.Level == slog.LevelWarn && strings.Contains(r.Message, "no EOSE") {
			n++
		}
	}
	return n
}

// newLoggedPTPool is newPTPool with the pool's log kept in h.
func newLoggedPTPool(t *testing.T, n *ptNet, cfg PoolConfig, h *testutil.Records) *Pool {
	t.Helper()
	cfg.Dial, cfg.Logger = n.dial, slog.New(h)
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase, cfg.BackoffMax = time.Second, 8*time.Second
	}
	p := NewPool(cfg)
	p.Start(t.Context())
	t.Cleanup(func() { p.Close() })
	synctest.Wait()
	return p
}

// storedAndTaken subscribes with SubscribeWith from since on ws://a and
// records what Stored and Take get.
type storedAndTaken struct {
	mu            sync.Mutex
	stored, taken []string
}

func (x *storedAndTaken) subscribe(t *testing.T, p *Pool, since nostr.Timestamp) *Subscription {
	t.Helper()
	sub, err := p.SubscribeWith(t.Context(), ptFilter(), SubscribeOptions{
		Since: map[string]nostr.Timestamp{"ws://a": since},
		Take: func(ev *nostr.Event) {
			x.mu.Lock()
			defer x.mu.Unlock()
			x.taken = append(x.taken, ev.Content)
		},
		Stored: func(ev *nostr.Event) {
			x.mu.Lock()
			defer x.mu.Unlock()
			x.stored = append(x.stored, ev.Content)
		}})
	if err != nil {
		t.Fatal(err)
	}
	synctest.Wait()
	return sub
}

// storedThenPaged subscribes from an hour ago on p, whose relay ws://a
// (on n, its pages answered by the test) sends one stored event,
// "stored", and its EOSE, is asked one catch-up page, and answers it with
// one older event, "paged", and EOSE. It returns the subscription, the
// relay's connection and the time the events are dated from.
func (x *storedAndTaken) storedThenPaged(t *testing.T, n *ptNet, p *Pool) (*Subscription, *ptConn, nostr.Timestamp) {
	t.Helper()
	now := ptNow()
	sub := x.subscribe(t, p, now-3600)
	a := n.last(t, "ws://a")
	a.event(sub.wireID, ptEvent(t, now-10, "stored"))
	a.eose(sub.wireID)
	synctest.Wait()
	pages := a.pages()
	if len(pages) != 1 {
		t.Fatalf("pages asked: %+v, want one", pages)
	}
	a.event(pages[0].id, ptEvent(t, now-20, "paged"))
	a.eose(pages[0].id)
	synctest.Wait()
	return sub, a, now
}

func (x *storedAndTaken) check(t *testing.T, stored, taken []string) {
	t.Helper()
	synctest.Wait()
	x.mu.Lock()
	defer x.mu.Unlock()
	if !slices.Equal(x.stored, stored) {
		t.Errorf("Stored got %q, want %q", x.stored, stored)
	}
	if !slices.Equal(x.taken, taken) {
		t.Errorf("Take got %q, want %q", x.taken, taken)
	}
}

// A relay that sends stored events for a REQ and never its EOSE is cut,
// as a catch-up stopped at the bound of pages is, once EOSETimeout has
// passed: logged once, counted, its later events go to Take, and its
// point stays where it was. Before, it stayed "stored" for the whole
// connection: everything it brought went to Stored (the inbox's backlog,
// bounded), uncounted, and it was asked from the same point ever after.
func TestPoolRelayWithoutEOSEIsCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		n.manualPages = true
		h := &testutil.Records{}
		p := newLoggedPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}, EOSETimeout: 10 * time.Second}, h)
		var x storedAndTaken
		now := ptNow()
		since := now - 3600
		sub := x.subscribe(t, p, since)
		a := n.last(t, "ws://a")
		a.event(sub.wireID, ptEvent(t, now-10, "stored 2"))
		a.event(sub.wireID, ptEvent(t, now-20, "stored 1"))
		time.Sleep(9 * time.Second)
		synctest.Wait()
		x.check(t, []string{"stored 2", "stored 1"}, nil)
		if st := ptStatus(p, "ws://a"); st.CatchUpsCut != 0 {
			t.Fatalf("%d catch-ups cut before EOSETimeout, want none", st.CatchUpsCut)
		}

		// cutOnce lets d pass and checks that the relay was cut once and
		// its missing EOSE logged once.
		cutOnce := func(d time.Duration, when string) {
			t.Helper()
			time.Sleep(d)
			synctest.Wait()
			if st := ptStatus(p, "ws://a"); st.CatchUpsCut != 1 {
				t.Fatalf("%d catch-ups cut %s, want 1", st.CatchUpsCut, when)
			}
			if n := eoseLateWarnings(h); n != 1 {
				t.Fatalf("%d warnings of the missing EOSE %s, want 1", n, when)
			}
		}
		cutOnce(time.Second, "after EOSETimeout without EOSE")
		if !eoseClosed(sub) {
			t.Fatal("EOSE not closed")
		}
		a.event(sub.wireID, ptEvent(t, now, "live"))
		x.check(t, []string{"stored 2", "stored 1"}, []string{"live"})
		if got := sub.Resume(); len(got) != 0 {
			t.Fatalf("Resume = %v, want none: the stored events were not all read", got)
		}

		// Neither counted nor logged again on this connection.
		cutOnce(time.Minute, "a minute later")

		// The next connection reads from the first point again.
		a2 := ptReconnect(t, n, a, 2*time.Second)
		if got := a2.lastReq(t, sub.wireID); got.Since == nil || *got.Since != since {
			t.Fatalf("resubscribed with %v, want since %d", got, since)
		}
	})
}

// A relay that had a point, back from an outage and sending stored events
// without an EOSE, is cut; its live events after the cut go to Take but
// leave its point where it was: stored events older than them may not
// have been read, and a point moved past them would skip them for good.
func TestPoolRelayWithoutEOSEKeepsItsPoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet() // pages answered with EOSE alone
		h := &testutil.Records{}
		p := newLoggedPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}}, h)
		var x storedAndTaken
		now := ptNow()
		sub := x.subscribe(t, p, now-3600)
		a := n.last(t, "ws://a")
		a.event(sub.wireID, ptEvent(t, now-100, "first"))
		a.eose(sub.wireID)
		synctest.Wait()
		want := map[string]nostr.Timestamp{"ws://a": now - 100}
		if got := sub.Resume(); !maps.Equal(got, want) {
			t.Fatalf("Resume = %v, want %v", got, want)
		}

		a2 := ptReconnect(t, n, a, 2*time.Second)
		a2.event(sub.wireID, ptEvent(t, now-50, "missed"))
		time.Sleep(DefaultEOSETimeout)
		synctest.Wait()
		if st := ptStatus(p, "ws://a"); st.CatchUpsCut != 1 {
			t.Fatalf("%d catch-ups cut, want 1", st.CatchUpsCut)
		}
		a2.event(sub.wireID, ptEvent(t, ptNow(), "live"))
		x.check(t, []string{"first", "missed"}, []string{"live"})
		if got := sub.Resume(); !maps.Equal(got, want) {
			t.Fatalf("Resume = %v after live events of a cut relay, want %v", got, want)
		}
	})
}

// A catch-up page whose EOSE does not come within EOSETimeout cuts the
// catch-up: the page is closed, the cut counted, the point kept.
func TestPoolCatchUpPageWithoutEOSEIsCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		_, sub, a, evs := catchUpFixture(t, PoolConfig{})
		p1 := a.pages()[0].id
		a.event(p1, evs[0])
		if ev := ptRecv(t, sub); ev.ID != evs[0].ID {
			t.Fatalf("got %q, want s1", ev.Content)
		}
		if eoseClosed(sub) {
			t.Fatal("EOSE before the page's")
		}
		time.Sleep(DefaultEOSETimeout)
		synctest.Wait()
		if st := ptStatus(sub.p, "ws://a"); st.CatchUpsCut != 1 || st.CatchUpPages != 1 {
			t.Fatalf("health: %d pages, %d cut; want 1, 1", st.CatchUpPages, st.CatchUpsCut)
		}
		if !a.closedSub(p1) {
			t.Fatal("the page without EOSE was not closed")
		}
		if a.closedSub(sub.wireID) {
			t.Fatal("the subscription's own REQ was closed")
		}
		if !eoseClosed(sub) {
			t.Fatal("EOSE not closed")
		}
		ptLive(t, a, sub)
		if got := sub.Resume(); len(got) != 0 {
			t.Fatalf("Resume = %v, want none", got)
		}
		// A late EOSE changes nothing.
		a.eose(p1)
		synctest.Wait()
		if len(a.pages()) != 1 {
			t.Fatalf("pages asked: %+v, want 1", a.pages())
		}
		if got := sub.Resume(); len(got) != 0 {
			t.Fatalf("Resume = %v after a late EOSE, want none", got)
		}
	})
}

// Relays that answer in time are not cut, however long the catch-up
// takes in all, nor while a REQ or page they refused for a while waits to
// be asked again.
func TestPoolEOSETimeoutSparesRelaysThatAnswer(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cfg := PoolConfig{BackoffBase: 30 * time.Second, BackoffMax: time.Hour}
		_, sub, a, evs := catchUpFixture(t, cfg) // its REQ's EOSE came
		time.Sleep(DefaultEOSETimeout / 2)
		a.send(ConnMessage{Label: "CLOSED", SubID: a.pages()[0].id, Reason: "rate-limited: later"})
		time.Sleep(20 * time.Second) // the page waits to be asked again
		synctest.Wait()
		if st := ptStatus(sub.p, "ws://a"); st.CatchUpsCut != 0 {
			t.Fatalf("%d catch-ups cut while a refused page waits, want none", st.CatchUpsCut)
		}
		time.Sleep(15 * time.Second)
		synctest.Wait()
		pages := a.pages()
		if len(pages) != 2 {
			t.Fatalf("pages asked: %+v, want the refused one again", pages)
		}
		time.Sleep(3 * time.Second) // asked again 8 s ago
		a.event(pages[1].id, evs[0])
		a.eose(pages[1].id)
		synctest.Wait()
		pages = a.pages()
		if len(pages) != 3 {
			t.Fatalf("pages asked: %+v, want a third", pages)
		}
		time.Sleep(DefaultEOSETimeout - time.Second)
		a.eose(pages[2].id)
		ptRecv(t, sub)
		if !eoseClosed(sub) {
			t.Fatal("no EOSE after the catch-up")
		}

		time.Sleep(time.Hour)
		synctest.Wait()
		if st := ptStatus(sub.p, "ws://a"); st.CatchUpsCut != 0 {
			t.Fatalf("%d catch-ups cut, want none", st.CatchUpsCut)
		}
	})
}

// A REQ the relay refuses for a while, asked again after a backoff
// longer than EOSETimeout, is not cut meanwhile.
func TestPoolEOSETimeoutSparesARefusedREQ(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}, BackoffBase: 30 * time.Second, BackoffMax: time.Hour})
		sub, err := p.Subscribe(t.Context(), ptFilter())
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		a := n.last(t, "ws://a")
		a.send(ConnMessage{Label: "CLOSED", SubID: sub.wireID, Reason: "rate-limited: one at a time"})
		time.Sleep(31 * time.Second)
		synctest.Wait()
		if len(a.reqs()) != 2 {
			t.Fatalf("frames %+v, want the REQ asked again", a.reqs())
		}
		if st := ptStatus(p, "ws://a"); st.CatchUpsCut != 0 {
			t.Fatalf("%d catch-ups cut while the REQ waited, want none", st.CatchUpsCut)
		}
		time.Sleep(DefaultEOSETimeout - 2*time.Second) // asked again 1 s ago
		a.eose(sub.wireID)
		time.Sleep(time.Hour)
		synctest.Wait()
		if st := ptStatus(p, "ws://a"); st.CatchUpsCut != 0 {
			t.Fatalf("%d catch-ups cut, want none", st.CatchUpsCut)
		}
	})
}

// The timers awaiting an EOSE stop with what they serve: the pool, the
// connection, the subscription.
func TestPoolEOSETimersStopWithTheirOwner(t *testing.T) {
	ends := map[string]func(a *ptConn, sub *Subscription){
		"pool closed":         func(_ *ptConn, sub *Subscription) { sub.p.Close() },
		"subscription closed": func(_ *ptConn, sub *Subscription) { sub.Close() },
		"connection dropped":  func(a *ptConn, _ *Subscription) { a.drop(ErrConnClosed) },
	}
	for how, end := range ends {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				cfg := PoolConfig{BackoffBase: time.Hour, BackoffMax: time.Hour}
				_, sub, a, _ := catchUpFixture(t, cfg) // a page awaited
				r := sub.p.relays[0]
				if n := r.eoseTimers.Load(); n != 1 {
					t.Fatalf("%d EOSE timers while a page is awaited, want 1", n)
				}
				end(a, sub)
				synctest.Wait()
				if n := r.eoseTimers.Load(); n != 0 {
					t.Fatalf("%d EOSE timers left after the %s, want none", n, how)
				}
			})
		})
	}
}

// A relay slow to send its stored events, but sending them, is not cut:
// its EOSE is awaited EOSETimeout from the last event it brought, not
// from the REQ. With the timeout counted from the REQ, one that streams
// its stored events for longer than EOSETimeout was cut although it
// answered in full.
func TestPoolRelayStillSendingStoredEventsIsNotCut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		h := &testutil.Records{}
		p := newLoggedPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}, EOSETimeout: 10 * time.Second}, h)
		var x storedAndTaken
		now := ptNow()
		sub := x.subscribe(t, p, now-3600)
		a := n.last(t, "ws://a")
		var want []string
		for i := range 6 { // one every 6 s: 36 s in all
			time.Sleep(6 * time.Second)
			c := "stored " + string(rune('a'+i))
			a.event(sub.wireID, ptEvent(t, now-100+nostr.Timestamp(i), c))
			want = append(want, c)
		}
		synctest.Wait()
		if st := ptStatus(p, "ws://a"); st.CatchUpsCut != 0 {
			t.Fatalf("%d catch-ups cut while the relay was still sending its stored events, want none", st.CatchUpsCut)
		}
		a.eose(sub.wireID)
		synctest.Wait() // the page asked after it answered: caught up
		a.event(sub.wireID, ptEvent(t, now, "live"))
		x.check(t, want, []string{"live"})
		if st := ptStatus(p, "ws://a"); st.CatchUpsCut != 0 || eoseLateWarnings(h) != 0 {
			t.Fatalf("%d catch-ups cut, %d warnings, want none", st.CatchUpsCut, eoseLateWarnings(h))
		}

		// Once it stops sending, the wait runs out from its last event.
		sub2 := x.subscribe(t, p, now-3600)
		a.event(sub2.wireID, ptEvent(t, now-50, "stored again"))
		time.Sleep(9 * time.Second)
		synctest.Wait()
		if st := ptStatus(p, "ws://a"); st.CatchUpsCut != 0 {
			t.Fatalf("%d catch-ups cut before EOSETimeout, want none", st.CatchUpsCut)
		}
		time.Sleep(2 * time.Second)
		synctest.Wait()
		if st := ptStatus(p, "ws://a"); st.CatchUpsCut != 1 {
			t.Fatalf("%d catch-ups cut EOSETimeout after the last stored event, want 1", st.CatchUpsCut)
		}
	})
}
