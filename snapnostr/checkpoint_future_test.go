package snapnostr

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/testclock"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
)

// A stored request dated far in the future, which anyone may publish (it
// need not even open), is recorded as processed at the inbox's now: its
// created_at would otherwise become the checkpoint's newest, so that the
// next start subscribed from a time no genuine request reaches (the node
// deaf on Nostr until then) and the ids processed before it were
// forgotten.
func TestCheckpointIgnoresAFutureCreatedAt(t *testing.T) {
	clock := testclock.New(time.Unix(1_800_000_000, 0))
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	peer, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	cp := NewMemoryCheckpoint()
	in := NewInbox(InboxConfig{Key: agent, Transport: &publishCounter{}, Checkpoint: cp, Now: clock.Now,
		Logger: slog.New(slog.DiscardHandler),
		Handler: snap.NewServer(snap.ServerConfig{Key: agent, Router: snap.NewRouter(), Now: clock.Now,
			Logger: slog.New(slog.DiscardHandler)})})
	stored := func(at nostr.Timestamp, content string) *nostr.Event {
		ev := &nostr.Event{CreatedAt: at, Kind: relay.KindMessage, Tags: nostr.Tags{{"p", agent.NostrPublicKey()}}, Content: content}
		if err := relay.SignEvent(peer, ev); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	ctx := t.Context()
	run := &running{stop: ctx, work: ctx}
	now := nostr.Timestamp(clock.Now().Unix())
	genuine := stored(now, "not NIP-44")
	in.handle(run, genuine)
	in.handle(run, stored(now+10*365*24*3600, "not NIP-44 either"))

	since, err := in.since(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want := now - nostr.Timestamp(in.cfg.Lookback/time.Second); since > want {
		t.Fatalf("the next start subscribes from %v, after now less the lookback (%v): genuine requests are never delivered",
			since.Time().UTC(), want.Time().UTC())
	}
	if seen, err := cp.Seen(ctx, genuine.ID); err != nil || !seen {
		t.Fatalf("the genuine request processed before: Seen = %v, %v; want true", seen, err)
	}
}
