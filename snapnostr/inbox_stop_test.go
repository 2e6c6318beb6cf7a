package snapnostr_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// stoppingCheckpoint is a MemoryCheckpoint whose Seen, once onSeen is
// set, calls it and fails on the context it was given, as a Seen does
// when the node stops while it runs.
type stoppingCheckpoint struct {
	*snapnostr.MemoryCheckpoint
	mu     sync.Mutex
	onSeen func()
}

func (c *stoppingCheckpoint) Seen(ctx context.Context, id string) (bool, error) {
	c.mu.Lock()
	f := c.onSeen
	c.onSeen = nil
	c.mu.Unlock()
	if f == nil {
		return c.MemoryCheckpoint.Seen(ctx, id)
	}
	f()
	<-ctx.Done()
	return false, ctx.Err()
}

// stopRig is one relay, an agent answering tasks/get on it, and a
// checkpoint that has processed a request a minute ago and kept the
// relay's point then, as a node running for a while has.
type stopRig struct {
	t        *testing.T
	url      string
	agent    *identity.Key
	server   *snap.Server
	calls    atomic.Int32
	cp       *stoppingCheckpoint
	lookback time.Duration
}

func newStopRig(t *testing.T) *stopRig {
	r := &stopRig{t: t, url: startRelay(t), lookback: 5 * time.Second,
		cp: &stoppingCheckpoint{MemoryCheckpoint: snapnostr.NewMemoryCheckpoint()}}
	var err error
	if r.agent, err = identity.Generate(); err != nil {
		t.Fatal(err)
	}
	self := r.agent.Address(identity.Mainnet)
	r.server = snap.NewServer(snap.ServerConfig{Key: r.agent, Router: countingRouter(&r.calls), Logger: quiet(),
		MaxResponseSize: relay.MaxNIP44Plain,
		Validator:       snap.NewValidator(snap.Config{Self: self, Replay: snap.NewMemoryReplayStore(0)})})
	ctx := context.Background()
	minuteAgo := nostr.Timestamp(time.Now().Add(-time.Minute).Unix())
	if err := r.cp.Done(ctx, "earlier", minuteAgo); err != nil {
		t.Fatal(err)
	}
	if err := r.cp.Reached(ctx, map[string]nostr.Timestamp{r.url: minuteAgo}); err != nil {
		t.Fatal(err)
	}
	return r
}

// running is an inbox of a stopRig: stop ends its Run, done gets what
// Run returned (once its pool is closed).
type running struct {
	inbox *snapnostr.Inbox
	stop  func()
	done  <-chan error
}

// start runs an inbox on a pool of its own, once it has subscribed.
func (r *stopRig) start(opts ...func(*snapnostr.InboxConfig)) running {
	t := r.t
	ctx, cancel := context.WithCancel(context.Background())
	pool := relay.NewPool(relay.PoolConfig{URLs: []string{r.url}, Logger: quiet()})
	pool.Start(ctx)
	cfg := snapnostr.InboxConfig{Key: r.agent, Transport: pool, Handler: r.server,
		Checkpoint: r.cp, Logger: quiet(), Workers: 2, Lookback: r.lookback}
	for _, o := range opts {
		o(&cfg)
	}
	inbox := snapnostr.NewInbox(cfg)
	ran := make(chan error, 1)
	go func() { ran <- inbox.Run(ctx) }()
	out := make(chan error, 1)
	go func() { err := <-ran; pool.Close(); out <- err }()
	t.Cleanup(func() { cancel() })
	select {
	case <-inbox.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("the inbox did not subscribe")
	}
	return running{inbox: inbox, stop: cancel, done: out}
}

// request is requestAs from a key of its own.
func (r *stopRig) request(ctx context.Context, ago time.Duration) <-chan error {
	k, err := identity.Generate()
	if err != nil {
		r.t.Fatal(err)
	}
	return r.requestAs(ctx, k, ago)
}

// checkPoint fails the test when the relay's point kept, less the
// lookback, is past at: a restart would not ask the relay for a
// request dated at.
func (r *stopRig) checkPoint(at nostr.Timestamp, what string) {
	r.t.Helper()
	points, err := r.cp.Relays(context.Background())
	if err != nil {
		r.t.Fatal(err)
	}
	if p := points[r.url]; p-nostr.Timestamp(r.lookback/time.Second) > at {
		r.t.Fatalf("the relay's point written as the inbox stopped, %v, is more than the lookback (%v) past %s (%v): the restart never asks for it",
			p.Time().UTC(), r.lookback, what, at.Time().UTC())
	}
}

// A request that arrives as the node stops, and is dropped (its
// checkpoint Seen fails on the canceled context), is not passed by the
// relay's point written once Run's requests are finished: after a
// restart the relay is asked for it again, and it is answered. Before,
// the point written at the stop was the newest created_at the relay had
// brought (a request dated now), 30 s past the dropped one, and with a
// lookback of 5 s the restart never asked for it.
func TestInboxStopKeepsTheRelayPointBehindARequestDropped(t *testing.T) {
	r := newStopRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := r.start()
	if err := <-r.request(ctx, 0); err != nil {
		t.Fatalf("the request dated now: %v", err)
	}
	// The next Seen (the stored request dated 30 s ago: dated before the
	// inbox began) stops the node while it runs.
	r.cp.mu.Lock()
	r.cp.onSeen = first.stop
	r.cp.mu.Unlock()
	droppedAt := nostr.Timestamp(time.Now().Add(-30 * time.Second).Unix())
	dropped := r.request(ctx, 30*time.Second)
	select {
	case err := <-first.done:
		if err != nil {
			t.Fatalf("inbox: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the inbox did not stop")
	}
	if n := r.calls.Load(); n != 1 {
		t.Fatalf("%d requests handled, want 1 (the one dated 30 s ago dropped as the node stopped)", n)
	}
	r.checkPoint(droppedAt, "the request dropped")

	second := r.start()
	if err := <-dropped; err != nil {
		t.Fatalf("the request dropped as the node stopped, after the restart: %v", err)
	}
	second.stop()
	if err := <-second.done; err != nil {
		t.Fatalf("inbox: %v", err)
	}
	if n := r.calls.Load(); n != 2 {
		t.Fatalf("%d requests handled, want 2", n)
	}
}

// A request kept aside for another replica (Shares) when the node stops
// cleanly is not passed by the relay's point written then: should its
// owner be gone too, the restart asks the relay for it again and takes
// it. Before, the point written was the newest created_at the relay had
// brought (a request of this replica's dated now), 30 s past the one
// kept aside, and the restart never asked for it.
func TestInboxStopKeepsTheRelayPointBehindARequestDeferred(t *testing.T) {
	r := newStopRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sh := &switchShares{grace: time.Hour}
	sh.mine.Store(true)
	first := r.start(func(c *snapnostr.InboxConfig) { c.Shares = sh })
	if err := <-r.request(ctx, 0); err != nil {
		t.Fatalf("the request dated now: %v", err)
	}
	sh.mine.Store(false)
	keptAt := nostr.Timestamp(time.Now().Add(-30 * time.Second).Unix())
	kept := r.request(ctx, 30*time.Second)
	waitUntil(t, "the request kept aside", func() bool { return first.inbox.Shared().Now == 1 })
	first.stop()
	if err := <-first.done; err != nil {
		t.Fatalf("inbox: %v", err)
	}
	r.checkPoint(keptAt, "the request kept aside")

	// Its owner gone too: the restarted inbox takes every request.
	sh.mine.Store(true)
	second := r.start(func(c *snapnostr.InboxConfig) { c.Shares = sh })
	if err := <-kept; err != nil {
		t.Fatalf("the request kept aside as the node stopped, after the restart: %v", err)
	}
	second.stop()
	if err := <-second.done; err != nil {
		t.Fatalf("inbox: %v", err)
	}
	if n := r.calls.Load(); n != 2 {
		t.Fatalf("%d requests handled, want 2", n)
	}
}

// A relay with no point kept (one added to the configuration, or never
// reached) is held behind the requests in flight as the others are: its
// point is kept from the moment Run begins, where it begins from. Before,
// it had none until a minute-by-minute write could keep one, so that a
// node killed in its first minute, or one that stopped with a request
// dropped (which holds every write back), restarted that relay from the
// newest request processed: here one dated now, 30 s past the request
// dropped, which the restart never asked for.
func TestInboxStopKeepsARelayWithNoPointBehindARequestDropped(t *testing.T) {
	r := newStopRig(t)
	// The relay has no point kept: only the request processed before.
	r.cp.MemoryCheckpoint = snapnostr.NewMemoryCheckpoint()
	if err := r.cp.Done(context.Background(), "earlier", nostr.Timestamp(time.Now().Add(-time.Minute).Unix())); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first := r.start()
	if err := <-r.request(ctx, 0); err != nil {
		t.Fatalf("the request dated now: %v", err)
	}
	droppedAt := nostr.Timestamp(time.Now().Add(-30 * time.Second).Unix())
	// As the request is received: a node killed now restarts from the
	// points kept then.
	var kept map[string]nostr.Timestamp
	r.cp.mu.Lock()
	r.cp.onSeen = func() {
		var err error
		if kept, err = r.cp.Relays(context.Background()); err != nil {
			t.Error(err)
		}
		first.stop()
	}
	r.cp.mu.Unlock()
	dropped := r.request(ctx, 30*time.Second)
	select {
	case err := <-first.done:
		if err != nil {
			t.Fatalf("inbox: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("the inbox did not stop")
	}
	if p, ok := kept[r.url]; !ok || p-nostr.Timestamp(r.lookback/time.Second) > droppedAt {
		t.Fatalf("the relay's point kept as the request was received: %v (kept: %v), want one at most the lookback past %v",
			p.Time().UTC(), ok, droppedAt.Time().UTC())
	}
	r.checkPoint(droppedAt, "the request dropped")

	second := r.start()
	if err := <-dropped; err != nil {
		t.Fatalf("the request dropped as the node stopped, after the restart: %v", err)
	}
	second.stop()
	if err := <-second.done; err != nil {
		t.Fatalf("inbox: %v", err)
	}
	if n := r.calls.Load(); n != 2 {
		t.Fatalf("%d requests handled, want 2", n)
	}
}
