package snapnostr

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/relay"
)

// readerCheckpoint is a Checkpoint that tells when its Seen is asked
// while the test plays the subscription's reader (reading is set).
type readerCheckpoint struct {
	Checkpoint
	reading  atomic.Bool
	onReader atomic.Int32 // Seen calls made while reading
	calls    atomic.Int32
}

func (c *readerCheckpoint) Seen(ctx context.Context, id string) (bool, error) {
	c.calls.Add(1)
	if c.reading.Load() {
		c.onReader.Add(1)
	}
	return c.Checkpoint.Seen(ctx, id)
}

// countingLimiter allows every key and counts its calls.
type countingLimiter struct{ calls atomic.Int32 }

func (l *countingLimiter) Allow(string) (bool, time.Duration) {
	l.calls.Add(1)
	return true, 0
}

// storedBefore returns a stored request from key to the agent dated ago
// before now: one a process before this Inbox may have processed.
func (r *backlogRig) storedBefore(key *identity.Key, ago time.Duration, content string) *nostr.Event {
	r.t.Helper()
	ev := &nostr.Event{CreatedAt: nostr.Timestamp(time.Now().Add(-ago).Unix()), Kind: relay.KindMessage,
		Tags: nostr.Tags{{"p", r.agent.NostrPublicKey()}}, Content: content}
	if err := relay.SignEvent(key, ev); err != nil {
		r.t.Fatal(err)
	}
	return ev
}

// The stored requests a restart's catch-up brings go to the backlog
// without the subscription's reader asking the checkpoint about them: the
// backlog's feeder asks, and skips those processed before (not queued,
// not counted against their key's rate, finished in the watermark).
// Before, the reader asked Seen about each, a database read in turn (a
// round trip on PostgreSQL), holding up every other event of that relay
// connection behind thousands of them at a start.
func TestStoredRequestsAreCheckedOffTheReader(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cp := &readerCheckpoint{Checkpoint: NewMemoryCheckpoint()}
		limiter := &countingLimiter{}
		r := newBacklogRig(t, InboxConfig{Checkpoint: cp, KeyLimiter: limiter}, 16, 64, 1<<20)
		var processed, fresh []*nostr.Event
		for i := range 10 {
			ev := r.storedBefore(r.peer, time.Minute, "stored "+string(rune('a'+i)))
			if i%2 == 0 {
				if err := cp.Done(r.ctx, ev.ID, ev.CreatedAt); err != nil {
					t.Fatal(err)
				}
				processed = append(processed, ev)
			} else {
				fresh = append(fresh, ev)
			}
		}
		cp.reading.Store(true)
		for _, ev := range append(append([]*nostr.Event{}, processed...), fresh...) {
			r.in.receive(r.ctx, ev, r.jobs, r.wait, true, r.refusals)
		}
		cp.reading.Store(false)
		if n := cp.onReader.Load(); n != 0 {
			t.Errorf("the reader asked the checkpoint %d times about stored requests, want none", n)
		}
		if n := r.wait.q.Len(); n != 10 {
			t.Fatalf("%d stored requests in the backlog, want 10", n)
		}
		ctx, cancel := context.WithCancel(r.ctx)
		fed := make(chan struct{})
		go func() { r.in.feed(ctx, r.wait, r.jobs, r.refusals); close(fed) }()
		synctest.Wait()
		if n := cp.calls.Load(); n == 0 {
			t.Error("the feeder did not ask the checkpoint")
		}
		queued := map[string]bool{}
		for r.jobs.Len() > 0 {
			ev, _ := r.jobs.Pop()
			queued[ev.ID] = true
			r.in.marks.finished(ev) // as serve does
		}
		for _, ev := range processed {
			if queued[ev.ID] {
				t.Errorf("a stored request processed before was queued again")
			}
		}
		for _, ev := range fresh {
			if !queued[ev.ID] {
				t.Errorf("a stored request not processed before was not queued")
			}
		}
		if n := limiter.calls.Load(); n != int32(len(fresh)) {
			t.Errorf("the key limiter was asked %d times, want %d: once for each request not processed before", n, len(fresh))
		}
		if n := inFlight(t, r.in); n != 0 {
			t.Errorf("%d requests counted in flight once the processed are skipped and the others served", n)
		}
		if n := r.in.cfg.Transport.(*publishCounter).published.Load(); n != 0 {
			t.Errorf("%d refusals sent, want none", n)
		}
		cancel()
		r.wait.q.Close()
		<-fed
	})
}

// A stored request processed before that the backlog pushes out for
// another key's, before the feeder asked the checkpoint about it, is
// not refused: its requester had its answer.
func TestProcessedStoredRequestPushedOutOfTheBacklogIsNotRefused(t *testing.T) {
	cp := NewMemoryCheckpoint()
	r := newBacklogRig(t, InboxConfig{Checkpoint: cp}, 1, 2, 1<<20)
	// The queue holds one live request; the backlog two stored ones of
	// the peer, processed before.
	r.in.receive(r.ctx, r.signed(r.other, "live"), r.jobs, r.wait, false, r.refusals)
	for _, c := range []string{"one", "two"} {
		ev := r.storedBefore(r.peer, time.Minute, c)
		if err := cp.Done(r.ctx, ev.ID, ev.CreatedAt); err != nil {
			t.Fatal(err)
		}
		r.in.receive(r.ctx, ev, r.jobs, r.wait, true, r.refusals)
	}
	// Another key's stored request pushes the peer's newest out.
	r.in.receive(r.ctx, r.storedBefore(r.other, time.Minute, "other"), r.jobs, r.wait, true, r.refusals)
	r.stopRefusals()
	if n := r.in.cfg.Transport.(*publishCounter).published.Load(); n != 0 {
		t.Errorf("%d refusals sent, want none: the request pushed out was processed before", n)
	}
	if n := inFlight(t, r.in); n != 3 {
		t.Errorf("%d requests counted in flight, want 3: one queued, two in the backlog", n)
	}
}

// A request taken up late that waits in the backlog is asked about by the
// feeder too: one another process recorded processed is not queued, and
// no longer marked late.
func TestLateRequestProcessedElsewhereIsSkippedByTheFeeder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cp := NewMemoryCheckpoint()
		r := newBacklogRig(t, InboxConfig{Checkpoint: cp}, 4, 8, 1<<20)
		ev := r.signed(r.peer, "late")
		if err := cp.Done(r.ctx, ev.ID, ev.CreatedAt); err != nil {
			t.Fatal(err)
		}
		r.in.admitTo(r.ctx, ev, r.jobs, r.wait, true, r.refusals, true)
		var wg sync.WaitGroup
		ctx, cancel := context.WithCancel(r.ctx)
		wg.Go(func() { r.in.feed(ctx, r.wait, r.jobs, r.refusals) })
		synctest.Wait()
		if n := r.jobs.Len(); n != 0 {
			t.Errorf("%d requests queued, want none: the late one was processed", n)
		}
		if _, late := r.in.late.Load(ev); late {
			t.Error("the request skipped is still marked late")
		}
		if n := inFlight(t, r.in); n != 0 {
			t.Errorf("%d requests counted in flight", n)
		}
		cancel()
		r.wait.q.Close()
		wg.Wait()
	})
}
