package snapnostr_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/ratelimit"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// denials is a key limiter that counts the requests it refuses.
type denials struct {
	snap.Limiter
	n atomic.Int32
}

func (d *denials) Allow(key string) (bool, time.Duration) {
	ok, after := d.Limiter.Allow(key)
	if !ok {
		d.n.Add(1)
	}
	return ok, after
}

// requestAs sends tasks/get from key, stored, dated ago in the past, and
// returns its answer (or failure) on a channel.
func (r *stopRig) requestAs(ctx context.Context, key *identity.Key, ago time.Duration) <-chan error {
	p := relay.NewPool(relay.PoolConfig{URLs: []string{r.url}, Logger: quiet()})
	p.Start(ctx)
	r.t.Cleanup(func() { p.Close() })
	c := client.NewNostr(client.NostrConfig{Key: key, Relays: p, Logger: quiet(),
		Now: func() time.Time { return time.Now().Add(-ago) }})
	target := client.Target{Address: r.agent.Address(identity.Mainnet), PubKey: r.agent.NostrPublicKey()}
	answered := make(chan error, 1)
	go func() {
		_, err := c.Request(ctx, target, client.NostrRequest{Method: "tasks/get", Payload: []byte(`{"taskId":"t"}`), Persist: true})
		answered <- err
	}()
	return answered
}

// A stored request still waiting in the backlog for its key's allowance
// as the node stops is neither answered nor lost: the relay's point
// written at the stop stays behind it, though the relay brought a request
// dated 20 s later that was processed, and the restart asks the relay for
// it again and processes it, and it alone: the requests processed before
// the stop are not processed again.
func TestInboxStopKeepsTheRelayPointBehindARequestWaitingForItsRate(t *testing.T) {
	r := newStopRig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	peer, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	other, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	// Sent while the node is down: the peer's two, past its burst of
	// one, and another key's, dated now. Which of the peer's two waits
	// is the relay's order's.
	peerAt := [2]nostr.Timestamp{}
	var peers [2]<-chan error
	for i, ago := range []time.Duration{30 * time.Second, 20 * time.Second} {
		peerAt[i] = nostr.Timestamp(time.Now().Add(-ago).Unix())
		peers[i] = r.requestAs(ctx, peer, ago)
		waitUntil(t, "the peer's request stored", func() bool { return len(storedRequests(t, r.url, r.agent)) == i+1 })
	}
	others := r.requestAs(ctx, other, 0)
	waitUntil(t, "the other key's stored", func() bool { return len(storedRequests(t, r.url, r.agent)) == 3 })

	lim := &denials{Limiter: ratelimit.New(ratelimit.Config{Rate: 0.001, Burst: 1})}
	first := r.start(func(c *snapnostr.InboxConfig) { c.KeyLimiter = lim })
	if err := <-others; err != nil {
		t.Fatalf("the other key's request: %v", err)
	}
	w := 0 // the peer's request that waits
	select {
	case err := <-peers[0]:
		if err != nil {
			t.Fatalf("the peer's request within its rate: %v", err)
		}
		w = 1
	case err := <-peers[1]:
		if err != nil {
			t.Fatalf("the peer's request within its rate: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("neither of the peer's requests was answered")
	}
	waitUntil(t, "the peer's other request over its rate", func() bool { return lim.n.Load() > 0 })
	first.stop()
	if err := <-first.done; err != nil {
		t.Fatalf("inbox: %v", err)
	}
	if n := r.calls.Load(); n != 2 {
		t.Fatalf("%d requests handled, want 2: the peer's second waits for its rate", n)
	}
	waiting := peers[w]
	select {
	case err := <-waiting:
		t.Fatalf("the request waiting for its rate was answered before the restart: %v", err)
	default:
	}
	r.checkPoint(peerAt[w], "the request waiting for its key's rate")

	second := r.start()
	if err := <-waiting; err != nil {
		t.Fatalf("the request waiting for its key's rate as the node stopped, after the restart: %v", err)
	}
	second.stop()
	if err := <-second.done; err != nil {
		t.Fatalf("inbox: %v", err)
	}
	if n := r.calls.Load(); n != 3 {
		t.Fatalf("%d requests handled, want 3: each once", n)
	}
}
