package snapnostr

import (
	"fmt"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"golang.org/x/time/rate"

	"github.com/snapnode/snapnode/identity"
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
