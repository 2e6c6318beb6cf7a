package relay_test

import (
	"context"
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/relaytest"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
)

// serveEmbedded serves an embedded relay, in memory, on a loopback socket
// until the test ends, and returns its URL.
func serveEmbedded(t *testing.T) string {
	t.Helper()
	return relaytest.Serve(t, embedded.Config{})
}

func resumeStatus(p *relay.Pool, url string) relay.RelayStatus {
	for _, s := range p.Health() {
		if s.URL == url {
			return s
		}
	}
	return relay.RelayStatus{}
}

// Each relay resumes from the last event it brought itself. Relay B's
// connection drops (as a half-open connection is found dead, a minute
// late); a stored request was published on B alone just before, and
// never reached the subscriber; relay A meanwhile delivers newer events.
// When B is back, it must be asked for what it holds since its own last
// event, not since A's: before, the resume point was the newest event
// from any relay, and the request was never delivered.
func TestPoolResumesEachRelayFromItsOwnLastEvent(t *testing.T) {
	aURL, bURL := serveEmbedded(t), serveEmbedded(t)
	toB := &relaytest.Cuttable{URL: bURL} // the subscriber's way to B
	sp := relay.StartedPool(t, []string{aURL, bURL}, toB.Dial)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()

	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	requester, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	now := nostr.Timestamp(time.Now().Unix())
	since := now - 600
	sub, err := sp.Subscribe(ctx, nostr.Filter{Kinds: []int{relay.KindMessage},
		Tags: nostr.TagMap{"p": {agent.NostrPublicKey()}}, Since: &since})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.EOSE():
	case <-ctx.Done():
		t.Fatal("no EOSE")
	}

	onA, onB := relay.StartedPool(t, []string{aURL}, nil), relay.StartedPool(t, []string{bURL}, nil)
	relay.WaitFor(t, "publishers connected", func() bool {
		return resumeStatus(onA, aURL).State == relay.StateConnected && resumeStatus(onB, bURL).State == relay.StateConnected
	})
	request := func(at nostr.Timestamp, content string) *nostr.Event {
		ev := &nostr.Event{Kind: relay.KindMessage, CreatedAt: at, Content: content,
			Tags: nostr.Tags{{"p", agent.NostrPublicKey()}}}
		if err := relay.SignEvent(requester, ev); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	publish := func(p *relay.Pool, ev *nostr.Event) {
		t.Helper()
		if _, err := p.Publish(ctx, *ev); err != nil {
			t.Fatalf("publish %q: %v", ev.Content, err)
		}
	}
	expect := func(want *nostr.Event) {
		t.Helper()
		select {
		case ev, ok := <-sub.Events():
			if !ok {
				t.Fatalf("subscription ended: %v", sub.Err())
			}
			if ev.ID != want.ID {
				t.Fatalf("got %q, want %q", ev.Content, want.Content)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("%q not delivered", want.Content)
		}
	}

	// e1 reaches the subscriber from both relays.
	e1 := request(now-120, "e1: on both relays")
	publish(onA, e1)
	publish(onB, e1)
	expect(e1)
	relay.WaitFor(t, "e1 from B", func() bool { return resumeStatus(sp, bURL).EventsReceived == 1 })

	// B's connection drops, and stays away.
	toB.Cut()
	relay.WaitFor(t, "B seen down", func() bool { return resumeStatus(sp, bURL).State != relay.StateConnected })

	// A request stored on B alone, from just before the drop; A goes on
	// delivering newer events.
	lost := request(now-30, "published on B alone")
	publish(onB, lost)
	e2 := request(now, "e2: on A, newer")
	publish(onA, e2)
	expect(e2)

	// B comes back: the request is delivered.
	toB.Restore()
	expect(lost)
}

// SubscribeWith begins each relay given a point from its own, the others
// from the filter's Since, and Resume reports the point of each relay
// that brought an event: what a subscriber keeps across a restart.
func TestPoolSubscribeWithBeginsEachRelayFromItsOwnSince(t *testing.T) {
	aURL, bURL := serveEmbedded(t), serveEmbedded(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	author, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	now := nostr.Timestamp(time.Now().Unix())
	stored := func(url string, at nostr.Timestamp, content string) *nostr.Event {
		t.Helper()
		ev := &nostr.Event{Kind: relay.KindMessage, CreatedAt: at, Content: content,
			Tags: nostr.Tags{{"p", agent.NostrPublicKey()}}}
		if err := relay.SignEvent(author, ev); err != nil {
			t.Fatal(err)
		}
		p := relay.StartedPool(t, []string{url}, nil)
		if _, err := p.Publish(ctx, *ev); err != nil {
			t.Fatalf("publish %q: %v", content, err)
		}
		return ev
	}
	oldOnA := stored(aURL, now-300, "on A, before the filter's since")
	oldOnB := stored(bURL, now-300, "on B, before the filter's since, after B's own")
	newOnA := stored(aURL, now-10, "on A, after the filter's since")
	early := stored(bURL, now-900, "on B, before B's own since")

	sp := relay.StartedPool(t, []string{aURL, bURL}, nil)
	relay.WaitFor(t, "both relays connected", func() bool {
		return resumeStatus(sp, aURL).State == relay.StateConnected && resumeStatus(sp, bURL).State == relay.StateConnected
	})
	since := now - 60
	sub, err := sp.SubscribeWith(ctx, nostr.Filter{Kinds: []int{relay.KindMessage},
		Tags: nostr.TagMap{"p": {agent.NostrPublicKey()}}, Since: &since},
		relay.SubscribeOptions{Since: map[string]nostr.Timestamp{bURL: now - 600}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.EOSE():
	case <-ctx.Done():
		t.Fatal("no EOSE")
	}
	got := map[string]bool{}
	for len(sub.Events()) > 0 {
		got[(<-sub.Events()).ID] = true
	}
	for _, c := range []struct {
		ev   *nostr.Event
		want bool
	}{{oldOnA, false}, {oldOnB, true}, {newOnA, true}, {early, false}} {
		if got[c.ev.ID] != c.want {
			t.Errorf("%q delivered: %v, want %v", c.ev.Content, got[c.ev.ID], c.want)
		}
	}
	want := map[string]nostr.Timestamp{aURL: newOnA.CreatedAt, bURL: oldOnB.CreatedAt}
	if points := sub.Resume(); !maps.Equal(points, want) {
		t.Errorf("Resume = %v, want %v", points, want)
	}
}

// A point kept under another spelling of the relay's URL (the operator
// added a trailing slash, or wrote the scheme or host in capitals, or the
// scheme's default port) is still that relay's: before, it was ignored,
// and the relay began from the filter's Since, skipping what it held
// since its own point.
func TestPoolSubscribeWithMatchesTheRelaysURLSpelledOtherwise(t *testing.T) {
	url := serveEmbedded(t)
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	now := nostr.Timestamp(time.Now().Unix())
	ev := &nostr.Event{Kind: relay.KindMessage, CreatedAt: now - 300, Content: "before the filter's since, after the relay's own",
		Tags: nostr.Tags{{"p", agent.NostrPublicKey()}}}
	if err := relay.SignEvent(agent, ev); err != nil {
		t.Fatal(err)
	}
	if _, err := relay.StartedPool(t, []string{url}, nil).Publish(ctx, *ev); err != nil {
		t.Fatal(err)
	}
	sp := relay.StartedPool(t, []string{url}, nil)
	relay.WaitFor(t, "connected", func() bool { return resumeStatus(sp, url).State == relay.StateConnected })
	for _, spelled := range []string{url + "/", strings.ToUpper(url)} {
		since := now - 60
		sub, err := sp.SubscribeWith(ctx, nostr.Filter{Kinds: []int{relay.KindMessage},
			Tags: nostr.TagMap{"p": {agent.NostrPublicKey()}}, Since: &since},
			relay.SubscribeOptions{Since: map[string]nostr.Timestamp{spelled: now - 600}})
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-sub.EOSE():
		case <-ctx.Done():
			t.Fatal("no EOSE")
		}
		if n := len(sub.Events()); n != 1 {
			t.Errorf("the point given for %s: %d events delivered, want the one after it", spelled, n)
		}
		sub.Close()
	}
}
