package client_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/internal/relaytest"
	"github.com/snapnode/snapnode/internal/testclock"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// wireRecorder is a relay pool that records the filters subscribed to and
// the events published, in order.
type wireRecorder struct {
	*relay.Pool
	mu      sync.Mutex
	steps   []string
	filters []nostr.Filter
	events  []nostr.Event
}

func (w *wireRecorder) Subscribe(ctx context.Context, f nostr.Filter) (*relay.Subscription, error) {
	w.mu.Lock()
	w.steps, w.filters = append(w.steps, "subscribe"), append(w.filters, f)
	w.mu.Unlock()
	return w.Pool.Subscribe(ctx, f)
}

func (w *wireRecorder) Publish(ctx context.Context, ev nostr.Event) (relay.PublishResult, error) {
	w.mu.Lock()
	w.steps, w.events = append(w.steps, "publish"), append(w.events, ev)
	w.mu.Unlock()
	return w.Pool.Publish(ctx, ev)
}

// A request over Nostr is the event SDK peers send and listen for the
// answer of: kind 21339 (4339 when persisted) by the untweaked key, the
// one tag ["p", agent's key], the NIP-44 v2 sealed request as content,
// created now; and before it is published, the requester subscribes to
// both kinds, #p its own key, #e the request's id, since now − 5 s.
func TestNostrRequestOnTheWire(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	url := relaytest.Serve(t, embedded.Config{})
	ctx, pool := startPool(t, url, quiet)

	clock := testclock.New(time.Now().Truncate(time.Second))
	rec := &wireRecorder{Pool: pool}
	c := client.NewNostr(client.NostrConfig{Key: clientKey, Relays: rec, Logger: quiet, Now: clock.Now})
	target := client.Target{Address: addr(serverKey), PubKey: serverKey.NostrPublicKey()}
	agentSeal := snapnostr.NewSealer(serverKey, 4)
	for _, tc := range []struct {
		persist bool
		kind    int
	}{{false, 21339}, {true, 4339}} {
		rec.steps, rec.filters, rec.events = nil, nil, nil
		// Long enough for the subscription and the publish on a loaded
		// machine (300 ms was not, under -race); no agent answers.
		rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := c.To(target, tc.persist).Send(rctx, "tasks/get", []byte(`{"taskId":"t"}`))
		rcancel()
		if !errors.Is(err, client.ErrTimeout) {
			t.Fatalf("persist %v: err = %v, want a time-out (no agent answers)", tc.persist, err)
		}
		if !slices.Equal(rec.steps, []string{"subscribe", "publish"}) {
			t.Fatalf("persist %v: %q, want the subscription before the request", tc.persist, rec.steps)
		}
		ev := rec.events[0]
		want := nostr.Tags{{"p", serverKey.NostrPublicKey()}}
		if ev.Kind != tc.kind || ev.PubKey != clientKey.NostrPublicKey() || ev.CreatedAt != nostr.Timestamp(clock.Now().Unix()) ||
			!slices.EqualFunc(ev.Tags, want, func(a, b nostr.Tag) bool { return slices.Equal(a, b) }) {
			t.Errorf("persist %v: event kind %d by %s at %d, tags %v", tc.persist, ev.Kind, ev.PubKey, ev.CreatedAt, ev.Tags)
		}
		if ok, err := ev.CheckSignature(); !ok || err != nil {
			t.Errorf("persist %v: the event's signature does not verify: %v", tc.persist, err)
		}
		plain, err := agentSeal.Open(ev.PubKey, ev.Content)
		if err != nil || len(ev.Content) == 0 || ev.Content[0] == '#' {
			t.Fatalf("persist %v: content does not open with NIP-44 v2: %v", tc.persist, err)
		}
		if m, err := snap.Parse(plain); err != nil || m.Type != snap.TypeRequest || m.To != addr(serverKey) || m.From != addr(clientKey) {
			t.Errorf("persist %v: sealed request %s (%v)", tc.persist, plain, err)
		}
		f := rec.filters[0]
		since := nostr.Timestamp(clock.Now().Add(-snap.DefaultMaxDrift).Unix()) // the timestamp window
		if !slices.Equal(f.Kinds, []int{21339, 4339}) || f.Since == nil || *f.Since != since || len(f.Tags) != 2 ||
			!slices.Equal(f.Tags["p"], []string{clientKey.NostrPublicKey()}) || !slices.Equal(f.Tags["e"], []string{ev.ID}) {
			t.Errorf("persist %v: reply filter %v, want kinds [21339 4339], #p [%s], #e [%s], since %d",
				tc.persist, f, clientKey.NostrPublicKey(), ev.ID, since)
		}
	}
}
