package relay

import (
	"context"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/testutil"
)

// ptInProcess is a ptConn that is also an InProcessConn, as the embedded
// relay's in-process connection is.
type ptInProcess struct {
	*ptConn
	mu      sync.Mutex
	deliver func(ConnMessage)
}

func (c *ptInProcess) Deliver(f func(ConnMessage)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deliver = f
}

// hand gives m to the pool the in-process way, failing if the pool never
// asked for it.
func (c *ptInProcess) hand(t *testing.T, m ConnMessage) {
	t.Helper()
	c.mu.Lock()
	f := c.deliver
	c.mu.Unlock()
	if f == nil {
		t.Fatal("the pool did not call Deliver on an in-process connection")
	}
	f(m)
}

// The pool takes an in-process connection's messages in that
// connection's goroutine (the event is in the subscription's buffer when
// deliver returns: no reader goroutine in between), believes Verified
// only there, and still checks whatever arrives on Messages, from an
// in-process connection or any other.
func TestPoolInProcessDelivery(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		var local *ptInProcess
		dial := func(ctx context.Context, url string) (Conn, error) {
			c, err := n.dial(ctx, url)
			if err != nil || url != "local" {
				return c, err
			}
			local = &ptInProcess{ptConn: c.(*ptConn)}
			return local, nil
		}
		p := NewPool(PoolConfig{URLs: []string{"local", "ws://other"}, Dial: dial, Logger: ptLogger()})
		p.Start(t.Context())
		t.Cleanup(func() { p.Close() })
		synctest.Wait()
		sub, err := p.Subscribe(t.Context(), ptFilter())
		if err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		other := n.last(t, "ws://other")

		good := ptEvent(t, ptNow(), "good")
		// Verified by the in-process relay: delivered at once, not
		// checked again (a forged signature shows it is not re-checked:
		// the relay in this process would never have let it through).
		vouched := ptEvent(t, ptNow(), "vouched")
		vouched.Sig = testutil.FlipHex(vouched.Sig)
		local.hand(t, ConnMessage{Label: "EVENT", SubID: sub.wireID, Event: vouched, Verified: true})
		select {
		case got := <-sub.Events():
			if got.ID != vouched.ID {
				t.Fatalf("delivered %q", got.Content)
			}
		default:
			t.Fatal("an in-process event was not in the subscription's buffer when deliver returned")
		}

		// Not marked Verified (a stored event, say): checked, and dropped.
		unvouched := ptEvent(t, ptNow(), "unvouched")
		unvouched.Sig = testutil.FlipHex(unvouched.Sig)
		local.hand(t, ConnMessage{Label: "EVENT", SubID: sub.wireID, Event: unvouched})

		// Verified claimed on Messages: from another relay, or from the
		// in-process connection's own channel, the claim is ignored.
		forged := ptEvent(t, ptNow(), "forged")
		forged.Sig = testutil.FlipHex(forged.Sig)
		forged2 := ptEvent(t, ptNow(), "forged on the channel")
		forged2.Sig = testutil.FlipHex(forged2.Sig)
		other.send(ConnMessage{Label: "EVENT", SubID: sub.wireID, Event: forged, Verified: true})
		local.send(ConnMessage{Label: "EVENT", SubID: sub.wireID, Event: forged2, Verified: true})
		other.event(sub.wireID, good)
		if got := ptRecv(t, sub); got.ID != good.ID {
			t.Fatalf("delivered %q", got.Content)
		}
		ptNone(t, sub)
		if st := ptStatus(p, "ws://other"); st.EventsInvalid != 1 {
			t.Fatalf("other relay: %+v", st)
		}
		if st := ptStatus(p, "local"); st.EventsInvalid != 2 || st.EventsReceived != 3 {
			t.Fatalf("in-process relay: %+v", st)
		}
	})
}

// A connection that reads the network is never an InProcessConn.
func TestWebsocketConnIsNotInProcess(t *testing.T) {
	var c Conn = &wsConn{}
	if _, ok := c.(InProcessConn); ok {
		t.Fatal("the WebSocket connection claims to be in-process")
	}
}

// With the pool's one relay connected, Publish hands the event to it
// from the caller's goroutine (no goroutine started and waited for);
// with more, each relay is published to concurrently, and so is one
// connected alone while another may connect during the publication (see
// TestPublishReachesARelayThatConnectsMeanwhile).
func TestPoolPublishToOneRelayInCallersGoroutine(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newPTNet()
		var mu sync.Mutex
		stacks := map[string]string{}
		record := func(url string) func(context.Context, nostr.Event) (bool, string, error) {
			return func(context.Context, nostr.Event) (bool, string, error) {
				buf := make([]byte, 64<<10)
				buf = buf[:runtime.Stack(buf, false)]
				mu.Lock()
				stacks[url] = string(buf)
				mu.Unlock()
				return true, "", nil
			}
		}
		n.publish["ws://a"], n.publish["ws://b"] = record("ws://a"), record("ws://b")
		p := newPTPool(t, n, PoolConfig{URLs: []string{"ws://a"}})
		ev := ptEvent(t, ptNow(), "publish me")
		if _, err := p.Publish(t.Context(), *ev); err != nil {
			t.Fatal(err)
		}
		const caller = "relay.(*Pool).Publish("
		if s := stacks["ws://a"]; !strings.Contains(s, caller) {
			t.Fatalf("one relay: not published from the caller's goroutine:\n%s", s)
		}

		p.Close()
		p = newPTPool(t, n, PoolConfig{URLs: []string{"ws://a", "ws://b"}})
		if _, err := p.Publish(t.Context(), *ev); err != nil {
			t.Fatal(err)
		}
		synctest.Wait() // the relay whose answer came second may still be recording it
		mu.Lock()
		defer mu.Unlock()
		for _, url := range []string{"ws://a", "ws://b"} {
			if s := stacks[url]; strings.Contains(s, caller) {
				t.Fatalf("two relays: %s published from the caller's goroutine:\n%s", url, s)
			}
		}
	})
}

// Over a real WebSocket, a relay that forwards a forged event (even one
// claiming, in whatever form, to be verified) gets it dropped: only the
// in-process connection's events skip the pool's check, and nothing read
// from a socket can become one.
func TestPoolChecksEventsFromAWebSocketRelay(t *testing.T) {
	good := ptEvent(t, ptNow(), "good")
	forged := ptEvent(t, ptNow(), "forged")
	forged.Sig = testutil.FlipHex(forged.Sig)
	bad := newHostileRelay(t, func(msg []byte, write func([]byte) error) {
		req, ok := nostr.ParseMessage(msg).(*nostr.ReqEnvelope)
		if !ok {
			return
		}
		for _, ev := range []*nostr.Event{forged, good} {
			frame, _ := nostr.EventEnvelope{SubscriptionID: &req.SubscriptionID, Event: *ev}.MarshalJSON()
			// A field the pool's ConnMessage has, smuggled into the event.
			frame = append(frame[:len(frame)-2], []byte(`,"Verified":true}]`)...)
			if err := write(frame); err != nil {
				return
			}
		}
	})
	p := NewPool(PoolConfig{URLs: []string{bad.url}, Logger: ptLogger()})
	p.Start(t.Context())
	defer p.Close()
	sub, err := p.Subscribe(t.Context(), ptFilter())
	if err != nil {
		t.Fatal(err)
	}
	select {
	case ev := <-sub.Events():
		if ev.ID != good.ID {
			t.Fatalf("delivered %q", ev.Content)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event delivered")
	}
	if st := p.Health()[0]; st.EventsInvalid != 1 {
		t.Fatalf("health %+v, want the forged event counted invalid", st)
	}
}
