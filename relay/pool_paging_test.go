package relay_test

import (
	"context"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/relaytest"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
)

// serveCapped serves an embedded relay, in memory, that answers a REQ
// with at most limit stored events (the newest), as public relays cap
// theirs, and returns its URL.
func serveCapped(t *testing.T, limit int) string {
	t.Helper()
	return relaytest.Serve(t, embedded.Config{MaxLimit: limit, DefaultLimit: limit})
}

// countingConn counts the REQs a pool sends on a connection.
type countingConn struct {
	relay.Conn
	reqs *atomic.Int64
}

func (c countingConn) Req(id string, f nostr.Filter) error {
	c.reqs.Add(1)
	return c.Conn.Req(id, f)
}

// pagingFixture stores events for one recipient on relays and reads what
// a subscription delivers.
type pagingFixture struct {
	t      *testing.T
	ctx    context.Context
	agent  *identity.Key
	author *identity.Key
	now    nostr.Timestamp
}

func newPagingFixture(t *testing.T) *pagingFixture {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	t.Cleanup(cancel)
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	author, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return &pagingFixture{t: t, ctx: ctx, agent: agent, author: author, now: nostr.Timestamp(time.Now().Unix())}
}

func (x *pagingFixture) filter(since nostr.Timestamp) nostr.Filter {
	return nostr.Filter{Kinds: []int{relay.KindMessage}, Tags: nostr.TagMap{"p": {x.agent.NostrPublicKey()}}, Since: &since}
}

// store publishes one event for each of ats (seconds before now) to url,
// over dial (nil: a WebSocket).
func (x *pagingFixture) store(url string, dial func(context.Context, string) (relay.Conn, error), ats ...nostr.Timestamp) map[string]bool {
	x.t.Helper()
	p := relay.StartedPool(x.t, []string{url}, dial)
	ids := map[string]bool{}
	for i, ago := range ats {
		ev := &nostr.Event{Kind: relay.KindMessage, CreatedAt: x.now - ago, Content: "stored " + string(rune('a'+i)),
			Tags: nostr.Tags{{"p", x.agent.NostrPublicKey()}}}
		if err := relay.SignEvent(x.author, ev); err != nil {
			x.t.Fatal(err)
		}
		if _, err := p.Publish(x.ctx, *ev); err != nil {
			x.t.Fatalf("publish: %v", err)
		}
		ids[ev.ID] = true
	}
	p.Close()
	return ids
}

// collect reads sub until it has delivered every id of want or nothing
// came for a while, and fails on an event delivered twice or not wanted.
func (x *pagingFixture) collect(sub *relay.Subscription, want map[string]bool) {
	x.t.Helper()
	got := map[string]bool{}
	for len(got) < len(want) {
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				x.t.Fatalf("subscription ended: %v", sub.Err())
			}
			if got[ev.ID] {
				x.t.Fatalf("%q delivered twice", ev.Content)
			}
			if !want[ev.ID] {
				x.t.Fatalf("%q delivered, not stored for this subscription", ev.Content)
			}
			got[ev.ID] = true
		case <-time.After(5 * time.Second):
			x.t.Fatalf("%d of the %d stored events delivered", len(got), len(want))
		}
	}
}

// The created_at of the events stored while the subscriber is away, in
// seconds before now: 8 events, two seconds holding two each, for a relay
// that returns 3 stored events a REQ. The pages end within a second, so
// the next one must take its until inclusively.
var pagingGap = []nostr.Timestamp{50, 49, 48, 48, 47, 46, 46, 45}

// A relay that caps the stored events a REQ returns (here 3) gives a
// subscriber back from an outage only the newest of what it missed:
// before, EOSE moved the relay's point past the rest, which was never
// delivered. The pool now pages back (until = the oldest created_at a
// page brought) before moving the point, and every event comes, once.
func TestPoolPagesACappedRelaysStoredEvents(t *testing.T) {
	t.Run("after a restart", func(t *testing.T) {
		x := newPagingFixture(t)
		url := serveCapped(t, 3)
		want := x.store(url, nil, pagingGap...)
		sp := relay.StartedPool(t, []string{url}, nil)
		relay.WaitFor(t, "connected", func() bool { return resumeStatus(sp, url).State == relay.StateConnected })
		// The point kept before the restart, from before the gap.
		sub, err := sp.SubscribeWith(x.ctx, x.filter(x.now-3600),
			relay.SubscribeOptions{Since: map[string]nostr.Timestamp{url: x.now - 600}})
		if err != nil {
			t.Fatal(err)
		}
		x.collect(sub, want)
		relay.WaitFor(t, "the point moved to the newest", func() bool { return sub.Resume()[url] == x.now-45 })
		select {
		case <-sub.EOSE():
		case <-x.ctx.Done():
			t.Fatal("no EOSE")
		}
	})
	t.Run("after a reconnect", func(t *testing.T) {
		x := newPagingFixture(t)
		url := serveCapped(t, 3)
		var cut atomic.Bool
		var mu sync.Mutex
		var last relay.Conn
		sp := relay.StartedPool(t, []string{url}, func(ctx context.Context, u string) (relay.Conn, error) {
			if cut.Load() {
				return nil, net.ErrClosed
			}
			c, err := relay.DialWebsocket(ctx, u)
			if err == nil {
				mu.Lock()
				last = c
				mu.Unlock()
			}
			return c, err
		})
		first := x.store(url, nil, 120)
		sub, err := sp.Subscribe(x.ctx, x.filter(x.now-3600))
		if err != nil {
			t.Fatal(err)
		}
		x.collect(sub, first)
		relay.WaitFor(t, "the first event's point", func() bool { return sub.Resume()[url] == x.now-120 })

		cut.Store(true)
		mu.Lock()
		last.Close()
		mu.Unlock()
		relay.WaitFor(t, "down", func() bool { return resumeStatus(sp, url).State != relay.StateConnected })
		want := x.store(url, nil, pagingGap...)
		cut.Store(false)
		x.collect(sub, want)
		relay.WaitFor(t, "the point moved to the newest", func() bool { return sub.Resume()[url] == x.now-45 })
	})
	t.Run("in process", func(t *testing.T) {
		// The node's own relay: its in-process connection is capped by
		// DefaultLimit as a socket's is.
		x := newPagingFixture(t)
		rel, err := embedded.New(embedded.Config{DBPath: ":memory:", Logger: slog.New(slog.DiscardHandler),
			MaxLimit: 3, DefaultLimit: 3})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { rel.Close() })
		const url = "ws://127.0.0.1:7447"
		dial := func(context.Context, string) (relay.Conn, error) { return rel.LocalConn() }
		want := x.store(url, dial, pagingGap...)
		sp := relay.StartedPool(t, []string{url}, dial)
		sub, err := sp.SubscribeWith(x.ctx, x.filter(x.now-3600),
			relay.SubscribeOptions{Since: map[string]nostr.Timestamp{url: x.now - 600}})
		if err != nil {
			t.Fatal(err)
		}
		x.collect(sub, want)
		relay.WaitFor(t, "the point moved to the newest", func() bool { return sub.Resume()[url] == x.now-45 })
	})
}

// On a relay that returns every stored event, paging costs one REQ more
// per subscription: the page before the oldest event brought, which
// brings nothing older.
func TestPoolPagingCostsOneREQOnAnUncappedRelay(t *testing.T) {
	x := newPagingFixture(t)
	url := serveEmbedded(t)
	want := x.store(url, nil, pagingGap...)
	var reqs atomic.Int64
	sp := relay.StartedPool(t, []string{url}, func(ctx context.Context, u string) (relay.Conn, error) {
		c, err := relay.DialWebsocket(ctx, u)
		if err != nil {
			return nil, err
		}
		return countingConn{Conn: c, reqs: &reqs}, nil
	})
	sub, err := sp.Subscribe(x.ctx, x.filter(x.now-600))
	if err != nil {
		t.Fatal(err)
	}
	x.collect(sub, want)
	relay.WaitFor(t, "the point moved to the newest", func() bool { return sub.Resume()[url] == x.now-45 })
	if n := reqs.Load(); n > 2 {
		t.Errorf("%d REQs, want at most 2", n)
	}
	if st := resumeStatus(sp, url); st.EventsDuplicate > 1 {
		// The page brings again the events of the oldest second.
		t.Errorf("%d events brought twice, want at most the 1 of the oldest second", st.EventsDuplicate)
	}
}

// A second that holds more events than the relay returns in a REQ (a
// burst of requests, or a sender filling one second on purpose) stops
// the pages at that second: a page until it brings only events of that
// second, none older, which read as the end of the stored events, and the
// relay's point moved past every older event of the gap, never delivered.
// Past such a second the pages go on from the second before it.
func TestPoolPagesPastASecondFullerThanTheCap(t *testing.T) {
	x := newPagingFixture(t)
	url := serveCapped(t, 3)
	// Four events in the newest second, one more than the cap, then three
	// older ones.
	older := x.store(url, nil, 50, 49, 48)
	x.store(url, nil, 45, 45, 45, 45)
	sp := relay.StartedPool(t, []string{url}, nil)
	sub, err := sp.SubscribeWith(x.ctx, x.filter(x.now-3600),
		relay.SubscribeOptions{Since: map[string]nostr.Timestamp{url: x.now - 600}})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for len(got) < len(older) {
		select {
		case ev := <-sub.Events():
			if older[ev.ID] {
				got[ev.ID] = true
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of the %d events older than the full second delivered; Resume = %v",
				len(got), len(older), sub.Resume())
		}
	}
	relay.WaitFor(t, "the point moved to the newest", func() bool { return sub.Resume()[url] == x.now-45 })
}
