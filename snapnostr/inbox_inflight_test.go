package snapnostr

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/fairqueue"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
)

// inFlight returns how many requests in's watermark counts, and fails
// the test when its counts by epoch do not add up to them.
func inFlight(t *testing.T, in *Inbox) int {
	t.Helper()
	w := in.marks
	w.mu.Lock()
	defer w.mu.Unlock()
	sum := 0
	for _, n := range w.open {
		sum += n
	}
	if sum != len(w.of) {
		t.Fatalf("the watermark counts %d requests by epoch and %d by request", sum, len(w.of))
	}
	return len(w.of)
}

// refuseAll is a snap.Limiter over every key's rate.
type refuseAll struct{}

func (refuseAll) Allow(string) (bool, time.Duration) { return false, time.Second }

// Every request the inbox counts in its watermark, on every path that
// ends it before or without a worker (seen before, over its key's rate,
// refused or pushed out by a full queue, kept aside and forgotten, or
// taken up here), is finished: one left counted while Run runs holds
// every relay's point back for the rest of the run.
func TestInboxFinishesWhatItCountsBeforeTheWorkers(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	clock := &testClock{}
	clock.set(now)
	newRig := func(t *testing.T, cfg InboxConfig) *shareRig {
		cfg.Transport, cfg.Now = &publishCounter{}, clock.now
		r := newShareRig(t, cfg)
		r.in.cfg.Handler = snap.NewServer(snap.ServerConfig{Key: r.agent, Router: snap.NewRouter(), Now: clock.now,
			Logger: r.in.cfg.Logger})
		return r
	}
	signed := func(t *testing.T, r *shareRig, kind int, content string) *nostr.Event {
		ev := &nostr.Event{CreatedAt: nostr.Timestamp(now.Unix()), Kind: kind,
			Tags: nostr.Tags{{"p", r.agent.NostrPublicKey()}}, Content: content}
		if err := relay.SignEvent(r.peer, ev); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	want := func(t *testing.T, r *shareRig, n int, what string) {
		t.Helper()
		if got := inFlight(t, r.in); got != n {
			t.Fatalf("%s: %d requests counted in flight, want %d", what, got, n)
		}
	}

	t.Run("seen before", func(t *testing.T) {
		cp := NewMemoryCheckpoint()
		r := newRig(t, InboxConfig{Checkpoint: cp})
		ev := signed(t, r, relay.KindMessage, "stored")
		if err := cp.Done(r.ctx, ev.ID, ev.CreatedAt); err != nil {
			t.Fatal(err)
		}
		r.in.admit(r.ctx, ev, r.jobs, r.refusals, false)
		want(t, r, 0, "a request processed before")
	})
	for _, late := range []bool{false, true} {
		t.Run(fmt.Sprintf("over its key's rate, late %v", late), func(t *testing.T) {
			r := newRig(t, InboxConfig{KeyLimiter: refuseAll{}})
			r.in.admit(r.ctx, signed(t, r, relay.KindEphemeral, "x"), r.jobs, r.refusals, late)
			want(t, r, 0, "a request over its key's rate")
		})
	}
	t.Run("full queue", func(t *testing.T) {
		r := newRig(t, InboxConfig{})
		r.jobs = fairqueue.New[string, *nostr.Event](2)
		r.in.admit(r.ctx, signed(t, r, relay.KindEphemeral, "1"), r.jobs, r.refusals, false)
		r.in.admit(r.ctx, signed(t, r, relay.KindEphemeral, "2"), r.jobs, r.refusals, false)
		r.in.admit(r.ctx, signed(t, r, relay.KindEphemeral, "3"), r.jobs, r.refusals, false) // refused
		want(t, r, 2, "two requests queued and one refused")
		other := newRig(t, InboxConfig{}) // another key pushes the peer's newest out
		ev := &nostr.Event{CreatedAt: nostr.Timestamp(now.Unix()), Kind: relay.KindEphemeral,
			Tags: nostr.Tags{{"p", r.agent.NostrPublicKey()}}, Content: "4"}
		if err := relay.SignEvent(other.peer, ev); err != nil {
			t.Fatal(err)
		}
		r.in.admit(r.ctx, ev, r.jobs, r.refusals, false)
		want(t, r, 2, "two requests queued, one pushed out")
		for r.jobs.Len() > 0 {
			ev, _ := r.jobs.Pop()
			r.in.marks.finished(ev) // as serve does
		}
		want(t, r, 0, "the queued requests served")
	})
	t.Run("full backlog", func(t *testing.T) {
		// Stored requests wait in the backlog; past it one is queued,
		// past the queue refused.
		r := newRig(t, InboxConfig{})
		r.jobs = fairqueue.New[string, *nostr.Event](1)
		wait := &backlog{q: fairqueue.New[string, *nostr.Event](2), max: 1 << 20}
		for i := range 4 {
			r.in.admitTo(r.ctx, signed(t, r, relay.KindMessage, fmt.Sprint(i)), r.jobs, wait, true, r.refusals, false)
		}
		if wait.q.Len() != 2 || r.jobs.Len() != 1 {
			t.Fatalf("%d requests in the backlog and %d queued, want 2 and 1", wait.q.Len(), r.jobs.Len())
		}
		want(t, r, 3, "two requests in the backlog, one queued, one refused")
		// Stopping: what waits in the backlog is dropped, still counted,
		// so that the relays' points written then stay behind it.
		stopped, cancel := context.WithCancel(r.ctx)
		cancel()
		wait.q.Close()
		r.in.feed(stopped, wait, r.jobs, r.refusals)
		if n := wait.bytes.Load(); n != 0 {
			t.Errorf("the backlog counts %d bytes once empty", n)
		}
		ev, _ := r.jobs.Pop()
		r.in.marks.finished(ev) // as serve does
		want(t, r, 2, "the backlog's requests dropped as the inbox stops")
		if points := r.in.marks.last(map[string]nostr.Timestamp{"wss://r": nostr.Timestamp(now.Unix())}); points != nil {
			t.Fatalf("points %v written past the requests dropped from the backlog", points)
		}
	})
	t.Run("kept aside and taken by another", func(t *testing.T) {
		recorded := recordedSet{snap.NewMemoryReplayStore(0), map[string]bool{}}
		r := newRig(t, InboxConfig{Shares: &switchShares{grace: time.Second}, Replay: recorded})
		ev := signed(t, r, relay.KindEphemeral, "taken")
		recorded.ids[ev.ID] = true
		r.in.setAside(r.ctx, ev, r.jobs, nil, r.refusals)
		want(t, r, 1, "a request kept aside")
		clock.set(now.Add(time.Second))
		defer clock.set(now)
		r.in.reviewPass(r.ctx, r.jobs, nil, r.refusals)
		want(t, r, 0, "a request another process took")
	})
	t.Run("kept aside without a replay store", func(t *testing.T) {
		r := newRig(t, InboxConfig{Shares: &switchShares{grace: time.Second}})
		r.in.setAside(r.ctx, signed(t, r, relay.KindEphemeral, "x"), r.jobs, nil, r.refusals)
		clock.set(now.Add(time.Second))
		defer clock.set(now)
		r.in.reviewPass(r.ctx, r.jobs, nil, r.refusals)
		want(t, r, 0, "a request forgotten at its grace")
	})
	t.Run("kept aside, forged", func(t *testing.T) {
		recorded := recordedSet{snap.NewMemoryReplayStore(0), map[string]bool{}}
		r := newRig(t, InboxConfig{Shares: &switchShares{grace: time.Second}, Replay: recorded})
		for i := range 50 {
			ev := signed(t, r, relay.KindEphemeral, "genuine")
			ev.Sig = testutil.FlipHex(ev.Sig) // a forgery under a genuine id
			if i%2 == 0 {
				ev.ID = testutil.FlipHex(ev.ID) // under an id of its own
			}
			r.in.setAside(r.ctx, ev, r.jobs, nil, r.refusals)
		}
		if n := inFlight(t, r.in); n == 0 || n > r.in.deferred.len() {
			t.Fatalf("%d forged requests counted, %d kept aside", n, r.in.deferred.len())
		}
		clock.set(now.Add(time.Second))
		defer clock.set(now)
		r.in.reviewPass(r.ctx, r.jobs, nil, r.refusals)
		want(t, r, 0, "forged requests taken up late")
		if r.jobs.Len() != 0 {
			t.Fatalf("%d forged requests queued", r.jobs.Len())
		}
	})
	t.Run("kept aside and taken up", func(t *testing.T) {
		shares := &switchShares{grace: time.Hour}
		r := newRig(t, InboxConfig{Shares: shares})
		unchecked, checked, twice := signed(t, r, relay.KindEphemeral, "a"), signed(t, r, relay.KindEphemeral, "b"), signed(t, r, relay.KindEphemeral, "c")
		r.in.setAside(r.ctx, unchecked, r.jobs, nil, r.refusals)
		r.in.take(r.ctx, checked, r.jobs, r.refusals)
		r.in.setAside(r.ctx, twice, r.jobs, nil, r.refusals)
		var id [32]byte
		if _, err := relay.DecodeHex32(twice.ID, &id); err != nil {
			t.Fatal(err)
		}
		r.in.firstSight(id) // taken meanwhile
		want(t, r, 3, "three requests kept aside")
		shares.mine.Store(true)
		r.in.reviewPass(r.ctx, r.jobs, nil, r.refusals)
		want(t, r, 2, "two requests taken up, one seen before")
		for r.jobs.Len() > 0 {
			ev, _ := r.jobs.Pop()
			r.in.marks.finished(ev)
		}
		want(t, r, 0, "the requests taken up served")
	})
}

// A request a worker serves is finished once it is answered, refused,
// or its handling panicked.
func TestInboxFinishesWhatItServes(t *testing.T) {
	for name, h := range map[string]func(snap.Handler) snap.Handler{
		"answered": func(h snap.Handler) snap.Handler { return answering{h} },
		"panicked": func(h snap.Handler) snap.Handler { return panicking{h} },
	} {
		t.Run(name, func(t *testing.T) {
			r := newHandleRig(t, InboxConfig{})
			r.in.cfg.Handler = h(r.in.cfg.Handler)
			sealed, err := newSealer(r.peer, 1).seal(r.agent.NostrPublicKey(), []byte(`{"a request":1}`))
			if err != nil {
				t.Fatal(err)
			}
			for _, content := range []string{sealed, "not sealed"} {
				jobs := fairqueue.New[string, *nostr.Event](4)
				refusals := r.in.startRefuser(context.WithoutCancel(t.Context()))
				r.in.admit(t.Context(), r.request(relay.KindEphemeral, r.now(), content), jobs, refusals, false)
				ev, _ := jobs.Pop()
				r.in.serve(r.run, ev)
				refusals.stop()
				if n := inFlight(t, r.in); n != 0 {
					t.Fatalf("%d requests counted once served", n)
				}
			}
		})
	}
}
