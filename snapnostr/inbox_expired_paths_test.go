package snapnostr

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"golang.org/x/time/rate"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/fairqueue"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
)

// expiring returns a request from key to the agent, of kind (stored or
// live), dated now and tagged with the NIP-40 expiration exp.
func (r *backlogRig) expiring(key *identity.Key, kind int, content string, exp time.Time) *nostr.Event {
	r.t.Helper()
	ev := &nostr.Event{CreatedAt: nostr.Now(), Kind: kind, Content: content,
		Tags: nostr.Tags{{"p", r.agent.NostrPublicKey()}, {"expiration", strconv.FormatInt(exp.Unix(), 10)}}}
	if err := relay.SignEvent(key, ev); err != nil {
		r.t.Fatal(err)
	}
	return ev
}

// A stored request that expires while its key is held for its rate is
// dropped when the feeder asks again: not queued, not refused, counted,
// finished in the watermark, its bytes and marks let go.
func TestStoredRequestExpiringWhileHeldForItsRate(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		lim := &switchLimiter{wait: rate.InfDuration}
		r := newBacklogRig(t, InboxConfig{KeyLimiter: lim}, 64, 64, 1<<20)
		r.in.receive(r.ctx, r.expiring(r.peer, relay.KindMessage, "stored", time.Now().Add(30*time.Second)), r.jobs, r.wait, true, r.refusals)
		r.feeding(t)
		synctest.Wait()
		if n := r.wait.q.Len(); n != 1 {
			t.Fatalf("%d requests in the backlog, want the one held for its rate", n)
		}
		time.Sleep(time.Minute)
		synctest.Wait()
		if n := r.wait.q.Len() + r.jobs.Len(); n != 0 {
			t.Fatalf("%d requests waiting or queued after their expiration, want none", n)
		}
		if n := r.in.Expired(); n != 1 {
			t.Errorf("Expired() = %d, want 1", n)
		}
		if n := r.refused(); n != 0 {
			t.Errorf("%d refusals sent, want none", n)
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

// A request that expired while it waited, pushed out by another key's,
// is dropped rather than refused: a 5003 answer, "try again shortly",
// would ask its requester to send again what it wanted dropped. Before,
// it was answered 5003. A stored request waits in the backlog, a live one
// in the queue.
func TestExpiredRequestPushedOutIsNotAnswered(t *testing.T) {
	for _, tc := range []struct {
		name                 string
		queue, backlog, kind int
		stored               bool
	}{
		{"of the backlog", 64, 2, relay.KindMessage, true},
		{"of the queue", 2, 64, relay.KindEphemeral, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				r := newBacklogRig(t, InboxConfig{}, tc.queue, tc.backlog, 1<<20)
				for i := range 2 {
					r.in.receive(r.ctx, r.expiring(r.peer, tc.kind, fmt.Sprint("expires ", i), time.Now().Add(30*time.Second)), r.jobs, r.wait, tc.stored, r.refusals)
				}
				time.Sleep(time.Minute)
				r.in.receive(r.ctx, r.signed(r.other, "other's"), r.jobs, r.wait, tc.stored, r.refusals)
				if n := r.refused(); n != 0 {
					t.Errorf("%d refusals sent, want none: the request pushed out had expired", n)
				}
				if n := r.in.Expired(); n != 1 {
					t.Errorf("Expired() = %d, want 1", n)
				}
				if n := inFlight(t, r.in); n != 2 {
					t.Errorf("%d requests counted in flight, want 2: the peer's older and the other key's", n)
				}
				waiting := r.jobs.Len()
				if tc.stored {
					waiting = len(r.drain())
				}
				if waiting != 2 {
					t.Errorf("%d requests wait, want 2: the peer's older and the other key's", waiting)
				}
			})
		})
	}
}

// countingRefuser refuses every key and counts how often it is asked.
type countingRefuser struct{ asked int }

func (l *countingRefuser) Allow(string) (bool, time.Duration) {
	l.asked++
	return false, time.Second
}

// A request kept aside for another replica that expired meanwhile is
// dropped as it is taken up, whether its owner left or nobody took it
// within its grace: it is not queued, costs its key no allowance and is
// not refused for it, and is finished in the watermark. It counts as
// expired, not as taken up (snapnode_inbox_shared_total{outcome="taken_up"}
// counts the requests this process answered for another). Before, it
// took its key's allowance, and was refused 5002 when over it; and then
// it was still counted taken up beside expired.
func TestExpiredRequestTakenUpFromAReplicaIsDropped(t *testing.T) {
	for _, tc := range []struct {
		name     string
		verified bool // received through the pool (checked), not passed over unverified
		nobody   bool // its grace passed and nobody took it; else its owner left
	}{
		{"its owner left", false, false},
		{"nobody took it", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			now := time.Unix(1_800_000_000, 0)
			clock := &testClock{}
			clock.set(now)
			lim := &countingRefuser{}
			sh := &switchShares{grace: 10 * time.Second}
			cfg := InboxConfig{Shares: sh, KeyLimiter: lim, Now: clock.now}
			if tc.nobody {
				cfg.Replay = recordedSet{snap.NewMemoryReplayStore(0), map[string]bool{}}
			}
			r := newBacklogRig(t, cfg, 64, 64, 1<<20)
			ev := r.expiring(r.peer, relay.KindMessage, "kept aside", now.Add(5*time.Second))
			if tc.verified {
				r.in.receive(r.ctx, ev, r.jobs, r.wait, true, r.refusals)
			} else {
				r.in.setAside(r.ctx, ev, r.jobs, r.wait, r.refusals)
			}
			if st := r.in.Shared(); st.Now != 1 {
				t.Fatalf("%+v: want the request kept aside", st)
			}
			if tc.nobody {
				clock.set(now.Add(time.Minute)) // expired, and its grace passed
			} else {
				clock.set(now.Add(6 * time.Second)) // expired, within its grace
				sh.mine.Store(true)                 // its owner left
			}
			r.in.reviewPass(r.ctx, r.jobs, r.wait, r.refusals)
			r.stopRefusals()
			if n := r.in.cfg.Transport.(*publishCounter).published.Load(); n != 0 {
				t.Errorf("%d refusals sent, want none", n)
			}
			if lim.asked != 0 {
				t.Errorf("the key limiter asked %d times, want none: an expired request costs its key nothing", lim.asked)
			}
			if n := r.jobs.Len() + r.wait.q.Len(); n != 0 {
				t.Errorf("%d requests queued or waiting, want none", n)
			}
			if n := r.in.Expired(); n != 1 {
				t.Errorf("Expired() = %d, want 1", n)
			}
			if st := r.in.Shared(); st.Taken != 0 || st.Left != 0 || st.Now != 0 {
				t.Errorf("%+v: want nothing taken up, left or kept: the request counts as expired only", st)
			}
			if n := inFlight(t, r.in); n != 0 {
				t.Errorf("%d requests counted in flight, want none", n)
			}
			noMarks(t, r.in)
		})
	}
}

// restart returns a rig whose inbox is a new one with the same
// configuration (its key, checkpoint and transport), its queue and
// backlog new and empty, as after the node restarted.
func (r *backlogRig) restart() *backlogRig {
	r.t.Helper()
	n := &backlogRig{shareRig: &shareRig{t: r.t, agent: r.agent, peer: r.peer, ctx: r.ctx}, other: r.other}
	n.in = NewInbox(r.in.cfg)
	n.jobs = fairqueue.New[string, *nostr.Event](64)
	n.wait = &backlog{q: fairqueue.New[string, *nostr.Event](64), max: 1 << 20}
	n.refusals = n.in.startRefuser(r.ctx)
	n.stopRefusals = sync.OnceFunc(n.refusals.stop)
	r.t.Cleanup(n.stopRefusals)
	return n
}

// askedCheckpoint is a MemoryCheckpoint that records the ids it is asked
// about.
type askedCheckpoint struct {
	*MemoryCheckpoint
	mu    sync.Mutex
	asked []string
}

func (c *askedCheckpoint) Seen(ctx context.Context, id string) (bool, error) {
	c.mu.Lock()
	c.asked = append(c.asked, id)
	c.mu.Unlock()
	return c.MemoryCheckpoint.Seen(ctx, id)
}

func (c *askedCheckpoint) SeenMany(ctx context.Context, ids []string) (map[string]bool, error) {
	c.mu.Lock()
	c.asked = append(c.asked, ids...)
	c.mu.Unlock()
	return c.MemoryCheckpoint.SeenMany(ctx, ids)
}

// askedAbout returns the ids asked about since the last call.
func (c *askedCheckpoint) askedAbout() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.asked
	c.asked = nil
	return out
}

// A stored request that expired while it waited in the backlog is
// dropped by the feeder before the checkpoint is asked about its batch:
// the answer would not be used (an expired request is dropped whether it
// was processed or not), as none is when one is pushed out of the
// backlog. It is finished for the relays' points and not recorded as
// processed; after a restart a catch-up that brings it again drops it
// as it arrives, unasked and unprocessed, while the request processed
// before is skipped by the checkpoint. Before, the feeder's batch asked
// the checkpoint about the expired request too.
func TestExpiredStoredRequestIsNotAskedAboutAcrossARestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		cp := &askedCheckpoint{MemoryCheckpoint: NewMemoryCheckpoint()}
		r := newBacklogRig(t, InboxConfig{Checkpoint: cp}, 64, 64, 1<<20)
		expiring := r.expiring(r.peer, relay.KindMessage, "expires", time.Now().Add(30*time.Second))
		fresh := r.signed(r.other, "fresh")
		for _, ev := range []*nostr.Event{expiring, fresh} {
			r.in.receive(r.ctx, ev, r.jobs, r.wait, true, r.refusals)
		}
		time.Sleep(time.Minute) // the node was slow to reach them
		r.feeding(t)
		synctest.Wait()
		if asked := cp.askedAbout(); !slices.Equal(asked, []string{fresh.ID}) {
			t.Errorf("the checkpoint was asked about %d requests, want only the one not expired", len(asked))
		}
		if n := r.in.Expired(); n != 1 {
			t.Errorf("Expired() = %d, want 1", n)
		}
		got, ok := r.jobs.TryPop()
		if !ok || got != fresh || r.jobs.Len() != 0 {
			t.Fatalf("queued %v and %d more, want the request not expired alone", got, r.jobs.Len())
		}
		r.in.fed.Delete(got) // processed, as a worker does
		r.in.done(r.ctx, got)
		r.in.marks.finished(got)
		if n := inFlight(t, r.in); n != 0 {
			t.Errorf("%d requests counted in flight, want none: the expired one holds no point back", n)
		}
		noMarks(t, r.in)
		if seen, _ := cp.MemoryCheckpoint.Seen(r.ctx, expiring.ID); seen {
			t.Error("the expired request was recorded as processed")
		}

		// The restart: a new inbox on the same checkpoint, whose
		// catch-up brings both requests again.
		r = r.restart()
		for _, ev := range []*nostr.Event{expiring, fresh} {
			r.in.receive(r.ctx, ev, r.jobs, r.wait, true, r.refusals)
		}
		r.feeding(t)
		synctest.Wait()
		if asked := cp.askedAbout(); !slices.Equal(asked, []string{fresh.ID}) {
			t.Errorf("after the restart the checkpoint was asked about %d requests, want only the one not expired", len(asked))
		}
		if n := r.jobs.Len(); n != 0 {
			t.Errorf("%d requests queued after the restart, want none: one expired, one processed", n)
		}
		if n := r.in.Expired(); n != 1 {
			t.Errorf("Expired() = %d after the restart, want 1", n)
		}
		if n := r.refused(); n != 0 {
			t.Errorf("%d refusals sent, want none", n)
		}
		if n := inFlight(t, r.in); n != 0 {
			t.Errorf("%d requests counted in flight after the restart, want none", n)
		}
		noMarks(t, r.in)
	})
}
