package relay

import (
	"cmp"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
)

// itRelay is a minimal NIP-01 relay for the integration test: EVENT (id
// and signature checked, stored unless ephemeral, fanned out to matching
// subscriptions, answered with OK), REQ (stored matches, then EOSE, then
// live events), CLOSE. Its store survives kill and restart, as a relay's
// database would. It is independent of relay/embedded.
type itRelay struct {
	t    *testing.T
	addr string
	url  string
	wg   sync.WaitGroup // connection handlers

	// refuse is how many REQs more are answered CLOSED, as a relay at
	// its cap on subscriptions answers.
	refuse atomic.Int32

	mu     sync.Mutex
	srv    *httptest.Server
	conns  map[*itConn]struct{}
	stored []nostr.Event
	reqs   []nostr.Filter // every filter received, in order
}

type itConn struct {
	ws   *websocket.Conn
	wmu  sync.Mutex
	subs map[string]nostr.Filters // guarded by itRelay.mu
}

func (c *itConn) write(env interface{ MarshalJSON() ([]byte, error) }) {
	b, err := env.MarshalJSON()
	if err != nil {
		return
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	_ = c.ws.SetWriteDeadline(time.Now().Add(5 * time.Second))
	_ = c.ws.WriteMessage(websocket.TextMessage, b)
}

func newITRelay(t *testing.T) *itRelay {
	r := &itRelay{t: t, conns: map[*itConn]struct{}{}}
	r.srv = httptest.NewServer(http.HandlerFunc(r.serve))
	r.addr = r.srv.Listener.Addr().String()
	r.url = "ws://" + r.addr
	t.Cleanup(r.kill)
	return r
}

var itUpgrader = websocket.Upgrader{CheckOrigin: func(*http.Request) bool { return true }}

func (r *itRelay) serve(w http.ResponseWriter, req *http.Request) {
	ws, err := itUpgrader.Upgrade(w, req, nil)
	if err != nil {
		return
	}
	c := &itConn{ws: ws, subs: map[string]nostr.Filters{}}
	r.mu.Lock()
	r.conns[c] = struct{}{}
	r.wg.Add(1)
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.conns, c)
		r.mu.Unlock()
		ws.Close()
		r.wg.Done()
	}()
	for {
		_, data, err := ws.ReadMessage()
		if err != nil {
			return
		}
		r.handle(c, data)
	}
}

func (r *itRelay) handle(c *itConn, data []byte) {
	switch env := nostr.ParseMessage(data).(type) {
	case *nostr.EventEnvelope:
		ev := env.Event
		if ok, _ := ev.CheckSignature(); !ok || ev.GetID() != ev.ID {
			c.write(nostr.OKEnvelope{EventID: ev.ID, OK: false, Reason: "invalid: bad id or signature"})
			return
		}
		type target struct {
			c  *itConn
			id string
		}
		var targets []target
		r.mu.Lock()
		if !ev.IsEphemeral() && !slices.ContainsFunc(r.stored, func(s nostr.Event) bool { return s.ID == ev.ID }) {
			r.stored = append(r.stored, ev)
		}
		for oc := range r.conns {
			for id, fs := range oc.subs {
				if fs.Match(&ev) {
					targets = append(targets, target{oc, id})
				}
			}
		}
		r.mu.Unlock()
		c.write(nostr.OKEnvelope{EventID: ev.ID, OK: true})
		for _, tg := range targets {
			tg.c.write(nostr.EventEnvelope{SubscriptionID: &tg.id, Event: ev})
		}
	case *nostr.ReqEnvelope:
		if r.refuse.Add(-1) >= 0 {
			c.write(nostr.ClosedEnvelope{SubscriptionID: env.SubscriptionID, Reason: "rate-limited: too many subscriptions"})
			return
		}
		r.mu.Lock()
		r.reqs = append(r.reqs, env.Filters...)
		c.subs[env.SubscriptionID] = env.Filters
		var out []nostr.Event
		for _, f := range env.Filters {
			var m []nostr.Event
			for _, s := range r.stored {
				if f.Matches(&s) && !slices.ContainsFunc(out, func(o nostr.Event) bool { return o.ID == s.ID }) {
					m = append(m, s)
				}
			}
			slices.SortFunc(m, func(x, y nostr.Event) int { return cmp.Compare(y.CreatedAt, x.CreatedAt) })
			if f.Limit > 0 && len(m) > f.Limit {
				m = m[:f.Limit]
			}
			out = append(out, m...)
		}
		r.mu.Unlock()
		id := env.SubscriptionID
		for _, ev := range out {
			c.write(nostr.EventEnvelope{SubscriptionID: &id, Event: ev})
		}
		c.write(nostr.EOSEEnvelope(id))
	case *nostr.CloseEnvelope:
		r.mu.Lock()
		delete(c.subs, string(*env))
		r.mu.Unlock()
	}
}

// kill stops listening and drops every connection; the store is kept.
func (r *itRelay) kill() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv == nil {
		return
	}
	srv.Close()
	r.mu.Lock()
	for c := range r.conns {
		c.ws.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// restart listens again on the same address.
func (r *itRelay) restart() {
	r.t.Helper()
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		r.t.Fatalf("restart %s: %v", r.addr, err)
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(r.serve))
	srv.Listener.Close()
	srv.Listener = ln
	srv.Start()
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
}

func (r *itRelay) lastReq() nostr.Filter {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reqs[len(r.reqs)-1]
}

// itWaitFor polls cond: over real sockets there is no fake clock to drive.
func itWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func itState(p *Pool, url string) RelayState { return ptStatus(p, url).State }

func itPool(t *testing.T, urls []string, dial func(context.Context, string) (Conn, error)) *Pool {
	p := NewPool(PoolConfig{URLs: urls, Dial: dial, Logger: ptLogger(),
		BackoffBase: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond, PublishTimeout: 5 * time.Second})
	p.Start(t.Context())
	t.Cleanup(func() { p.Close() })
	return p
}

// StartedPool and WaitFor are itPool and itWaitFor for the tests of
// package relay_test (over relay/embedded, which imports this package).
var (
	StartedPool = itPool
	WaitFor     = itWaitFor
)

// TestPoolIntegrationRelayRestart runs the pool over real websockets
// against two relays, kills one mid-run and restarts it, and checks that
// every event, those published during the gap included, is delivered
// exactly once.
func TestPoolIntegrationRelayRestart(t *testing.T) {
	a, b := newITRelay(t), newITRelay(t)
	// The subscriber's path to A can be cut, so that after A restarts
	// other clients reach it first.
	var cut atomic.Bool
	sp := itPool(t, []string{a.url, b.url}, func(ctx context.Context, url string) (Conn, error) {
		if url == a.url && cut.Load() {
			return nil, errors.New("test: path to relay A cut")
		}
		return DialWebsocket(ctx, url)
	})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	base := nostr.Timestamp(time.Now().Unix() - 60)
	since := base - 100
	f := ptFilter()
	f.Since = &since
	sub, err := sp.Subscribe(ctx, f)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.EOSE():
	case <-ctx.Done():
		t.Fatal("no EOSE")
	}
	if itState(sp, a.url) != StateConnected || itState(sp, b.url) != StateConnected {
		t.Fatalf("subscriber not connected to both: %+v", sp.Health())
	}

	pub := itPool(t, []string{a.url, b.url}, nil)
	itWaitFor(t, "publisher connected", func() bool {
		return itState(pub, a.url) == StateConnected && itState(pub, b.url) == StateConnected
	})

	counts := map[string]int{}
	expect := func(want *nostr.Event) {
		t.Helper()
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				t.Fatalf("subscription ended: %v", sub.Err())
			}
			counts[ev.ID]++
			if ev.ID != want.ID {
				t.Fatalf("got %q, want %q", ev.Content, want.Content)
			}
		case <-ctx.Done():
			t.Fatalf("%q not delivered", want.Content)
		}
	}
	// accepted: the relays that take ev; Publish returns once one has, the
	// others' answers then pending.
	publish := func(p *Pool, ev *nostr.Event, accepted int) PublishResult {
		t.Helper()
		res, err := p.Publish(ctx, *ev)
		taking := 0
		for _, o := range res.Relays {
			if o.OK || errors.Is(o.Err, ErrAnswerPending) {
				taking++
			}
		}
		if err != nil || res.Accepted() == 0 || taking != accepted {
			t.Fatalf("publish %q: accepted by %d (%d pending), want %d: %v", ev.Content, res.Accepted(), taking-res.Accepted(), accepted, err)
		}
		return res
	}

	e1 := ptEvent(t, base, "e1: before the kill")
	publish(pub, e1, 2)
	expect(e1)
	itWaitFor(t, "e1 from both relays", func() bool {
		return ptStatus(sp, a.url).EventsReceived == 1 && ptStatus(sp, b.url).EventsReceived == 1
	})
	itWaitFor(t, "e1's second copy counted a duplicate", func() bool { // by whichever relay brought it
		return ptStatus(sp, a.url).EventsDuplicate+ptStatus(sp, b.url).EventsDuplicate == 1
	})

	// Kill A; keep the subscriber away from it even once it is back.
	cut.Store(true)
	a.kill()
	itWaitFor(t, "A seen down", func() bool {
		return itState(sp, a.url) != StateConnected && itState(pub, a.url) != StateConnected
	})

	e2 := ptEvent(t, base+1, "e2: published while A is dead")
	if res := publish(pub, e2, 1); !errors.Is(res.Relays[0].Err, ErrNotConnected) {
		t.Fatalf("A's outcome: %+v", res.Relays[0])
	}
	expect(e2) // through B

	// A restarts with its store; another client publishes to A alone
	// while the subscriber is still cut off.
	a.restart()
	onlyA := itPool(t, []string{a.url}, nil)
	e3 := ptEvent(t, base+2, "e3: published on A during the subscriber's gap")
	publish(onlyA, e3, 1)
	select {
	case ev := <-sub.Events():
		t.Fatalf("%q delivered while A was unreachable", ev.Content)
	default:
	}

	// The subscriber reconnects and resumes A from the last created_at A
	// brought (e1's; e2 came from B) minus the skew: A sends e1 again
	// and e3; only e3 is new.
	cut.Store(false)
	expect(e3)
	if got := a.lastReq(); got.Since == nil || *got.Since != e1.CreatedAt-10 {
		t.Fatalf("resubscribed to A with since %v, want %d", got.Since, e1.CreatedAt-10)
	}
	// A's copy of e1 came back too (and was dropped as a duplicate),
	// twice: the catch-up's one page (until e1's created_at, inclusive)
	// brought it again, and nothing older.
	itWaitFor(t, "A to resend e1", func() bool {
		st := ptStatus(sp, a.url)
		return st.EventsReceived == 4 && st.CatchUpPages == 1
	})
	if st := ptStatus(sp, a.url); st.Reconnects < 1 || st.LastError == nil {
		t.Fatalf("health of A: %+v", st)
	}

	itWaitFor(t, "publisher back on A", func() bool { return itState(pub, a.url) == StateConnected })
	e4 := ptEvent(t, base+3, "e4: after the restart")
	publish(pub, e4, 2)
	expect(e4)

	// Exactly once: nothing else was delivered or is waiting.
	sub.Close()
	for ev := range sub.Events() {
		counts[ev.ID]++
	}
	for _, ev := range []*nostr.Event{e1, e2, e3, e4} {
		if counts[ev.ID] != 1 {
			t.Errorf("%q delivered %d times", ev.Content, counts[ev.ID])
		}
	}
	if len(counts) != 4 {
		t.Errorf("%d distinct events delivered, want 4", len(counts))
	}
	if !errors.Is(sub.Err(), ErrSubscriptionClosed) {
		t.Fatal(sub.Err())
	}
}

// A relay that answers a REQ with CLOSED (at its cap on subscriptions) is
// asked again after a backoff, and the subscription gets its events once
// the relay takes it; before, the pool gave the subscription up on that
// relay until the connection ended, and a request waiting for its answer
// there timed out.
func TestPoolAsksAgainAfterClosed(t *testing.T) {
	r := newITRelay(t)
	r.refuse.Store(3)
	sp := itPool(t, []string{r.url}, nil)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	sub, err := sp.Subscribe(ctx, ptFilter())
	if err != nil {
		t.Fatal(err)
	}
	itWaitFor(t, "the relay to take the subscription", func() bool { return r.refuse.Load() < 0 })
	select {
	case <-sub.EOSE():
	case <-ctx.Done():
		t.Fatal("no EOSE")
	}
	pub := itPool(t, []string{r.url}, nil)
	itWaitFor(t, "publisher connected", func() bool { return itState(pub, r.url) == StateConnected })
	ev := ptEvent(t, nostr.Timestamp(time.Now().Unix()), "after the refusals")
	if _, err := pub.Publish(ctx, *ev); err != nil {
		t.Fatal(err)
	}
	select {
	case got, ok := <-sub.Events():
		if !ok || got.ID != ev.ID {
			t.Fatalf("event %v, %v: want %s", got, sub.Err(), ev.ID)
		}
	case <-ctx.Done():
		t.Fatal("the subscription got nothing after the relay refused it")
	}
}

// The CLOSED reasons that asking again cannot change (NIP-01's prefixes)
// give a subscription up on the connection; the others are asked again.
func TestPermanentClosedReasons(t *testing.T) {
	for reason, want := range map[string]bool{
		"auth-required: we only serve known keys": true,
		"blocked: not welcome":                    true,
		"restricted: members only":                true,
		"invalid: filter too broad":               true,
		"rate-limited: too many subscriptions":    false,
		"error: shutting down":                    false,
		"":                                        false,
		"blocked":                                 false, // no prefix: a word, not NIP-01's
	} {
		if got := permanent(reason); got != want {
			t.Errorf("permanent(%q) = %v, want %v", reason, got, want)
		}
	}
}
