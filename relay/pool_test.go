package relay

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/snapnode/snapnode/internal/testutil"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// Unit tests of the Pool over fake connections (ptNet, ptConn), inside
// synctest bubbles: time is fake, so backoffs, time-outs and TTLs pass at
// once, and synctest.Wait lets the pool settle before each check. A
// bubble also fails if any goroutine outlives it, so every test checks
// that Close stops everything.

const ptSecret = "7f7ff03d123792d6ac594bfa67bf6d0c0ab55b6b1fdb6249303fe861f1ccba9a"

var ptPub, _ = nostr.GetPublicKey(ptSecret)

func ptLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }

// ptEvent returns a signed kind-4339 event for ptPub created at t.
func ptEvent(t *testing.T, at nostr.Timestamp, content string, tags ...nostr.Tag) *nostr.Event {
	t.Helper()
	ev := &nostr.Event{CreatedAt: at, Kind: KindMessage, Tags: append(nostr.Tags{{"p", ptPub}}, tags...), Content: content}
	if err := ev.Sign(ptSecret); err != nil {
		t.Fatal(err)
	}
	return ev
}

func ptFilter() nostr.Filter {
	return nostr.Filter{Kinds: []int{KindMessage}, Tags: nostr.TagMap{"p": {ptPub}}}
}

func ptNow() nostr.Timestamp { return nostr.Timestamp(time.Now().Unix()) }

// ptNet is a fake network: it dials ptConns and lets the test play each
// relay.
type ptNet struct {
	mu      sync.Mutex
	fail    map[string]error // dial error per URL
	delay   map[string]time.Duration
	publish map[string]func(ctx context.Context, ev nostr.Event) (bool, string, error)
	conns   map[string][]*ptConn
	dials   map[string][]time.Time
	// manualPages: the test answers the pool's catch-up pages; else
	// each is answered with EOSE alone.
	manualPages bool
}

func newPTNet() *ptNet {
	return &ptNet{
		fail: map[string]error{}, delay: map[string]time.Duration{}, conns: map[string][]*ptConn{},
		dials:   map[string][]time.Time{},
		publish: map[string]func(context.Context, nostr.Event) (bool, string, error){},
	}
}

func (n *ptNet) dial(ctx context.Context, url string) (Conn, error) {
	n.mu.Lock()
	n.dials[url] = append(n.dials[url], time.Now())
	err, d := n.fail[url], n.delay[url]
	n.mu.Unlock()
	if d > 0 {
		select {
		case <-time.After(d):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	if err != nil {
		return nil, err
	}
	c := &ptConn{net: n, url: url, in: make(chan ConnMessage, 64), done: make(chan struct{})}
	n.mu.Lock()
	n.conns[url] = append(n.conns[url], c)
	n.mu.Unlock()
	return c, nil
}

func (n *ptNet) setFail(url string, err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.fail[url] = err
}

func (n *ptNet) last(t *testing.T, url string) *ptConn {
	t.Helper()
	n.mu.Lock()
	defer n.mu.Unlock()
	cs := n.conns[url]
	if len(cs) == 0 {
		t.Fatalf("%s: never connected", url)
	}
	return cs[len(cs)-1]
}

func (n *ptNet) count(url string) int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.conns[url])
}

func (n *ptNet) dialTimes(url string) []time.Time {
	n.mu.Lock()
	defer n.mu.Unlock()
	return slices.Clone(n.dials[url])
}

type ptFrame struct {
	close bool // CLOSE, else REQ
	id    string
	f     nostr.Filter
}

type ptConn struct {
	net  *ptNet
	url  string
	in   chan ConnMessage
	done chan struct{}

	sendMu sync.Mutex // guards in against close
	closed bool
	once   sync.Once
	err    error

	mu     sync.Mutex
	frames []ptFrame
}

func (c *ptConn) Req(id string, f nostr.Filter) error {
	c.mu.Lock()
	c.frames = append(c.frames, ptFrame{id: id, f: f})
	c.mu.Unlock()
	c.net.mu.Lock()
	manual := c.net.manualPages
	c.net.mu.Unlock()
	if strings.Contains(id, pageSep) && !manual {
		// A catch-up page: this relay holds nothing more.
		go c.eose(id)
	}
	return nil
}

func (c *ptConn) CloseReq(id string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.frames = append(c.frames, ptFrame{close: true, id: id})
	return nil
}

func (c *ptConn) Publish(ctx context.Context, ev nostr.Event) (bool, string, error) {
	c.net.mu.Lock()
	fn := c.net.publish[c.url]
	c.net.mu.Unlock()
	if fn == nil {
		return true, "", nil
	}
	return fn(ctx, ev)
}

func (c *ptConn) Messages() <-chan ConnMessage { return c.in }

func (c *ptConn) Err() error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	return c.err
}

// drop ends the connection from the relay's side.
func (c *ptConn) drop(err error) {
	c.once.Do(func() {
		close(c.done)
		c.sendMu.Lock()
		c.err, c.closed = err, true
		close(c.in)
		c.sendMu.Unlock()
	})
}

func (c *ptConn) Close() error { c.drop(ErrConnClosed); return nil }

// ptReconnect drops the connection a from the relay's side, lets the
// pool's backoff pass, and returns the connection the pool made again to
// the same relay.
func ptReconnect(t *testing.T, n *ptNet, a *ptConn, backoff time.Duration) *ptConn {
	t.Helper()
	a.drop(errors.New("reset"))
	time.Sleep(backoff)
	synctest.Wait()
	again := n.last(t, a.url)
	if again == a {
		t.Fatal("no reconnect")
	}
	return again
}

// send plays one relay message; it is lost if the connection is gone.
func (c *ptConn) send(m ConnMessage) {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	if c.closed {
		return
	}
	select {
	case c.in <- m:
	case <-c.done:
	}
}

func (c *ptConn) event(sub string, ev *nostr.Event) {
	cp := *ev
	c.send(ConnMessage{Label: "EVENT", SubID: sub, Event: &cp})
}

func (c *ptConn) eose(sub string) { c.send(ConnMessage{Label: "EOSE", SubID: sub}) }

func (c *ptConn) reqs() []ptFrame {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.frames)
}

// lastReq returns the last REQ this connection got for sub.
func (c *ptConn) lastReq(t *testing.T, sub string) nostr.Filter {
	t.Helper()
	fs := c.reqs()
	for i := len(fs) - 1; i >= 0; i-- {
		if !fs[i].close && fs[i].id == sub {
			return fs[i].f
		}
	}
	t.Fatalf("%s: no REQ for %s in %+v", c.url, sub, fs)
	return nostr.Filter{}
}

func (c *ptConn) closedSub(sub string) bool {
	for _, f := range c.reqs() {
		if f.close && f.id == sub {
			return true
		}
	}
	return false
}

// newTestPool starts a pool over n and closes it when the test ends.
func newPTPool(t *testing.T, n *ptNet, cfg PoolConfig) *Pool {
	t.Helper()
	cfg.Dial, cfg.Logger = n.dial, ptLogger()
	if cfg.BackoffBase == 0 {
		cfg.BackoffBase, cfg.BackoffMax = time.Second, 8*time.Second
	}
	p := NewPool(cfg)
	p.Start(t.Context())
	t.Cleanup(func() { p.Close() })
	synctest.Wait()
	return p
}

// recv takes one event from s, failing if none is ready.
func ptRecv(t *testing.T, s *Subscription) *nostr.Event {
	t.Helper()
	synctest.Wait()
	select {
	case ev, ok := <-s.Events():
		if !ok {
			t.Fatalf("subscription ended: %v", s.Err())
		}
		return ev
	default:
		t.Fatal("no event delivered")
		return nil
	}
}

// none fails if s has an event ready.
func ptNone(t *testing.T, s *Subscription) {
	t.Helper()
	synctest.Wait()
	select {
	case ev, ok := <-s.Events():
		if ok {
			t.Fatalf("unexpected event %s (created_at %d)", ev.ID, ev.CreatedAt)
		}
	default:
	}
}

func ptStatus(p *Pool, url string) RelayStatus {
	for _, s := range p.Health() {
		if s.URL == url {
			return s
		}
	}
	return RelayStatus{}
}

func TestPoolResubscribesFromLastSeenAfterReconnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}})
		now := ptNow()
		since := now - 3600
		f := ptFilter()
		f.Since, f.Limit = &since, 50
		sub, err := p.Subscribe(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		c1 := n.last(t, "ws://a")
		if got := c1.lastReq(t, sub.wireID); !nostr.FilterEqual(got, f) || got.Limit != 50 {
			t.Fatalf("first REQ %v, want the filter as given %v", got, f)
		}
		e1, e2 := ptEvent(t, now-100, "one"), ptEvent(t, now-50, "two")
		c1.event(sub.wireID, e1)
		c1.event(sub.wireID, e2)
		c1.eose(sub.wireID)
		if got := []string{ptRecv(t, sub).ID, ptRecv(t, sub).ID}; !slices.Contains(got, e1.ID) || !slices.Contains(got, e2.ID) {
			t.Fatalf("got %v", got)
		}
		<-sub.EOSE()

		c1.drop(errors.New("connection reset"))
		synctest.Wait()
		if st := ptStatus(p, "ws://a"); st.State != StateBackoff || st.LastError == nil {
			t.Fatalf("after drop: %+v", st)
		}
		time.Sleep(time.Second) // the first backoff step is at most the base
		synctest.Wait()
		c2 := n.last(t, "ws://a")
		if c2 == c1 {
			t.Fatal("no reconnect")
		}
		got := c2.lastReq(t, sub.wireID)
		if got.Since == nil || *got.Since != e2.CreatedAt-10 {
			t.Fatalf("resubscribed with since %v, want last seen %d − 10 s", got.Since, e2.CreatedAt)
		}
		if got.Limit != 0 || !slices.Equal(got.Kinds, f.Kinds) || !slices.Equal(got.Tags["p"], f.Tags["p"]) {
			t.Fatalf("resubscribed with %v", got)
		}

		// The relay repeats what falls inside the skew, and sends what was
		// published during the gap: only the latter is delivered.
		e3 := ptEvent(t, now-20, "published during the gap")
		c2.event(sub.wireID, e2)
		c2.event(sub.wireID, e3)
		if ev := ptRecv(t, sub); ev.ID != e3.ID {
			t.Fatalf("got %s, want the gap event", ev.Content)
		}
		ptNone(t, sub)
		if st := ptStatus(p, "ws://a"); st.State != StateConnected || st.Reconnects != 1 || st.EventsReceived != 4 {
			t.Fatalf("health %+v", st)
		}
	})
}

func TestPoolResubscribeBeforeEOSEKeepsTheFilter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}})
		since := ptNow() - 3600
		f := ptFilter()
		f.Since = &since
		sub, _ := p.Subscribe(t.Context(), f)
		synctest.Wait()
		c1 := n.last(t, "ws://a")
		c1.event(sub.wireID, ptEvent(t, ptNow()-5, "x"))
		ptRecv(t, sub)
		// Dropped before EOSE: the stored events were not all served, so
		// the relay is asked for all of them again.
		c1.drop(errors.New("reset"))
		time.Sleep(time.Second)
		synctest.Wait()
		if got := n.last(t, "ws://a").lastReq(t, sub.wireID); *got.Since != since {
			t.Fatalf("since %d, want the original %d", *got.Since, since)
		}
	})
}

func TestPoolFutureEventDoesNotMoveResumePastNow(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}})
		sub, _ := p.Subscribe(t.Context(), ptFilter())
		synctest.Wait()
		c1 := n.last(t, "ws://a")
		c1.eose(sub.wireID)
		c1.event(sub.wireID, ptEvent(t, ptNow()+86400, "from tomorrow"))
		ptRecv(t, sub)
		c1.drop(errors.New("reset"))
		time.Sleep(time.Second)
		synctest.Wait()
		got := n.last(t, "ws://a").lastReq(t, sub.wireID)
		if got.Since == nil || *got.Since > ptNow()-10 {
			t.Fatalf("since %v: a future created_at moved the resume point past now − skew", got.Since)
		}
	})
}

func TestPoolDedupesAcrossRelays(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a", "ws://b", "ws://a"}})
		if len(p.Health()) != 2 {
			t.Fatalf("duplicate URL not ignored: %+v", p.Health())
		}
		s1, _ := p.Subscribe(t.Context(), ptFilter())
		s2, _ := p.Subscribe(t.Context(), ptFilter())
		synctest.Wait()
		a, b := n.last(t, "ws://a"), n.last(t, "ws://b")
		ev := ptEvent(t, ptNow(), "hello")
		for _, s := range []*Subscription{s1, s2} {
			a.event(s.wireID, ev)
			b.event(s.wireID, ev)
			a.event(s.wireID, ev)
		}
		// Each subscription gets the event once.
		for _, s := range []*Subscription{s1, s2} {
			if got := ptRecv(t, s); got.ID != ev.ID {
				t.Fatal(got.ID)
			}
			ptNone(t, s)
		}
	})
}

func TestPoolDropsUnverifiableAndUnmatchedEvents(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}})
		f := ptFilter()
		f.Tags["skill"] = []string{"translate"}
		sub, _ := p.Subscribe(t.Context(), f)
		synctest.Wait()
		a := n.last(t, "ws://a")

		good := ptEvent(t, ptNow(), "good", nostr.Tag{"skill", "translate"})
		badSig := *good
		badSig.Sig = testutil.FlipHex(good.Sig)
		badID := *good
		badID.Content = "tampered" // id no longer matches
		shortID := *good
		shortID.ID = "abcd"
		// A relay that ignores the multi-letter tag filter.
		noSkill := ptEvent(t, ptNow(), "no skill")
		old := ptEvent(t, 1, "before since", nostr.Tag{"skill", "translate"})
		since := nostr.Timestamp(100)
		f.Since = &since
		sub2, _ := p.Subscribe(t.Context(), f)
		synctest.Wait()

		for _, ev := range []*nostr.Event{&badSig, &badID, &shortID, noSkill, good} {
			a.event(sub.wireID, ev)
		}
		a.event(sub2.wireID, old)
		if got := ptRecv(t, sub); got.ID != good.ID {
			t.Fatalf("delivered %q", got.Content)
		}
		ptNone(t, sub)
		ptNone(t, sub2)
		st := ptStatus(p, "ws://a")
		if st.EventsReceived != 6 || st.EventsInvalid != 3 || st.EventsMismatch != 2 {
			t.Fatalf("health %+v", st)
		}
		if err := VerifyEvent(&badSig); !errors.Is(err, ErrInvalidEvent) {
			t.Fatalf("VerifyEvent(bad sig) = %v", err)
		}
		if err := VerifyEvent(good); err != nil {
			t.Fatal(err)
		}
	})
}

func TestPoolPublishSucceedsWithOneOK(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		n.publish["ws://a"] = func(context.Context, nostr.Event) (bool, string, error) {
			time.Sleep(time.Millisecond) // after b's refusal
			return true, "", nil
		}
		n.publish["ws://b"] = func(context.Context, nostr.Event) (bool, string, error) {
			return false, "blocked: not on the allow list", nil
		}
		n.publish["ws://c"] = func(ctx context.Context, _ nostr.Event) (bool, string, error) {
			<-ctx.Done() // never answers
			return false, "", ctx.Err()
		}
		n.setFail("ws://d", errors.New("connection refused"))
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a", "ws://b", "ws://c", "ws://d"}, PublishTimeout: 3 * time.Second})
		ev := ptEvent(t, ptNow(), "publish me")

		start := time.Now()
		res, err := p.Publish(t.Context(), *ev)
		if err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d != time.Millisecond {
			t.Fatalf("publish took %v; want the time a took to accept, not the silent relay's PublishTimeout", d)
		}
		if res.EventID != ev.ID || res.Accepted() != 1 || len(res.Relays) != 4 {
			t.Fatalf("%+v", res)
		}
		a, b, c, d := res.Relays[0], res.Relays[1], res.Relays[2], res.Relays[3]
		switch {
		case a.URL != "ws://a" || !a.OK || a.Err != nil:
			t.Fatalf("a: %+v", a)
		case b.OK || !errors.Is(b.Err, ErrRejected) || b.Message != "blocked: not on the allow list":
			t.Fatalf("b: %+v", b)
		case c.OK || !errors.Is(c.Err, ErrAnswerPending):
			t.Fatalf("c: %+v", c)
		case d.OK || !errors.Is(d.Err, ErrNotConnected):
			t.Fatalf("d: %+v", d)
		}

		// No OK true anywhere: an error, with every outcome still
		// returned, once the silent relay's PublishTimeout passed.
		n.mu.Lock()
		n.publish["ws://a"] = n.publish["ws://b"]
		n.mu.Unlock()
		start = time.Now()
		res, err = p.Publish(t.Context(), *ev)
		if !errors.Is(err, ErrNotAccepted) || !errors.Is(err, ErrRejected) || len(res.Relays) != 4 {
			t.Fatalf("all failed: %v %+v", err, res)
		}
		if d := time.Since(start); d != 3*time.Second || !errors.Is(res.Relays[2].Err, context.DeadlineExceeded) {
			t.Fatalf("publish took %v, c %+v; want the PublishTimeout for the silent relay", d, res.Relays[2])
		}

		// An event that does not verify is not sent at all.
		bad := *ev
		bad.Content = "changed"
		if _, err := p.Publish(t.Context(), bad); !errors.Is(err, ErrInvalidEvent) {
			t.Fatalf("invalid event: %v", err)
		}
	})
}

func TestPoolPublishWaitsForAFirstConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		n.delay["ws://a"] = 2 * time.Second
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}})
		if st := ptStatus(p, "ws://a"); st.State != StateConnecting {
			t.Fatalf("while dialing: %+v", st)
		}
		if _, err := p.Publish(t.Context(), *ptEvent(t, ptNow(), "early")); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		defer cancel()
		n.setFail("ws://a", errors.New("down"))
		n.last(t, "ws://a").drop(errors.New("reset"))
		synctest.Wait()
		res, err := p.Publish(ctx, *ptEvent(t, ptNow(), "late"))
		if !errors.Is(err, ErrNoRelays) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("no relay: %v", err)
		}
		if len(res.Relays) != 1 || !errors.Is(res.Relays[0].Err, ErrNotConnected) {
			t.Fatalf("outcomes %+v", res.Relays)
		}
	})
}

func TestPoolHealth(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		refused := errors.New("connection refused")
		n.setFail("ws://b", refused)
		p := NewPool(PoolConfig{URLs: []string{"ws://a", "ws://b"}, Dial: n.dial, Logger: ptLogger(),
			BackoffBase: time.Second, BackoffMax: 8 * time.Second})
		for _, st := range p.Health() {
			if st.State != StateIdle {
				t.Fatalf("before Start: %+v", st)
			}
		}
		p.Start(t.Context())
		synctest.Wait()
		start := time.Now()
		a, b := ptStatus(p, "ws://a"), ptStatus(p, "ws://b")
		if a.State != StateConnected || !a.ConnectedSince.Equal(start) || a.LastError != nil || a.Reconnects != 0 {
			t.Fatalf("a: %+v", a)
		}
		if b.State != StateBackoff || !errors.Is(b.LastError, refused) || !b.RetryAt.After(start) ||
			b.RetryAt.Sub(start) > time.Second {
			t.Fatalf("b: %+v", b)
		}

		sub, _ := p.Subscribe(t.Context(), ptFilter())
		synctest.Wait()
		n.last(t, "ws://a").event(sub.wireID, ptEvent(t, ptNow(), "x"))
		ptRecv(t, sub)
		n.last(t, "ws://a").drop(errors.New("eof"))
		synctest.Wait()
		if a := ptStatus(p, "ws://a"); a.State != StateBackoff || a.LastError == nil || !a.ConnectedSince.IsZero() {
			t.Fatalf("a dropped: %+v", a)
		}
		n.setFail("ws://b", nil)
		time.Sleep(8 * time.Second)
		synctest.Wait()
		a, b = ptStatus(p, "ws://a"), ptStatus(p, "ws://b")
		if a.State != StateConnected || a.Reconnects != 1 || a.EventsReceived != 1 {
			t.Fatalf("a back: %+v", a)
		}
		if b.State != StateConnected || b.Reconnects != 0 || !b.RetryAt.IsZero() {
			t.Fatalf("b up: %+v", b)
		}
		p.Close()
		for _, st := range p.Health() {
			if st.State != StateIdle {
				t.Fatalf("after Close: %+v", st)
			}
		}
	})
}

func TestPoolBackoffResetsAfterStableConnection(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		n.setFail("ws://a", errors.New("refused"))
		base, maxD := time.Second, 8*time.Second
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}, BackoffBase: base, BackoffMax: maxD})
		_ = p
		time.Sleep(40 * time.Second)
		synctest.Wait()
		gaps := func() []time.Duration {
			ts := n.dialTimes("ws://a")
			var out []time.Duration
			for i := 1; i < len(ts); i++ {
				out = append(out, ts[i].Sub(ts[i-1]))
			}
			return out
		}
		g := gaps()
		if len(g) < 5 {
			t.Fatalf("gaps %v", g)
		}
		for i, d := range g {
			step := min(base<<i, maxD)
			if d < step/2 || d > step {
				t.Fatalf("gap %d = %v, want within [%v, %v] (all %v)", i, d, step/2, step, g)
			}
		}

		// Up, and stable for BackoffMax: the next drop retries at the base.
		n.setFail("ws://a", nil)
		time.Sleep(maxD)
		synctest.Wait()
		time.Sleep(maxD)
		before := len(n.dialTimes("ws://a"))
		n.last(t, "ws://a").drop(errors.New("relay restarted"))
		time.Sleep(base)
		synctest.Wait()
		if after := len(n.dialTimes("ws://a")); after != before+1 {
			t.Fatalf("no redial within the base delay after a stable connection (%d → %d)", before, after)
		}

		// Connections that do not last BackoffMax do not reset it: the
		// delays keep growing (steps 2 s, 4 s, 8 s).
		for i := range 3 {
			dropped := time.Now()
			n.last(t, "ws://a").drop(errors.New("kicked"))
			time.Sleep(maxD)
			synctest.Wait()
			ts := n.dialTimes("ws://a")
			d := ts[len(ts)-1].Sub(dropped)
			step := base << (i + 1)
			if d < step/2 || d > step {
				t.Fatalf("flap %d: redialed after %v, want within [%v, %v]", i, d, step/2, step)
			}
		}
	})
}

func TestPoolSlowConsumerIsDroppedAlone(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}, SubscriptionBuffer: 4, SlowConsumerTimeout: 2 * time.Second})
		slow, _ := p.Subscribe(t.Context(), ptFilter())
		fast, _ := p.Subscribe(t.Context(), ptFilter())
		synctest.Wait()
		var got []string
		var wg sync.WaitGroup
		wg.Go(func() {
			for ev := range fast.Events() {
				got = append(got, ev.Content)
			}
		})
		a := n.last(t, "ws://a")
		start := time.Now()
		var want []string
		for i := range 10 {
			ev := ptEvent(t, ptNow(), fmt.Sprint(i))
			want = append(want, ev.Content)
			a.event(slow.wireID, ev)
			a.event(fast.wireID, ev)
		}
		// Delivery waits for room for the SlowConsumerTimeout, then drops
		// the slow subscription; the other was held up that long, no more.
		time.Sleep(2*time.Second - time.Nanosecond)
		synctest.Wait()
		if slow.Err() != nil {
			t.Fatalf("dropped before the time-out: %v", slow.Err())
		}
		time.Sleep(time.Nanosecond)
		synctest.Wait()
		if !errors.Is(slow.Err(), ErrSlowConsumer) {
			t.Fatalf("slow consumer: Err %v", slow.Err())
		}
		if d := time.Since(start); d != 2*time.Second {
			t.Fatalf("took %v", d)
		}
		// What was buffered is still readable, then the channel is closed.
		var buffered []string
		for ev := range slow.Events() {
			buffered = append(buffered, ev.Content)
		}
		if !slices.Equal(buffered, want[:4]) {
			t.Fatalf("slow consumer kept %v", buffered)
		}
		if !a.closedSub(slow.wireID) {
			t.Fatal("no CLOSE sent for the dropped subscription")
		}
		fast.Close()
		wg.Wait()
		if !slices.Equal(got, want) || fast.Err() != ErrSubscriptionClosed {
			t.Fatalf("fast consumer got %v (%v)", got, fast.Err())
		}
	})
}

func TestPoolEOSE(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		n.setFail("ws://c", errors.New("refused"))
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a", "ws://b", "ws://c"}, EOSETimeout: 5 * time.Second})
		closed := func(s *Subscription) bool {
			synctest.Wait()
			select {
			case <-s.EOSE():
				return true
			default:
				return false
			}
		}
		a, b := n.last(t, "ws://a"), n.last(t, "ws://b")

		// Every connected relay, and only those, is awaited.
		s1, _ := p.Subscribe(t.Context(), ptFilter())
		synctest.Wait()
		a.eose(s1.wireID)
		if closed(s1) {
			t.Fatal("EOSE before b's")
		}
		b.eose(s1.wireID)
		if !closed(s1) {
			t.Fatal("no EOSE after a's and b's (c is backing off)")
		}

		// A relay that never answers is waited for EOSETimeout at most.
		s2, _ := p.Subscribe(t.Context(), ptFilter())
		synctest.Wait()
		a.eose(s2.wireID)
		time.Sleep(5*time.Second - time.Nanosecond)
		if closed(s2) {
			t.Fatal("EOSE before the time-out")
		}
		time.Sleep(time.Nanosecond)
		if !closed(s2) {
			t.Fatal("no EOSE after the time-out")
		}

		// A relay that drops is no longer waited for; CLOSED counts too.
		s3, _ := p.Subscribe(t.Context(), ptFilter())
		synctest.Wait()
		a.send(ConnMessage{Label: "CLOSED", SubID: s3.wireID, Reason: "auth-required: no"})
		b.drop(errors.New("reset"))
		if !closed(s3) {
			t.Fatal("no EOSE after a closed and b dropped")
		}
	})
}

func TestPoolQuery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a", "ws://b"}})
		a, b := n.last(t, "ws://a"), n.last(t, "ws://b")
		e1, e2, e3 := ptEvent(t, ptNow(), "1"), ptEvent(t, ptNow(), "2"), ptEvent(t, ptNow(), "3")
		var got []*nostr.Event
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			got, err = p.Query(t.Context(), ptFilter())
		}()
		synctest.Wait()
		id := a.reqs()[0].id
		a.event(id, e1)
		a.event(id, e2)
		a.eose(id)
		b.event(id, e2)
		b.event(id, e3)
		b.eose(id)
		<-done
		if err != nil {
			t.Fatal(err)
		}
		var contents []string
		for _, ev := range got {
			contents = append(contents, ev.Content)
		}
		slices.Sort(contents)
		if !slices.Equal(contents, []string{"1", "2", "3"}) {
			t.Fatalf("query got %v", contents)
		}
		synctest.Wait()
		if !a.closedSub(id) || !b.closedSub(id) {
			t.Fatal("query subscription not closed on the relays")
		}

		// With every relay backing off there is nobody to ask.
		n.setFail("ws://a", errors.New("down"))
		n.setFail("ws://b", errors.New("down"))
		a.drop(errors.New("reset"))
		b.drop(errors.New("reset"))
		synctest.Wait()
		if _, err := p.Query(t.Context(), ptFilter()); !errors.Is(err, ErrNoRelays) {
			t.Fatalf("query with no relay: %v", err)
		}
	})
}

func TestPoolQueryTruncates(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}, QueryMaxEvents: 2})
		a := n.last(t, "ws://a")
		var got []*nostr.Event
		var err error
		done := make(chan struct{})
		go func() {
			defer close(done)
			got, err = p.Query(t.Context(), ptFilter())
		}()
		synctest.Wait()
		id := a.reqs()[0].id
		for i := range 3 {
			a.event(id, ptEvent(t, ptNow(), fmt.Sprint(i)))
		}
		a.eose(id)
		<-done
		if !errors.Is(err, ErrQueryTruncated) || len(got) != 2 {
			t.Fatalf("%d events, %v", len(got), err)
		}
	})
}

func TestPoolSubscriptionEnds(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}})
		ctx, cancel := context.WithCancelCause(t.Context())
		byCtx, _ := p.Subscribe(ctx, ptFilter())
		open, _ := p.Subscribe(t.Context(), ptFilter())
		stop := errors.New("caller stopped")
		cancel(stop)
		synctest.Wait()
		if _, ok := <-byCtx.Events(); ok || !errors.Is(byCtx.Err(), stop) {
			t.Fatalf("context end: %v", byCtx.Err())
		}
		if !n.last(t, "ws://a").closedSub(byCtx.wireID) {
			t.Fatal("no CLOSE when the context ended")
		}
		if open.Err() != nil {
			t.Fatal(open.Err())
		}
		p.Close()
		if _, ok := <-open.Events(); ok || !errors.Is(open.Err(), ErrPoolClosed) {
			t.Fatalf("pool close: %v", open.Err())
		}
		<-open.EOSE()
		if _, err := p.Subscribe(t.Context(), ptFilter()); !errors.Is(err, ErrPoolClosed) {
			t.Fatalf("subscribe after close: %v", err)
		}
		if _, err := p.Publish(t.Context(), *ptEvent(t, ptNow(), "x")); !errors.Is(err, ErrPoolClosed) {
			t.Fatalf("publish after close: %v", err)
		}
		if n.count("ws://a") != 1 {
			t.Fatal("redialed after Close")
		}
	})
}

func TestPoolNoRedeliveryAfterOutageLongerThanTTL(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a", "ws://b"}, DedupeTTL: time.Minute})
		sub, _ := p.Subscribe(t.Context(), ptFilter())
		synctest.Wait()
		a := n.last(t, "ws://a")
		a.eose(sub.wireID)
		e1 := ptEvent(t, ptNow()-1, "just before the outage")
		a.event(sub.wireID, e1)
		ptRecv(t, sub)

		// A is away for five minutes, far longer than the dedupe TTL.
		n.setFail("ws://a", errors.New("down"))
		a.drop(errors.New("reset"))
		time.Sleep(5 * time.Minute)
		n.setFail("ws://a", nil)
		time.Sleep(8 * time.Second)
		synctest.Wait()
		a2 := n.last(t, "ws://a")
		if got := a2.lastReq(t, sub.wireID); *got.Since != e1.CreatedAt-10 {
			t.Fatalf("since %d", *got.Since)
		}
		// It resends e1, which falls inside the skew: still not delivered twice.
		a2.event(sub.wireID, e1)
		ptNone(t, sub)

		// Once newer events move the resume point on (at A's EOSE), old
		// ids are let go.
		e2 := ptEvent(t, ptNow(), "later")
		a2.event(sub.wireID, e2)
		ptRecv(t, sub)
		a2.eose(sub.wireID)
		synctest.Wait()
		var id [32]byte
		hex.Decode(id[:], []byte(e1.ID))
		sub.mu.Lock()
		_, kept := sub.tail[sub.p.tailKey(id)]
		sub.mu.Unlock()
		if kept {
			t.Fatal("tail keeps ids older than the resume point")
		}
	})
}

// Each relay resumes from the newest event it brought itself, duplicates
// of what another relay delivered first included; one that brought
// nothing is asked with the subscription's own filter. What the others
// delivered during a relay's outage, longer than the dedupe TTL, and that
// relay sends again on its return is not delivered twice.
func TestPoolResumesEachRelayFromItsOwnPoint(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a", "ws://b", "ws://c"}, DedupeTTL: time.Minute})
		since := ptNow() - 3600
		f := ptFilter()
		f.Since, f.Limit = &since, 50
		sub, _ := p.Subscribe(t.Context(), f)
		synctest.Wait()
		a, b, c := n.last(t, "ws://a"), n.last(t, "ws://b"), n.last(t, "ws://c")
		for _, conn := range []*ptConn{a, b, c} {
			conn.eose(sub.wireID)
		}
		e1 := ptEvent(t, ptNow()-100, "e1")
		a.event(sub.wireID, e1)
		ptRecv(t, sub)
		b.event(sub.wireID, e1) // a duplicate, and B's own point
		synctest.Wait()

		// B goes away for five minutes; A delivers newer events.
		n.setFail("ws://b", errors.New("down"))
		b.drop(errors.New("reset"))
		var during []*nostr.Event
		for i := range 3 {
			ev := ptEvent(t, ptNow()-50+nostr.Timestamp(i), fmt.Sprintf("during %d", i))
			a.event(sub.wireID, ev)
			ptRecv(t, sub)
			during = append(during, ev)
		}
		time.Sleep(5 * time.Minute)
		n.setFail("ws://b", nil)
		time.Sleep(8 * time.Second)
		synctest.Wait()
		b2 := n.last(t, "ws://b")
		if got := b2.lastReq(t, sub.wireID); got.Since == nil || *got.Since != e1.CreatedAt-10 || got.Limit != 0 {
			t.Fatalf("B resubscribed with %v, want since its own last event %d − 10 s", got, e1.CreatedAt)
		}
		// B sends what A delivered meanwhile, and what only it holds.
		mine := ptEvent(t, e1.CreatedAt+5, "on B alone")
		for _, ev := range during {
			b2.event(sub.wireID, ev)
		}
		b2.event(sub.wireID, mine)
		if ev := ptRecv(t, sub); ev.ID != mine.ID {
			t.Fatalf("got %q, want B's own", ev.Content)
		}
		ptNone(t, sub)

		// C brought nothing: asked with the filter as given.
		c.drop(errors.New("reset"))
		time.Sleep(time.Second)
		synctest.Wait()
		if got := n.last(t, "ws://c").lastReq(t, sub.wireID); !nostr.FilterEqual(got, f) || got.Limit != 50 {
			t.Fatalf("C resubscribed with %v, want the filter as given %v", got, f)
		}
	})
}

// A relay's resume point moves on only once it has sent EOSE for the REQ
// that brought the events: relays send stored events newest first, so a
// connection that drops part way through the stored ones after a
// reconnect (a flapping relay) must not have the next REQ skip the older
// ones it had not sent yet.
func TestPoolResumePointWaitsForEOSEAfterReconnect(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}})
		sub, _ := p.Subscribe(t.Context(), ptFilter())
		synctest.Wait()
		a := n.last(t, "ws://a")
		a.eose(sub.wireID)
		e1 := ptEvent(t, ptNow()-600, "e1")
		a.event(sub.wireID, e1)
		ptRecv(t, sub)

		// A drops; while it is away, two events are stored on it.
		a.drop(errors.New("reset"))
		time.Sleep(2 * time.Second)
		synctest.Wait()
		older, newer := ptEvent(t, e1.CreatedAt+100, "older"), ptEvent(t, ptNow(), "newer")
		a2 := n.last(t, "ws://a")
		if got := a2.lastReq(t, sub.wireID); got.Since == nil || *got.Since != e1.CreatedAt-10 {
			t.Fatalf("resubscribed with %v, want since %d", got, e1.CreatedAt-10)
		}
		// It sends the newest first, then drops before the older one
		// and before EOSE.
		a2.event(sub.wireID, newer)
		ptRecv(t, sub)
		a3 := ptReconnect(t, n, a2, 4*time.Second)
		if got := a3.lastReq(t, sub.wireID); got.Since == nil || *got.Since != e1.CreatedAt-10 {
			t.Fatalf("resubscribed with %v, want since %d again: the older event was not sent yet", got, e1.CreatedAt-10)
		}
		a3.event(sub.wireID, newer)
		a3.event(sub.wireID, older)
		a3.eose(sub.wireID)
		if ev := ptRecv(t, sub); ev.ID != older.ID {
			t.Fatalf("got %q, want the older event", ev.Content)
		}
		ptNone(t, sub)

		// Now that A sent EOSE, its point is the newer event.
		a3.drop(errors.New("reset"))
		time.Sleep(8 * time.Second)
		synctest.Wait()
		if got := n.last(t, "ws://a").lastReq(t, sub.wireID); got.Since == nil || *got.Since != newer.CreatedAt-10 {
			t.Fatalf("resubscribed with %v, want since %d", got, newer.CreatedAt-10)
		}
	})
}

// The tail reaches back to the oldest relay's point, so a relay gone for
// good keeps it open; once it holds DedupeSize ids, it keeps the newest,
// which a relay back from an outage longer than the dedupe TTL resends,
// not the oldest ones.
func TestPoolTailKeepsTheNewestWhenFull(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a", "ws://b"}, DedupeTTL: time.Minute, DedupeSize: 10})
		sub, _ := p.Subscribe(t.Context(), ptFilter())
		synctest.Wait()
		a, b := n.last(t, "ws://a"), n.last(t, "ws://b")
		a.eose(sub.wireID)
		b.eose(sub.wireID)
		b.event(sub.wireID, ptEvent(t, ptNow()-200, "B's last"))
		ptRecv(t, sub)
		// B is gone for good: its point holds the tail open.
		n.setFail("ws://b", errors.New("down"))
		b.drop(errors.New("reset"))

		var evs []*nostr.Event
		for i := range 12 {
			ev := ptEvent(t, ptNow()-100+nostr.Timestamp(2*i), fmt.Sprintf("e%d", i))
			a.event(sub.wireID, ev)
			ptRecv(t, sub)
			evs = append(evs, ev)
		}
		last := evs[len(evs)-1]
		sub.mu.Lock()
		held := len(sub.tail)
		sub.mu.Unlock()
		if held > 10 {
			t.Fatalf("tail holds %d ids, more than DedupeSize", held)
		}

		// A is away for five minutes, longer than the dedupe TTL.
		n.setFail("ws://a", errors.New("down"))
		a.drop(errors.New("reset"))
		time.Sleep(5 * time.Minute)
		n.setFail("ws://a", nil)
		time.Sleep(8 * time.Second)
		synctest.Wait()
		a2 := n.last(t, "ws://a")
		since := a2.lastReq(t, sub.wireID).Since
		if since == nil || *since != last.CreatedAt-10 {
			t.Fatalf("A resubscribed with since %v, want %d", since, last.CreatedAt-10)
		}
		for _, ev := range evs {
			if ev.CreatedAt >= *since {
				a2.event(sub.wireID, ev)
			}
		}
		a2.eose(sub.wireID)
		ptNone(t, sub)
	})
}
