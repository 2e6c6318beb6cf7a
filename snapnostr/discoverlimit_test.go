package snapnostr_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/fakerelay"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
	"github.com/snapnode/snapnode/snapnostr"
)

// floodingRelay is a WebSocket relay that answers every REQ with evs,
// whatever the REQ's limit and until, then EOSE.
func floodingRelay(t *testing.T, evs []nostr.Event) string {
	t.Helper()
	return fakerelay.Serve(t, fakerelay.AnswerREQ(func(*nostr.ReqEnvelope) []nostr.Event { return evs }))
}

// A relay that ignores the limit of discovery's queries, answering each
// with more impostor cards than one query may hold, does not hide the
// agent's card that another relay holds. Before, each of discovery's
// queries failed with relay.ErrQueryTruncated, down to a limit of one,
// and discovery failed with it.
func TestDiscoverPastARelayIgnoringTheLimit(t *testing.T) {
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().Add(-time.Hour).Truncate(time.Second)
	own := signedCard(t, agent, at)
	const maxQuery = 100
	bad := floodingRelay(t, impostors(t, own, maxQuery+1, at.Add(time.Second)))
	good := startRelayWith(t, embedded.Config{})
	publishAll(t, good, []nostr.Event{own})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := relay.NewPool(relay.PoolConfig{URLs: []string{bad, good}, QueryMaxEvents: maxQuery, Logger: slog.New(slog.DiscardHandler)})
	pool.Start(ctx)
	defer pool.Close()
	found, rejected, err := snapnostr.DiscoverByIdentity(ctx, pool, agent.Address(identity.Mainnet), snapnostr.DiscoverConfig{})
	if err != nil {
		t.Fatalf("discover: %v (%d rejected)", err, rejected.Count)
	}
	if found.EventID != own.ID {
		t.Fatalf("found %s, want the agent's own card %s", found.EventID, own.ID)
	}
}
