package embedded

import (
	"context"
	"fmt"
	"math"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/peercap"
)

// TestRelayQueriesPerIP: while a peer runs its MaxQueriesPerIP queries,
// its next REQ waits for a turn, and past the wait gets CLOSED
// "rate-limited:"; another address's REQ is not held, and the waiting
// REQ is answered once a turn frees.
func TestRelayQueriesPerIP(t *testing.T) {
	tr := startRelay(t, Config{MaxQueriesPerIP: 1})
	url := frontRelay(t, tr.Relay)
	k := newKey(t)
	dial(t, tr.url).mustPublish(k.event(t, 1, tr.clock.Unix(), "stored"))

	const from = "203.0.113.7"
	peer := peerName(peercap.Key(net.JoinHostPort(from, "1")))
	// The peer's one turn, taken as one of its connections would.
	release, err := tr.queries.acquire(t.Context(), peer, 0)
	if err != nil {
		t.Fatal(err)
	}

	tr.queryWait = 0
	c := mustDialFrom(t, url, from)
	c.send("REQ", "busy", map[string]any{})
	m := c.expect("CLOSED")
	if m.str(0) != "busy" || !strings.HasPrefix(m.str(1), "rate-limited: ") {
		t.Fatalf("REQ past the peer's queries: %s, want CLOSED busy rate-limited", joinRaw(m.args))
	}

	other := mustDialFrom(t, url, "198.51.100.1")
	if got := other.req("o", map[string]any{}); len(got) != 1 {
		t.Fatalf("another address got %d events, want 1", len(got))
	}

	tr.queryWait = time.Minute
	c.send("REQ", "wait", map[string]any{})
	waitUntil(t, func() bool { return tr.queries.waiting(peer) == 1 }, func() string {
		return fmt.Sprintf("%d REQs waiting, want 1", tr.queries.waiting(peer))
	})
	release()
	if m := c.expect("EVENT"); m.str(0) != "wait" {
		t.Fatalf("got %s", joinRaw(m.args))
	}
	c.expect("EOSE")
	waitUntil(t, func() bool { return tr.queries.len() == 0 }, func() string {
		return fmt.Sprintf("%d peers still counted", tr.queries.len())
	})
}

// TestQuerySlots: a peer's turns are bounded, given back, and waited for
// in order; the wait ends with the context or the time allowed.
func TestQuerySlots(t *testing.T) {
	q := newQuerySlots(2)
	ctx := context.Background()
	r1, err := q.acquire(ctx, "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := q.acquire(ctx, "a", 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.acquire(ctx, "a", 0); err != errBusy {
		t.Fatalf("third turn: %v, want errBusy", err)
	}
	rb, err := q.acquire(ctx, "b", 0)
	if err != nil {
		t.Fatalf("another peer: %v", err)
	}
	rb()
	cctx, cancel := context.WithCancel(ctx)
	got := make(chan error, 1)
	go func() {
		_, err := q.acquire(cctx, "a", time.Hour)
		got <- err
	}()
	waitUntil(t, func() bool { return q.waiting("a") == 1 }, func() string { return "not waiting" })
	cancel()
	if err := <-got; err != context.Canceled {
		t.Fatalf("cancelled wait: %v", err)
	}
	go func() {
		r, err := q.acquire(ctx, "a", time.Hour)
		if err == nil {
			r()
		}
		got <- err
	}()
	waitUntil(t, func() bool { return q.waiting("a") == 1 }, func() string { return "not waiting" })
	r1()
	if err := <-got; err != nil {
		t.Fatalf("wait for a turn: %v", err)
	}
	r2()
	r2() // a second release gives back nothing
	if q.len() != 0 {
		t.Fatalf("%d peers counted after every turn ended", q.len())
	}
}

// TestRelayQueryTimeout: a REQ whose queries outlast QueryTimeout gets
// CLOSED "error:", and the connection goes on.
func TestRelayQueryTimeout(t *testing.T) {
	tr := startRelay(t, Config{QueryTimeout: time.Nanosecond})
	c := dial(t, tr.url)
	k := newKey(t)
	c.mustPublish(k.event(t, 1, tr.clock.Unix(), "stored", nostr.Tag{"p", k.pk}))
	c.send("REQ", "slow", map[string]any{"kinds": []int{1}, "#p": []string{k.pk}})
	m := c.expect("CLOSED")
	if m.str(0) != "slow" || !strings.HasPrefix(m.str(1), "error: ") || !strings.Contains(m.str(1), "took too long") {
		t.Fatalf("REQ past QueryTimeout: %s, want CLOSED slow error: ... took too long", joinRaw(m.args))
	}
	c.mustPublish(k.event(t, 1, tr.clock.Unix(), "again"))
}

// TestMaxQueriesPerIPDefault: one turn for a peer by default, the
// readers' part of the connections a peer may hold otherwise.
func TestMaxQueriesPerIPDefault(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want int
	}{
		{Config{}, 1},
		{Config{MaxConnectionsPerIP: DefaultMaxConnections}, storeReaders},
		{Config{MaxConnections: 8, MaxConnectionsPerIP: 3}, 2},
		{Config{MaxQueriesPerIP: 3}, 3},
	} {
		c, err := tc.cfg.withDefaults()
		if err != nil {
			t.Fatal(err)
		}
		if c.MaxQueriesPerIP != tc.want {
			t.Errorf("%+v: MaxQueriesPerIP %d, want %d", tc.cfg, c.MaxQueriesPerIP, tc.want)
		}
	}
}

// TestRelayReqRate: a connection's REQs past ReqsPerSecond (after a
// burst of ReqBurst) get CLOSED "rate-limited:", the subscription of the
// same id with them; the bucket refills with time. Loopback clients are
// not limited.
func TestRelayReqRate(t *testing.T) {
	tr := startRelay(t, Config{ReqsPerSecond: 1, ReqBurst: 2})
	c := mustDialFrom(t, frontRelay(t, tr.Relay), "203.0.113.7")
	c.req("a", map[string]any{})
	c.req("b", map[string]any{})
	c.send("REQ", "a", map[string]any{})
	m := c.expect("CLOSED")
	if m.str(0) != "a" || !strings.HasPrefix(m.str(1), "rate-limited: ") {
		t.Fatalf("REQ past the rate: %s, want CLOSED a rate-limited", joinRaw(m.args))
	}
	tr.clock.Advance(1)
	c.req("c", map[string]any{})

	local := dial(t, tr.url)
	for i := range 5 {
		local.req(fmt.Sprint("l", i), map[string]any{})
	}
}

// TestReqRateConfig: a rate that is not positive and finite is refused.
func TestReqRateConfig(t *testing.T) {
	for _, rate := range []float64{-1, math.NaN(), math.Inf(1)} {
		if _, err := (Config{ReqsPerSecond: rate}).withDefaults(); err == nil {
			t.Errorf("ReqsPerSecond %g taken", rate)
		}
	}
}
