package relay

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// Events outside a subscription's filter are dropped before their id is
// hashed or their signature checked: a relay that ignores the filter (or
// floods the node with other kinds, other p tags) costs a comparison an
// event, not a signature check.
func TestOffFilterEventsDroppedBeforeVerifying(t *testing.T) {
	const n = 500
	sentinel := ptEvent(t, ptNow(), "sentinel")
	bad := floodAfterREQ(t, sentinel, func(sub string, write func([]byte) error) error {
		for i := range n {
			// Unsigned, so checking it would count it invalid.
			ev := nostr.Event{ID: strings.Repeat("ab", 32), PubKey: ptPub, Sig: strings.Repeat("cd", 64),
				CreatedAt: ptNow(), Kind: 1, Tags: nostr.Tags{{"p", ptPub}}, Content: "other kind"}
			if i%2 == 1 {
				ev.Kind, ev.Tags = KindMessage, nostr.Tags{{"p", strings.Repeat("ef", 32)}}
			}
			b, _ := nostr.EventEnvelope{SubscriptionID: &sub, Event: ev}.MarshalJSON()
			if err := write(b); err != nil {
				return err
			}
		}
		return nil
	})
	p := NewPool(PoolConfig{URLs: []string{bad.url}, Logger: ptLogger()})
	p.Start(t.Context())
	defer p.Close()
	sub, err := p.Subscribe(t.Context(), ptFilter())
	if err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, sub, sentinel)
	if st := p.Health()[0]; st.EventsMismatch != n || st.EventsInvalid != 0 {
		t.Fatalf("%d events outside the filter: %d counted mismatched, %d invalid (checked first)", n, st.EventsMismatch, st.EventsInvalid)
	}
}

// A forged copy of an event (its id, other content or another signature)
// from a hostile relay does not mark the id delivered: the genuine event,
// from another relay, is still taken.
func TestForgedCopyDoesNotShadowTheGenuine(t *testing.T) {
	good := newITRelay(t)
	genuine := ptEvent(t, ptNow(), "genuine")
	otherContent := *genuine
	otherContent.Content = "forged"
	otherSig := *genuine
	otherSig.Sig = flipHex(genuine.Sig)
	var once sync.Once
	bad := newHostileRelay(t, func(frame []byte, write func([]byte) error) {
		req, ok := nostr.ParseMessage(frame).(*nostr.ReqEnvelope)
		if !ok {
			return
		}
		once.Do(func() {
			for _, ev := range []nostr.Event{otherContent, otherSig, otherContent} {
				b, _ := nostr.EventEnvelope{SubscriptionID: &req.SubscriptionID, Event: ev}.MarshalJSON()
				_ = write(b)
			}
			b, _ := nostr.EOSEEnvelope(req.SubscriptionID).MarshalJSON()
			_ = write(b)
		})
	})
	p := NewPool(PoolConfig{URLs: []string{bad.url, good.url}, Logger: ptLogger()})
	p.Start(t.Context())
	defer p.Close()
	sub, err := p.Subscribe(t.Context(), ptFilter())
	if err != nil {
		t.Fatal(err)
	}
	itWaitFor(t, "the forged copies", func() bool { return ptStatus(p, bad.url).EventsInvalid == 3 })
	itWaitFor(t, "the good relay", func() bool { return itState(p, good.url) == StateConnected })
	if _, err := p.Publish(context.Background(), *genuine); err != nil {
		t.Fatal(err)
	}
	awaitEvent(t, sub, genuine)
}

// A relay that refuses every publication (OK false) costs the node none:
// each is taken by the other relay; the refusals are counted in the
// relay's health and logged at a bounded rate, not a warning an event.
func TestRefusingRelayLoggedBounded(t *testing.T) {
	const n = 200
	good := newITRelay(t)
	bad := newHostileRelay(t, func(frame []byte, write func([]byte) error) {
		if env, ok := nostr.ParseMessage(frame).(*nostr.EventEnvelope); ok {
			b, _ := nostr.OKEnvelope{EventID: env.Event.ID, OK: false, Reason: "blocked: pay first"}.MarshalJSON()
			_ = write(b)
		}
	})
	logs := newLogBytes()
	p := NewPool(PoolConfig{URLs: []string{bad.url, good.url}, Logger: slog.New(logs)})
	p.Start(t.Context())
	defer p.Close()
	itWaitFor(t, "both relays connected", func() bool {
		return itState(p, good.url) == StateConnected && itState(p, bad.url) == StateConnected
	})
	_, before := logs.written()
	for i := range n {
		res, err := p.Publish(context.Background(), *ptEvent(t, ptNow(), fmt.Sprint("reply ", i)))
		if err != nil || !res.Relays[1].OK {
			t.Fatalf("publication %d: %v, %+v", i, err, res.Relays)
		}
	}
	itWaitFor(t, "every refusal counted", func() bool { return ptStatus(p, bad.url).PublishFailed == n })
	if st := ptStatus(p, good.url); st.PublishFailed != 0 {
		t.Fatalf("the good relay: %d failed", st.PublishFailed)
	}
	if _, after := logs.written(); after-before > talkPerMinute {
		t.Fatalf("%d lines logged for %d refusals", after-before, n)
	}
}
