package snapnostr_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/relaytest"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// A stored request published on relay B alone while the inbox's
// connection to B was down is answered once B is back, although relay A
// delivered newer requests meanwhile. Before, the pool asked B again only
// for what was newer than the newest event from any relay (A's) minus
// 10 s, and the request, 30 s older, was never received.
func TestInboxReceivesARequestFromARelayThatWasDown(t *testing.T) {
	aURL, bURL := startRelay(t), startRelay(t)
	toB := &relaytest.Cuttable{URL: bURL} // the inbox's way to B
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	inboxPool := relay.NewPool(relay.PoolConfig{URLs: []string{aURL, bURL}, Logger: quiet(),
		BackoffBase: 20 * time.Millisecond, BackoffMax: 100 * time.Millisecond, Dial: toB.Dial})
	inboxPool.Start(ctx)
	t.Cleanup(func() { inboxPool.Close() })

	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	self := agent.Address(identity.Mainnet)
	var calls atomic.Int32
	server := snap.NewServer(snap.ServerConfig{Key: agent, Router: countingRouter(&calls), Logger: quiet(),
		MaxResponseSize: relay.MaxNIP44Plain,
		Validator:       snap.NewValidator(snap.Config{Self: self, Replay: snap.NewMemoryReplayStore(0)})})
	inbox := snapnostr.NewInbox(snapnostr.InboxConfig{Key: agent, Transport: inboxPool, Handler: server,
		Logger: quiet(), Workers: 2})
	inboxDone := make(chan error, 1)
	go func() { inboxDone <- inbox.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-inboxDone })
	select {
	case <-inbox.Ready():
	case err := <-inboxDone:
		t.Fatalf("inbox: %v", err)
	}
	waitUntil(t, "the inbox on both relays", func() bool {
		h := inboxPool.Health()
		return h[0].State == relay.StateConnected && h[1].State == relay.StateConnected
	})
	target := client.Target{Address: self, PubKey: agent.NostrPublicKey()}
	requester := func(url string, now func() time.Time) *client.Nostr {
		k, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		return client.NewNostr(client.NostrConfig{Key: k, Relays: newPool(t, url), Logger: quiet(), Now: now})
	}
	get := client.NostrRequest{Method: "tasks/get", Payload: []byte(`{"taskId":"t"}`), Persist: true}

	// The inbox's connection to B drops, and stays away.
	toB.Cut()
	waitUntil(t, "B seen down", func() bool { return inboxPool.Health()[1].State != relay.StateConnected })

	// A request stored on B alone, dated 30 s ago (sent just before the
	// drop, which the pool notices late).
	onB := requester(bURL, func() time.Time { return time.Now().Add(-30 * time.Second) })
	answered := make(chan error, 1)
	go func() {
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		_, err := onB.Request(rctx, target, get)
		answered <- err
	}()
	waitUntil(t, "the request stored on B", func() bool { return len(storedRequests(t, bURL, agent)) == 1 })

	// A newer request through A is answered.
	rctx, rcancel := context.WithTimeout(ctx, 20*time.Second)
	defer rcancel()
	if _, err := requester(aURL, nil).Request(rctx, target, get); err != nil {
		t.Fatalf("request through A: %v", err)
	}

	// B comes back: its request is received and answered.
	toB.Restore()
	if err := <-answered; err != nil {
		t.Fatalf("request stored on B while the inbox was away: %v", err)
	}
	if calls.Load() != 2 {
		t.Fatalf("%d requests handled, want 2", calls.Load())
	}
}

// storedRequests returns the requests (kind 4339) to agent the relay at
// url holds.
func storedRequests(t *testing.T, url string, agent *identity.Key) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p := relay.NewPool(relay.PoolConfig{URLs: []string{url}, Logger: quiet()})
	p.Start(ctx)
	defer p.Close()
	evs, err := p.Query(ctx, nostr.Filter{Kinds: []int{relay.KindMessage}, Tags: nostr.TagMap{"p": {agent.NostrPublicKey()}}})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, len(evs))
	for i, ev := range evs {
		ids[i] = ev.ID
	}
	return ids
}
