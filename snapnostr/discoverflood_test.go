package snapnostr_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
	"github.com/snapnode/snapnode/snapnostr"
)

// publishAll publishes evs to the relay at url over a few connections
// at once, each event's OK awaited.
func publishAll(t *testing.T, url string, evs []nostr.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const conns = 8
	var wg sync.WaitGroup
	errs := make(chan error, conns)
	for c := range conns {
		conn, err := relay.DialWebsocket(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			defer conn.Close()
			for i := c; i < len(evs); i += conns {
				ok, reason, err := conn.Publish(ctx, evs[i])
				if err == nil && !ok {
					err = errors.New(reason)
				}
				if err != nil {
					errs <- fmt.Errorf("event %d: %w", i, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// impostors returns n copies of the card event victim, each by a key of
// its own (relays keep one card per key and d tag), dated from at on, a
// second apart: every one is dropped by discovery (ErrImpostorCard).
func impostors(t *testing.T, victim nostr.Event, n int, at time.Time) []nostr.Event {
	t.Helper()
	evs := make([]nostr.Event, n)
	for i := range evs {
		k, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		evs[i] = nostr.Event{PubKey: k.NostrPublicKey(), CreatedAt: nostr.Timestamp(at.Unix() + int64(i)),
			Kind: relay.KindCard, Tags: victim.Tags, Content: victim.Content}
		if err := relay.SignEvent(k, &evs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return evs
}

// A flood of impostor cards tagged with an agent's address, all newer
// than its own card, does not hide the agent: discovery reads the cards
// a page at a time, newest first, and finds its card under them, with
// every impostor counted as rejected. The flood is past the pool's bound
// of one query's events on a relay that answers all it has (before, the
// query failed with relay.ErrQueryTruncated), and past what a relay
// gives one query (before, the agent was not found).
func TestDiscoverUnderAFloodOfImpostorCards(t *testing.T) {
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-4 * time.Hour).Truncate(time.Second)
	own := signedCard(t, agent, at)
	cases := []struct {
		name     string
		cfg      embedded.Config
		maxQuery int // the pool's QueryMaxEvents
		flood    int
	}{
		{"past the pool's bound", embedded.Config{MaxLimit: 1000, DefaultLimit: 1000}, 100, 101},
		{"past the relay's answer", embedded.Config{MaxLimit: 50, DefaultLimit: 50}, 0, 60},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			url := startRelayWith(t, tc.cfg)
			publishAll(t, url, append([]nostr.Event{own}, impostors(t, own, tc.flood, at.Add(time.Second))...))

			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pool := relay.NewPool(relay.PoolConfig{URLs: []string{url}, QueryMaxEvents: tc.maxQuery, Logger: slog.New(slog.DiscardHandler)})
			pool.Start(ctx)
			defer pool.Close()
			found, rejected, err := snapnostr.DiscoverByIdentity(ctx, pool, agent.Address(identity.Mainnet), snapnostr.DiscoverConfig{})
			if err != nil {
				t.Fatalf("discover: %v (%d rejected)", err, rejected.Count)
			}
			if found.EventID != own.ID || found.PubKey != agent.NostrPublicKey() {
				t.Fatalf("found %+v, want the agent's own card %s", found, own.ID)
			}
			if rejected.Count != tc.flood || len(rejected.First) != min(tc.flood, snapnostr.MaxRejectedKept) {
				t.Errorf("%d card events rejected, %d kept; want %d, %d", rejected.Count, len(rejected.First), tc.flood, min(tc.flood, snapnostr.MaxRejectedKept))
			}
			for _, r := range rejected.First {
				if !errors.Is(r.Err, snapnostr.ErrImpostorCard) {
					t.Fatalf("rejected %s: %v, want an impostor", r.EventID, r.Err)
				}
			}
		})
	}
}
