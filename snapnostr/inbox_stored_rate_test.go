package snapnostr

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"golang.org/x/time/rate"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/ratelimit"
)

// feeding runs the backlog's feeder of r until the test ends.
func (r *backlogRig) feeding(t *testing.T) {
	t.Helper()
	ctx, cancel := context.WithCancel(r.ctx)
	var wg sync.WaitGroup
	wg.Go(func() { r.in.feed(ctx, r.wait, r.jobs, r.refusals) })
	t.Cleanup(func() { cancel(); r.wait.q.Close(); wg.Wait() })
}

// refused returns the refusals the inbox of r sent, once those waiting
// are sent.
func (r *backlogRig) refused() int32 {
	synctest.Wait()
	return r.in.cfg.Transport.(*publishCounter).published.Load()
}

// The stored requests of a key past its burst, which it sent while the
// node was down, wait in the backlog for its allowance and are then
// queued, none refused; another key's stored requests are queued
// meanwhile, not held behind that wait; a live request over the rate is
// still refused at once. Before, the stored requests past the burst were
// answered 5002, and their requester had to send them again, though
// nothing was in a hurry.
func TestStoredRequestsOverTheirKeysRateWaitForIt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := ratelimit.New(ratelimit.Config{Rate: 1, Burst: 2})
		r := newBacklogRig(t, InboxConfig{KeyLimiter: lim}, 64, 64, 1<<20)
		for i := range 5 {
			r.in.receive(r.ctx, r.signed(r.peer, fmt.Sprint("stored ", i)), r.jobs, r.wait, true, r.refusals)
		}
		r.in.receive(r.ctx, r.signed(r.other, "other's stored"), r.jobs, r.wait, true, r.refusals)
		r.feeding(t)
		synctest.Wait()
		if n := r.jobs.Len(); n != 3 {
			t.Fatalf("%d requests queued, want 3: the peer's burst and the other key's", n)
		}
		if n := r.wait.q.Len(); n != 3 {
			t.Fatalf("%d requests in the backlog, want the peer's 3 past its burst", n)
		}
		// Another key's stored request is queued while the peer waits.
		r.in.receive(r.ctx, r.signed(r.other, "other's second"), r.jobs, r.wait, true, r.refusals)
		synctest.Wait()
		if n := r.jobs.Len(); n != 4 {
			t.Fatalf("%d requests queued, want 4: the other key's second is not held behind the peer's wait", n)
		}
		for i := range 3 {
			time.Sleep(time.Second) // the peer's allowance: one more a second
			synctest.Wait()
			if n := r.jobs.Len(); n != 5+i {
				t.Fatalf("%d requests queued after %d s, want %d", n, i+1, 5+i)
			}
		}
		if n := r.refused(); n != 0 {
			t.Fatalf("%d refusals sent, want none: the stored requests waited", n)
		}
		if n := inFlight(t, r.in); n != 7 {
			t.Errorf("%d requests counted in flight, want the 7 queued", n)
		}
		if n := entries(&r.in.unchecked); n != 0 {
			t.Errorf("%d requests left marked unchecked", n)
		}
		// Live traffic over the rate is refused at once, as before.
		time.Sleep(time.Second)
		r.in.receive(r.ctx, r.signed(r.peer, "live"), r.jobs, r.wait, false, r.refusals)
		r.in.receive(r.ctx, r.signed(r.peer, "live 2"), r.jobs, r.wait, false, r.refusals)
		if n := r.refused(); n != 1 {
			t.Fatalf("%d refusals sent, want 1: the live request over the rate", n)
		}
		if n := r.jobs.Len(); n != 8 {
			t.Errorf("%d requests queued, want 8: the live request within the rate and the 7 stored", n)
		}
	})
}

// A stored request waiting for its key's allowance stays counted in the
// watermark, and the backlog's bounds still apply to it: another key's
// stored request pushes it out of a full backlog, and it is refused 5003
// and finished. What waits as the inbox stops is dropped, left counted,
// unanswered: the next start asks the relays for it again.
func TestStoredRequestsWaitingForTheirRateStayBounded(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := ratelimit.New(ratelimit.Config{Rate: 0.001, Burst: 1})
		r := newBacklogRig(t, InboxConfig{KeyLimiter: lim}, 64, 2, 1<<20)
		first, second, third := r.signed(r.peer, "first"), r.signed(r.peer, "second"), r.signed(r.peer, "third")
		r.in.receive(r.ctx, first, r.jobs, r.wait, true, r.refusals)
		r.in.receive(r.ctx, second, r.jobs, r.wait, true, r.refusals)
		ctx, cancel := context.WithCancel(r.ctx)
		var wg sync.WaitGroup
		wg.Go(func() { r.in.feed(ctx, r.wait, r.jobs, r.refusals) })
		stop := func() { cancel(); r.wait.q.Close(); wg.Wait() }
		defer stop()
		synctest.Wait()
		r.in.receive(r.ctx, third, r.jobs, r.wait, true, r.refusals)
		synctest.Wait()
		if n := r.jobs.Len(); n != 1 {
			t.Fatalf("%d requests queued, want the peer's first", n)
		}
		if n := r.wait.q.Len(); n != 2 {
			t.Fatalf("%d requests in the backlog, want the peer's 2 waiting for its rate", n)
		}
		if n := inFlight(t, r.in); n != 3 {
			t.Fatalf("%d requests counted in flight, want 3: the queued and the 2 waiting", n)
		}
		// The backlog is full: the other key's request pushes out the
		// peer's newest.
		r.in.receive(r.ctx, r.signed(r.other, "other"), r.jobs, r.wait, true, r.refusals)
		synctest.Wait()
		if n := r.refused(); n != 1 {
			t.Fatalf("%d refusals sent, want 1: the waiting request pushed out", n)
		}
		if n := r.jobs.Len(); n != 2 {
			t.Fatalf("%d requests queued, want 2: the peer's first and the other key's", n)
		}
		if n := inFlight(t, r.in); n != 3 {
			t.Fatalf("%d requests counted in flight, want 3: the one pushed out is finished", n)
		}
		// The stop: the one still waiting is dropped, left counted.
		stop()
		if n := r.refused(); n != 1 {
			t.Errorf("%d refusals sent, want still 1: the one waiting at the stop is not answered", n)
		}
		if n := inFlight(t, r.in); n != 3 {
			t.Errorf("%d requests counted in flight after the stop, want 3", n)
		}
		if _, ok := r.in.unchecked.Load(second); ok {
			t.Error("the request dropped at the stop is still marked")
		}
	})
}

// panickyLimiter panics for one key and allows the others.
type panickyLimiter struct{ key string }

func (l panickyLimiter) Allow(key string) (bool, time.Duration) {
	if key == l.key {
		panic("the limiter fails for " + key)
	}
	return true, 0
}

// A panic while the feeder handles one stored request (here the key
// limiter's) refuses that request with an internal error, finishes it in
// the watermark, and the feeder goes on with the others. Before, the
// panic ended the feeder's goroutine, and with it the node.
func TestFeederSurvivesAPanicOnOneRequest(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		r := newBacklogRig(t, InboxConfig{Checkpoint: NewMemoryCheckpoint()}, 64, 64, 1<<20)
		r.in.cfg.KeyLimiter = panickyLimiter{key: r.peer.NostrPublicKey()}
		for _, ev := range []*nostr.Event{r.storedBefore(r.other, time.Minute, "before"),
			r.storedBefore(r.peer, time.Minute, "panics"), r.storedBefore(r.other, time.Minute, "after")} {
			r.in.receive(r.ctx, ev, r.jobs, r.wait, true, r.refusals)
		}
		r.feeding(t)
		synctest.Wait()
		if n := r.jobs.Len(); n != 2 {
			t.Fatalf("%d requests queued, want the other key's 2", n)
		}
		if n := r.refused(); n != 1 {
			t.Fatalf("%d refusals sent, want 1: the request whose feeding panicked", n)
		}
		if n := inFlight(t, r.in); n != 2 {
			t.Fatalf("%d requests counted in flight, want the 2 queued", n)
		}
		// The feeder still runs.
		r.in.receive(r.ctx, r.storedBefore(r.other, time.Minute, "later"), r.jobs, r.wait, true, r.refusals)
		synctest.Wait()
		if n := r.jobs.Len(); n != 3 {
			t.Fatalf("%d requests queued, want 3: the feeder stopped after the panic", n)
		}
		for r.jobs.Len() > 0 {
			ev, _ := r.jobs.Pop()
			r.in.serve(&running{stop: r.ctx, work: r.ctx}, ev)
		}
		if n := inFlight(t, r.in); n != 0 {
			t.Errorf("%d requests counted in flight once the queued are served", n)
		}
		noMarks(t, r.in)
	})
}

// switchLimiter refuses every request, asking a wait of wait, until
// open is set; it then allows them all.
type switchLimiter struct {
	wait time.Duration
	open atomic.Bool
}

func (l *switchLimiter) Allow(string) (bool, time.Duration) {
	if l.open.Load() {
		return true, 0
	}
	return false, l.wait
}

// A stored request waiting for its key's allowance is queued within a
// second of the limiter allowing it, whatever wait the limiter said
// before: a rate raised meanwhile (a reload, or a replica leaving, which
// raises each one's share) reaches it, and a limiter that said "never"
// (rate.InfDuration, of a rate near zero) holds no key for good. Before,
// the key was held for the whole wait first said: 1,000 s after a
// reload had lifted the limit, and, for a wait of InfDuration, until the
// inbox stopped, its requests counted in the watermark all along and
// holding every relay's point back.
func TestStoredRequestsWaitingForTheirRateFollowTheLimiter(t *testing.T) {
	for _, wait := range []time.Duration{1000 * time.Second, rate.InfDuration} {
		t.Run(wait.String(), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lim := &switchLimiter{wait: wait}
				r := newBacklogRig(t, InboxConfig{KeyLimiter: lim}, 64, 64, 1<<20)
				r.in.receive(r.ctx, r.signed(r.peer, "stored"), r.jobs, r.wait, true, r.refusals)
				r.feeding(t)
				synctest.Wait()
				if n := r.wait.q.Len(); n != 1 {
					t.Fatalf("%d requests in the backlog, want the one waiting for its rate", n)
				}
				time.Sleep(time.Minute)
				lim.open.Store(true) // the limit lifted at a reload, say
				time.Sleep(time.Second)
				synctest.Wait()
				if n := r.jobs.Len(); n != 1 {
					t.Fatalf("%d requests queued a second after the limiter allows it, want 1", n)
				}
				if n := r.refused(); n != 0 {
					t.Errorf("%d refusals sent, want none", n)
				}
			})
		})
	}
}

// A key with a thousand stored requests over its rate does not keep the
// other keys' stored requests out of the backlog: each of theirs pushes
// out one of its newest (refused 5003), and is queued, while the backlog
// holds at most its bound and the batch its feeder put back. The
// watermark and the backlog's marks count what is left, and only that.
func TestAKeyWaitingForItsRateKeepsNoOtherKeyOut(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const backlogLen, others = 64, 100
		lim := ratelimit.New(ratelimit.Config{Rate: 0.001, Burst: 1})
		r := newBacklogRig(t, InboxConfig{KeyLimiter: lim}, 1000, backlogLen, 1<<30)
		for i := range 1000 {
			r.in.receive(r.ctx, r.signed(r.peer, fmt.Sprint("flood ", i)), r.jobs, r.wait, true, r.refusals)
		}
		r.feeding(t)
		synctest.Wait()
		if n := r.wait.q.Len(); n < backlogLen || n > backlogLen+seenBatch {
			t.Fatalf("%d requests in the backlog, want %d to %d", n, backlogLen, backlogLen+seenBatch)
		}
		flooded := r.jobs.Len() // the peer's one within its burst
		for i := range others {
			k, err := identity.Generate()
			if err != nil {
				t.Fatal(err)
			}
			r.in.receive(r.ctx, r.signed(k, fmt.Sprint("other ", i)), r.jobs, r.wait, true, r.refusals)
			synctest.Wait()
			if n := r.wait.q.Len(); n > backlogLen+seenBatch {
				t.Fatalf("%d requests in the backlog after the other keys' %d, past %d", n, i+1, backlogLen+seenBatch)
			}
		}
		if n := r.jobs.Len() - flooded; n != others {
			t.Fatalf("%d of the other keys' %d stored requests queued", n, others)
		}
		left := r.wait.q.Len()
		if n := inFlight(t, r.in); n != r.jobs.Len()+left {
			t.Errorf("%d requests counted in flight, want the %d queued and the %d left waiting", n, r.jobs.Len(), left)
		}
		if n := entries(&r.in.unchecked); n != left {
			t.Errorf("%d requests marked for their rate, want the %d waiting", n, left)
		}
	})
}

// deniesThenPanics refuses its first request a second's wait, then
// panics on every other.
type deniesThenPanics struct{ calls atomic.Int32 }

func (l *deniesThenPanics) Allow(key string) (bool, time.Duration) {
	if l.calls.Add(1) == 1 {
		return false, time.Second
	}
	panic("the limiter fails for " + key)
}

// Requests that waited for their key's rate and whose feeding then
// panics are each refused 5001 (one answer a second to a key, as any
// refusal) and finished once, and leave nothing behind: no bytes counted
// in the backlog, no mark.
func TestFeederPanicAfterAWaitForTheRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := &deniesThenPanics{}
		r := newBacklogRig(t, InboxConfig{KeyLimiter: lim}, 64, 64, 1<<20)
		for i := range 2 {
			r.in.receive(r.ctx, r.signed(r.peer, fmt.Sprint("stored ", i)), r.jobs, r.wait, true, r.refusals)
		}
		r.feeding(t)
		synctest.Wait()
		if n := r.wait.q.Len(); n != 2 {
			t.Fatalf("%d requests in the backlog, want the 2 waiting for their rate", n)
		}
		time.Sleep(time.Second)
		if n := r.refused(); n != 1 {
			t.Fatalf("%d refusals sent, want 1 (5001, once a second to a key)", n)
		}
		if n := lim.calls.Load(); n != 3 {
			t.Errorf("the limiter asked %d times, want 3: once held, then once each", n)
		}
		if n := r.jobs.Len() + r.wait.q.Len(); n != 0 {
			t.Errorf("%d requests queued or waiting, want none", n)
		}
		if n := inFlight(t, r.in); n != 0 {
			t.Errorf("%d requests counted in flight, want none", n)
		}
		if n := r.wait.bytes.Load(); n != 0 {
			t.Errorf("the backlog counts %d bytes with nothing in it", n)
		}
		noMarks(t, r.in)
	})
}
