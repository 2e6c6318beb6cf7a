package snapnostr_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/fakerelay"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
	"github.com/snapnode/snapnode/snapnostr"
)

// agentCards returns the card events of n agents of their own, each
// offering the skill "echo" (cardOf), the first dated at, each next one
// step later (newest first for a negative step).
func agentCards(t *testing.T, n int, at time.Time, step time.Duration) []nostr.Event {
	t.Helper()
	evs := make([]nostr.Event, n)
	for i := range evs {
		k, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		if evs[i], err = snapnostr.CardEvent(cardOf(t, k), k, at.Add(time.Duration(i)*step)); err != nil {
			t.Fatal(err)
		}
	}
	return evs
}

// discoverPool returns a pool on urls, closed when the test ends.
func discoverPool(t *testing.T, urls ...string) (*relay.Pool, context.Context) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	pool := relay.NewPool(relay.PoolConfig{URLs: urls, Logger: slog.New(slog.DiscardHandler)})
	pool.Start(ctx)
	t.Cleanup(func() { pool.Close(); cancel() })
	return pool, ctx
}

// signedCard returns the card event of card by k dated at, with tags
// added after the card's own.
func signedCard(t *testing.T, k *identity.Key, at time.Time, tags ...nostr.Tag) nostr.Event {
	t.Helper()
	ev, err := snapnostr.CardEvent(cardOf(t, k), k, at)
	if err != nil {
		t.Fatal(err)
	}
	if len(tags) > 0 {
		ev.Tags = append(ev.Tags, tags...)
		if err := relay.SignEvent(k, &ev); err != nil {
			t.Fatal(err)
		}
	}
	return ev
}

// A card whose NIP-40 expiration has passed by discovery's clock is
// dropped, counted as rejected: the agent's older card that has not
// expired is the one found. Relays keep one card per key, so the two are
// on two relays; the relays serve the expired one (their clock is not
// past its expiration yet), discovery's clock is. Before, discovery took
// the expired card, the newest.
func TestDiscoverIgnoresExpiredCards(t *testing.T) {
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	older := signedCard(t, agent, now.Add(-2*time.Hour))
	newer := signedCard(t, agent, now.Add(-time.Hour), nostr.Tag{"expiration", strconv.FormatInt(now.Add(time.Hour).Unix(), 10)})
	a, b := startRelay(t), startRelay(t)
	publishAll(t, a, []nostr.Event{older})
	publishAll(t, b, []nostr.Event{newer})
	pool, ctx := discoverPool(t, a, b)
	addr := agent.Address(identity.Mainnet)

	found, _, err := snapnostr.DiscoverByIdentity(ctx, pool, addr, snapnostr.DiscoverConfig{})
	if err != nil || found.EventID != newer.ID {
		t.Fatalf("before its expiration: found %+v, %v; want the newer card", found, err)
	}
	later := func() time.Time { return now.Add(90 * time.Minute) }
	found, rejected, err := snapnostr.DiscoverByIdentity(ctx, pool, addr, snapnostr.DiscoverConfig{Now: later})
	if err != nil || found.EventID != older.ID {
		t.Fatalf("after its expiration: found %+v, %v; want the older card", found, err)
	}
	if rejected.Count != 1 || rejected.First[0].EventID != newer.ID || !errors.Is(rejected.First[0].Err, snapnostr.ErrStaleCard) {
		t.Fatalf("rejected %+v, want the expired card, stale", rejected)
	}
	list, _, err := snapnostr.DiscoverBySkill(ctx, pool, "echo", snapnostr.DiscoverConfig{Now: later})
	if err != nil || len(list) != 1 || list[0].EventID != older.ID {
		t.Fatalf("by skill after its expiration: %+v, %v; want the older card alone", list, err)
	}
}

// A card dated further ahead of discovery's clock than the timestamp
// window (DiscoverConfig.MaxDrift) is dropped: published by a clock that
// was wrong, it would pass for the agent's newest card until that date,
// shadowing every card the agent publishes meanwhile. One dated within
// the window is taken.
func TestDiscoverIgnoresCardsDatedAhead(t *testing.T) {
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Second)
	current := signedCard(t, agent, now.Add(-time.Hour))
	ahead := signedCard(t, agent, now.AddDate(1, 0, 0))
	// Relays of their own may take a card dated a year ahead.
	a, b := startRelay(t), startRelayWith(t, embedded.Config{CreatedAtUpperLimit: -1})
	publishAll(t, a, []nostr.Event{current})
	publishAll(t, b, []nostr.Event{ahead})
	pool, ctx := discoverPool(t, a, b)
	addr := agent.Address(identity.Mainnet)
	clock := func() time.Time { return now }

	found, rejected, err := snapnostr.DiscoverByIdentity(ctx, pool, addr, snapnostr.DiscoverConfig{Now: clock})
	if err != nil || found.EventID != current.ID {
		t.Fatalf("found %+v, %v; want the card dated now, not the one a year ahead", found, err)
	}
	if rejected.Count != 1 || rejected.First[0].EventID != ahead.ID || !errors.Is(rejected.First[0].Err, snapnostr.ErrStaleCard) {
		t.Fatalf("rejected %+v, want the card dated ahead, stale", rejected)
	}
	list, _, err := snapnostr.DiscoverBySkill(ctx, pool, "echo", snapnostr.DiscoverConfig{Now: clock})
	if err != nil || len(list) != 1 || list[0].EventID != current.ID {
		t.Fatalf("by skill: %+v, %v; want the card dated now alone", list, err)
	}

	// Within the window (a minute by default; a wider one when asked).
	soon := func() time.Time { return ahead.CreatedAt.Time().Add(-50 * time.Second) }
	if found, _, err := snapnostr.DiscoverByIdentity(ctx, pool, addr, snapnostr.DiscoverConfig{Now: soon}); err != nil || found.EventID != ahead.ID {
		t.Fatalf("50 s before its date: found %+v, %v; want it", found, err)
	}
	wide := snapnostr.DiscoverConfig{Now: func() time.Time { return ahead.CreatedAt.Time().Add(-5 * time.Minute) }, MaxDrift: 10 * time.Minute}
	if found, _, err := snapnostr.DiscoverByIdentity(ctx, pool, addr, wide); err != nil || found.EventID != ahead.ID {
		t.Fatalf("5 minutes before its date, a window of 10: found %+v, %v; want it", found, err)
	}
}

// A relay serving more agents' cards offering a skill than one discovery
// keeps (made up: anyone can make keys and sign cards) does not crowd out
// the agents another relay holds: the relays take turns giving their
// newest agents. And each relay is paged on its own: the honest relay
// here gives 50 cards a page, and its older cards are read whether the
// flood is dated before or after them. Before, the pages were dated up to
// the oldest card of the page before, whichever relay gave it: a flood
// dated before the agents' cards skipped those the honest relay had not
// given yet, and filled the 1,000 agents kept.
func TestDiscoverBySkillGivesEachRelayItsShare(t *testing.T) {
	const real, flood = 60, snapnostr.DiscoverMaxAgents + 100
	now := time.Now().Truncate(time.Second)
	agents := agentCards(t, real, now.Add(-time.Hour), -time.Second)
	honest := startRelayWith(t, embedded.Config{MaxLimit: 50, DefaultLimit: 50})
	publishAll(t, honest, agents)
	for _, tc := range []struct {
		name string
		at   time.Time // the flood's newest card; the others a second apart before it
	}{
		{"flood newer", now.Add(-time.Minute)},
		{"flood older", now.Add(-2 * time.Hour)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hostile := floodingRelay(t, agentCards(t, flood, tc.at, -time.Second))
			pool, ctx := discoverPool(t, hostile, honest)
			list, rejected, err := snapnostr.DiscoverBySkill(ctx, pool, "echo", snapnostr.DiscoverConfig{})
			if err != nil {
				t.Fatal(err)
			}
			got := map[string]bool{}
			for _, d := range list {
				got[d.EventID] = true
			}
			missing := 0
			for _, ev := range agents {
				if !got[ev.ID] {
					missing++
				}
			}
			if missing > 0 || len(list) != snapnostr.DiscoverMaxAgents || rejected.Cut == "" {
				t.Fatalf("%d agents found (cut: %q), %d of the honest relay's %d missing; want %d, all of them",
					len(list), rejected.Cut, missing, real, snapnostr.DiscoverMaxAgents)
			}
		})
	}
}

// A relay serving one card event tagged with the agent's address, dated
// long ago, does not hide the agent's card from a relay that gives fewer
// card events a page than it holds (impostors' newer cards among them).
// Before, the second page was dated up to the oldest event of the first,
// the old one: the honest relay's older cards, the agent's own among
// them, were never read, and discovery found nothing.
func TestDiscoverByIdentityPagesEachRelayOnItsOwn(t *testing.T) {
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-4 * time.Hour).Truncate(time.Second)
	own := signedCard(t, agent, at)
	honest := startRelayWith(t, embedded.Config{MaxLimit: 50, DefaultLimit: 50})
	publishAll(t, honest, append([]nostr.Event{own}, impostors(t, own, 60, at.Add(time.Second))...))
	old := impostors(t, own, 1, time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC))
	pool, ctx := discoverPool(t, floodingRelay(t, old), honest)
	found, rejected, err := snapnostr.DiscoverByIdentity(ctx, pool, own.Tags.GetD(), snapnostr.DiscoverConfig{})
	if err != nil || found.EventID != own.ID {
		t.Fatalf("found %+v, %v (%d rejected); want the agent's own card", found, err, rejected.Count)
	}
}

// cyclingRelay is a WebSocket relay that answers its n-th REQ with
// evs[n % len(evs)] alone, whatever the REQ's filter, then EOSE.
func cyclingRelay(t *testing.T, evs []nostr.Event) string {
	t.Helper()
	var n atomic.Int64
	return fakerelay.Serve(t, fakerelay.AnswerREQ(func(*nostr.ReqEnvelope) []nostr.Event {
		return []nostr.Event{evs[int(n.Add(1)-1)%len(evs)]}
	}))
}

// A relay that answers each page with one of two card events dated at
// one second, in turns, is stepped past that second: each page brings
// one it gave before, as the page before did not. Discovery ends, with
// nothing found, well within its time.
func TestDiscoverStepsPastARelayGivingTheSameCardsInTurns(t *testing.T) {
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	own := signedCard(t, agent, time.Now().Add(-time.Hour).Truncate(time.Second))
	pair := impostors(t, own, 2, time.Now().Add(-time.Hour))
	pair[1] = impostors(t, own, 1, pair[0].CreatedAt.Time())[0]
	pool, _ := discoverPool(t, cyclingRelay(t, pair))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, rejected, err := snapnostr.DiscoverByIdentity(ctx, pool, own.Tags.GetD(), snapnostr.DiscoverConfig{})
	if !errors.Is(err, snapnostr.ErrNotFound) || rejected.Count != 2 || rejected.Cut != "" {
		t.Fatalf("discover: %v, %d rejected (cut: %q); want not found, both rejected, all read", err, rejected.Count, rejected.Cut)
	}
}
