package relay

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// A relay's first event may lower the floor of the tail (see moveTo): it
// is kept in the tail all the same, so that the relay, asked again from
// its point less the skew after an outage longer than DedupeTTL, does not
// have it delivered twice. Since the point moves only after the hand-over,
// the event is marked delivered (firstSight) before its relay's point
// lowers the floor; the tail must not go by the floor of before.
func TestPoolRelaysFirstEventBelowTheFloorIsNotRedeliveredAfterALongOutage(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a", "ws://b"}, DedupeTTL: time.Minute})
		sub, err := p.Subscribe(t.Context(), ptFilter())
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		a, b := n.last(t, "ws://a"), n.last(t, "ws://b")
		a.eose(sub.wireID)
		b.eose(sub.wireID)
		// A's point sets the floor at now − 11 s.
		a.event(sub.wireID, ptEvent(t, ptNow()-1, "on A"))
		ptRecv(t, sub)
		// B's first event, dated before that floor, lowers it.
		old := ptEvent(t, ptNow()-100, "B's first")
		b.event(sub.wireID, old)
		ptRecv(t, sub)
		synctest.Wait()
		if got := sub.Resume()["ws://b"]; got != old.CreatedAt {
			t.Fatalf("B's point %d, want %d", got, old.CreatedAt)
		}

		// B is away for five minutes, far longer than the dedupe TTL.
		n.setFail("ws://b", errors.New("down"))
		b.drop(errors.New("reset"))
		time.Sleep(5 * time.Minute)
		n.setFail("ws://b", nil)
		time.Sleep(8 * time.Second)
		synctest.Wait()
		b2 := n.last(t, "ws://b")
		if got := b2.lastReq(t, sub.wireID); got.Since == nil || *got.Since != old.CreatedAt-10 {
			t.Fatalf("B resubscribed with %v, want since %d", got, old.CreatedAt-10)
		}
		// It sends its event again: not delivered twice.
		b2.event(sub.wireID, old)
		ptNone(t, sub)
	})
}
