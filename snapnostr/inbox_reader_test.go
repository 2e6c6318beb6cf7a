package snapnostr_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// gatedCheckpoint is a Checkpoint whose Seen waits until open is closed,
// and counts the calls that gave up waiting (their context ended).
type gatedCheckpoint struct {
	snapnostr.Checkpoint
	open    chan struct{}
	gaveUp  atomic.Int32
	release func()
}

func (c *gatedCheckpoint) Seen(ctx context.Context, id string) (bool, error) {
	select {
	case <-c.open:
	case <-ctx.Done():
		c.gaveUp.Add(1)
		return false, ctx.Err()
	}
	return c.Checkpoint.Seen(ctx, id)
}

// storedCounter is a pool that counts the stored events it handed the
// inbox and the inbox returned from: the subscription's reader is free
// again once it has.
type storedCounter struct {
	*relay.Pool
	returned atomic.Int32
}

func (p *storedCounter) SubscribeWith(ctx context.Context, f nostr.Filter, o relay.SubscribeOptions) (*relay.Subscription, error) {
	if stored := o.Stored; stored != nil {
		o.Stored = func(ev *nostr.Event) { stored(ev); p.returned.Add(1) }
	}
	return p.Pool.SubscribeWith(ctx, f, o)
}

// The stored requests a start's catch-up brings are handed over without
// the relay connection's reader waiting for the checkpoint: with its
// Seen held, every one is handed over and the reader is free, and once
// it answers, the requests processed before the start are skipped and
// the others processed, each once. Before, the reader asked the
// checkpoint about each stored request itself, a database read in turn
// holding up every other event of the connection; held, it waited
// seenTimeout (2 s) on the first, then let the others through unchecked.
func TestInboxReaderDoesNotWaitForTheCheckpoint(t *testing.T) {
	const n = 40
	url := startRelay(t)
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	self := agent.Address(identity.Mainnet)
	var counter taskCounter
	server := counter.server(agent, snap.Config{Replay: snap.NewMemoryReplayStore(0)})
	mu, handled := &counter.mu, counter.handled

	// The requests, stored while the node was down; the even ones
	// processed before it stopped (in its checkpoint, not in its replay
	// store: only the checkpoint stops them).
	ctx := t.Context()
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	tr := &keeper{Pool: newPool(t, url)}
	c := client.NewNostr(client.NostrConfig{Key: k, Relays: tr, Logger: quiet()})
	target := client.Target{Address: self, PubKey: agent.NostrPublicKey()}
	for i := range n {
		rctx, cancel := context.WithCancel(ctx)
		tr.kept = cancel
		_, err := c.Request(rctx, target, client.NostrRequest{Method: "tasks/get",
			Payload: fmt.Appendf(nil, `{"taskId":"t%d"}`, i), Persist: true})
		cancel()
		if !errors.Is(err, client.ErrTimeout) {
			t.Fatalf("request %d: %v, want it kept", i, err)
		}
	}
	publishAll(t, url, tr.evs)
	mem := snapnostr.NewMemoryCheckpoint()
	for i, ev := range tr.evs {
		if i%2 == 0 {
			if err := mem.Done(ctx, ev.ID, ev.CreatedAt); err != nil {
				t.Fatal(err)
			}
		}
	}
	cp := &gatedCheckpoint{Checkpoint: mem, open: make(chan struct{})}
	cp.release = sync.OnceFunc(func() { close(cp.open) })
	defer cp.release()

	pool := &storedCounter{Pool: newPool(t, url)}
	inbox := snapnostr.NewInbox(snapnostr.InboxConfig{Key: agent, Transport: pool, Handler: server,
		Checkpoint: cp, Logger: quiet(), Workers: 2})
	ictx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- inbox.Run(ictx) }()
	end := sync.OnceFunc(func() {
		cp.release()
		stop()
		if err := <-done; err != nil {
			t.Errorf("inbox: %v", err)
		}
	})
	defer end()
	waitUntil(t, "every stored request handed over", func() bool { return pool.returned.Load() == n })
	if got := cp.gaveUp.Load(); got > 0 {
		t.Fatalf("the reader waited for the checkpoint: %d Seen calls gave up", got)
	}
	mu.Lock()
	early := len(handled)
	mu.Unlock()
	if early > 0 {
		t.Fatalf("%d requests processed before the checkpoint answered", early)
	}
	cp.release()
	waitUntil(t, "the requests not processed before processed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(handled) == n/2
	})
	end() // its requests finished
	mu.Lock()
	defer mu.Unlock()
	for i := range n {
		id := fmt.Sprint("t", i)
		if want := i%2 == 1; (handled[id] == 1) != want || handled[id] > 1 {
			t.Errorf("request %s processed %d times; processed before the start: %v", id, handled[id], !want)
		}
	}
}
