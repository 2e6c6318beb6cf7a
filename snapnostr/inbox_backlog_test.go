package snapnostr

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/fairqueue"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
)

// backlogRig is an inbox, its queue and its backlog, and two peers.
type backlogRig struct {
	*shareRig
	other *identity.Key
	wait  *backlog
}

func newBacklogRig(t *testing.T, cfg InboxConfig, queue, backlogLen int, backlogBytes int64) *backlogRig {
	t.Helper()
	cfg.Transport = &publishCounter{}
	r := &backlogRig{shareRig: newShareRig(t, cfg)}
	var err error
	if r.other, err = identity.Generate(); err != nil {
		t.Fatal(err)
	}
	r.in.cfg.Handler = snap.NewServer(snap.ServerConfig{Key: r.agent, Router: snap.NewRouter(), Logger: r.in.cfg.Logger})
	r.jobs = fairqueue.New[string, *nostr.Event](queue)
	r.wait = &backlog{q: fairqueue.New[string, *nostr.Event](backlogLen), max: backlogBytes}
	return r
}

// signed returns a stored request from key to the agent.
func (r *backlogRig) signed(key *identity.Key, content string) *nostr.Event {
	r.t.Helper()
	ev := &nostr.Event{CreatedAt: nostr.Now(), Kind: relay.KindMessage,
		Tags: nostr.Tags{{"p", r.agent.NostrPublicKey()}}, Content: content}
	if err := relay.SignEvent(key, ev); err != nil {
		r.t.Fatal(err)
	}
	return ev
}

// keys returns the authors of what the backlog holds, in turn, emptying
// it.
func (r *backlogRig) drain() (keys []string) {
	r.wait.q.Close()
	for ev, ok := r.wait.q.Pop(); ok; ev, ok = r.wait.q.Pop() {
		keys = append(keys, ev.PubKey)
	}
	return keys
}

// The backlog's bound on bytes is as fair as its bound on requests: a key
// whose stored requests fill its bytes loses its newest to another key's,
// rather than shutting every other key out of the backlog.
func TestBacklogBytesServeKeysInTurn(t *testing.T) {
	r := newBacklogRig(t, InboxConfig{}, 1, 100, 0)
	flood := r.signed(r.peer, "a request of the flooding key")
	size := relay.EventSize(flood)
	r.wait.max = 3 * size // three requests' worth
	r.in.admitTo(r.ctx, flood, r.jobs, r.wait, true, r.refusals, false)
	for range 2 {
		r.in.admitTo(r.ctx, r.signed(r.peer, "a request of the flooding key"), r.jobs, r.wait, true, r.refusals, false)
	}
	// The backlog's bytes are full, of one key's requests: a fourth of
	// them goes to the queue, a fifth is refused.
	r.in.admitTo(r.ctx, r.signed(r.peer, "a request of the flooding key"), r.jobs, r.wait, true, r.refusals, false)
	r.in.admitTo(r.ctx, r.signed(r.peer, "a request of the flooding key"), r.jobs, r.wait, true, r.refusals, false)
	// Another key's stored request takes the place of the flood's newest.
	genuine := r.signed(r.other, "a request of another key!!!!!")
	if relay.EventSize(genuine) != size {
		t.Fatalf("the requests' sizes differ: %d and %d", relay.EventSize(genuine), size)
	}
	r.in.admitTo(r.ctx, genuine, r.jobs, r.wait, true, r.refusals, false)
	if n := r.wait.bytes.Load(); n > r.wait.max {
		t.Errorf("the backlog holds %d bytes, past its %d", n, r.wait.max)
	}
	keys := r.drain()
	if len(keys) != 3 || keys[0] != r.peer.NostrPublicKey() || keys[1] != r.other.NostrPublicKey() {
		t.Fatalf("the backlog holds requests of %v, want the flooding key's first, the other's second", keys)
	}
	if n := inFlight(t, r.in); n != 4 {
		t.Fatalf("%d requests counted in flight, want 4: three in the backlog, one queued", n)
	}
}

// A stored request the feeder moved into the queue, and that a live
// request of another key then pushes out of it, goes back to the backlog
// to wait for room again: it is not refused 5003, as a stored request is
// only past the backlog's bounds.
func TestStoredRequestPushedOutOfTheQueueWaitsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBacklogRig(t, InboxConfig{}, 2, 8, 1<<20)
		ctx, cancel := context.WithCancel(r.ctx)
		defer cancel()
		fed := make(chan struct{})
		go func() { r.in.feed(ctx, r.wait, r.jobs, r.refusals); close(fed) }()
		defer func() { r.wait.q.Close(); <-fed }()
		want := map[string]bool{}
		for i := range 3 {
			ev := r.signed(r.peer, fmt.Sprint("stored ", i))
			want[ev.ID] = true
			r.in.admitTo(r.ctx, ev, r.jobs, r.wait, true, r.refusals, false)
		}
		synctest.Wait() // two in the queue, the feeder waiting with the third
		if n := r.jobs.Len(); n != 2 {
			t.Fatalf("%d stored requests queued, want 2", n)
		}
		live := r.signed(r.other, "live")
		want[live.ID] = true
		r.in.receive(r.ctx, live, r.jobs, r.wait, false, r.refusals) // pushes the peer's newest out
		synctest.Wait()
		if n := r.in.cfg.Transport.(*publishCounter).published.Load(); n != 0 {
			t.Errorf("%d refusals sent, want none: the stored request pushed out waits again", n)
		}
		// The workers: each request served once, the stored included.
		for len(want) > 0 {
			synctest.Wait()
			ev, ok := r.jobs.Pop()
			if !ok || !want[ev.ID] {
				t.Fatalf("popped %v, %v; still waiting for %d requests", ev, ok, len(want))
			}
			delete(want, ev.ID)
			r.in.marks.finished(ev)
			if len(want) > 0 && r.jobs.Len()+r.wait.q.Len() == 0 {
				synctest.Wait()
				if r.jobs.Len() == 0 {
					t.Fatalf("%d requests never came back to the queue", len(want))
				}
			}
		}
		if n := inFlight(t, r.in); n != 0 {
			t.Errorf("%d requests counted in flight once all are served", n)
		}
	})
}

// A request kept aside for another replica that nobody took, taken up
// late here as the catch-up fills the queue, waits in the backlog for
// room: a late request is never refused (its owner might have answered
// it), so one the full queue refused was dropped unanswered, by every
// replica.
func TestLateRequestWaitsInTheBacklogForAFullQueue(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := &testClock{}
	clock.set(now)
	recorded := recordedSet{snap.NewMemoryReplayStore(0), map[string]bool{}}
	shares := &switchShares{grace: time.Second}
	r := newBacklogRig(t, InboxConfig{Now: clock.now, Shares: shares, Replay: recorded}, 1, 8, 1<<20)
	shares.mine.Store(true)
	r.in.take(r.ctx, r.signed(r.other, "the queue's one"), r.jobs, r.refusals)
	shares.mine.Store(false)
	aside := r.signed(r.peer, "kept aside")
	r.in.setAside(r.ctx, aside, r.jobs, r.wait, r.refusals)
	clock.set(now.Add(time.Second))
	r.in.reviewPass(r.ctx, r.jobs, r.wait, r.refusals)
	if n := inFlight(t, r.in); n != 2 {
		t.Fatalf("%d requests counted in flight, want 2: the one queued and the one taken up late", n)
	}
	if n := r.wait.q.Len(); n != 1 {
		t.Fatalf("%d requests in the backlog, want the one taken up late", n)
	}
	if ev, _ := r.wait.q.Pop(); ev.ID != aside.ID {
		t.Fatalf("the backlog holds %q, want the request taken up late", ev.Content)
	}
	if _, late := r.in.late.Load(aside); !late {
		t.Fatal("the request in the backlog is not marked late: a worker would answer it as its owner")
	}
}

// A stored request the feeder queued, pushed out of the queue by a
// request of another replica's share taken here because the requests
// kept aside fill their bound, goes back to the backlog as it does for
// any live request: it is not refused 5003.
func TestStoredRequestPushedOutByARequestSetAsideWaitsAgain(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		shares := &switchShares{grace: time.Hour}
		r := newBacklogRig(t, InboxConfig{Shares: shares, Deferred: 1}, 2, 8, 1<<20)
		ctx, cancel := context.WithCancel(r.ctx)
		fed := make(chan struct{})
		go func() { r.in.feed(ctx, r.wait, r.jobs, r.refusals); close(fed) }()
		defer func() { cancel(); r.wait.q.Close(); <-fed }()
		for i := range 3 {
			r.in.admitTo(r.ctx, r.signed(r.peer, fmt.Sprint("stored ", i)), r.jobs, r.wait, true, r.refusals, false)
		}
		synctest.Wait() // two in the queue, the feeder waiting with the third
		if n := r.jobs.Len(); n != 2 {
			t.Fatalf("%d stored requests queued, want 2", n)
		}
		// The one request kept aside fills the bound; the next is taken
		// here, and pushes the peer's newest out of the queue.
		r.in.setAside(r.ctx, r.signed(r.other, "kept aside"), r.jobs, r.wait, r.refusals)
		r.in.setAside(r.ctx, r.signed(r.other, "taken here"), r.jobs, r.wait, r.refusals)
		synctest.Wait()
		if n := r.jobs.Len(); n != 2 {
			t.Fatalf("%d requests queued, want 2", n)
		}
		r.stopRefusals()
		if n := r.in.cfg.Transport.(*publishCounter).published.Load(); n != 0 {
			t.Errorf("%d refusals sent, want none: the stored request pushed out waits again", n)
		}
		// Queued: one stored, the one taken here; the feeder holds the
		// third stored; the one pushed out waits in the backlog; one is
		// kept aside.
		if n := inFlight(t, r.in); n != 5 {
			t.Errorf("%d requests counted in flight, want 5", n)
		}
	})
}
