package relay

import (
	"sync"
	"testing"
	"testing/synctest"

	"github.com/nbd-wtf/go-nostr"
)

// SubscribeFunc hands each checked, deduplicated event to its function
// (nothing goes to Events), and never after the subscription is closed.
func TestPoolSubscribeFunc(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a", "ws://b"}})
		if _, err := p.SubscribeFunc(t.Context(), ptFilter(), nil); err == nil {
			t.Fatal("SubscribeFunc with no function: no error")
		}
		var mu sync.Mutex
		var taken []string
		sub, err := p.SubscribeFunc(t.Context(), ptFilter(), func(ev *nostr.Event) {
			mu.Lock()
			defer mu.Unlock()
			taken = append(taken, ev.Content)
		})
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		a, b := n.last(t, "ws://a"), n.last(t, "ws://b")
		good := ptEvent(t, ptNow(), "good")
		bad := ptEvent(t, ptNow(), "bad")
		bad.Sig = flipHex(bad.Sig)
		a.event(sub.wireID, good)
		b.event(sub.wireID, good) // the same event from another relay
		a.event(sub.wireID, bad)
		synctest.Wait()
		select {
		case ev := <-sub.Events():
			t.Fatalf("an event on Events: %v", ev)
		default:
		}
		sub.Close()
		a.event(sub.wireID, ptEvent(t, ptNow(), "after close"))
		synctest.Wait()
		if _, ok := <-sub.Events(); ok {
			t.Fatal("Events not closed after Close")
		}
		mu.Lock()
		defer mu.Unlock()
		if len(taken) != 1 || taken[0] != "good" {
			t.Fatalf("taken %q, want [good]", taken)
		}
	})
}
