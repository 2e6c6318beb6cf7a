package snapnostr

import (
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"golang.org/x/time/rate"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/relay"
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
