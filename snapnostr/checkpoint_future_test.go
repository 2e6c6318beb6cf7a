package snapnostr

import (
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/relay"
)

// A stored request dated far in the future, which anyone may publish (it
// need not even open), is recorded as processed at the inbox's now: its
// created_at would otherwise become the checkpoint's newest, so that the
// next start subscribed from a time no genuine request reaches (the node
// deaf on Nostr until then) and the ids processed before it were
// forgotten.
func TestCheckpointIgnoresAFutureCreatedAt(t *testing.T) {
	cp := NewMemoryCheckpoint()
	r := newHandleRig(t, InboxConfig{Checkpoint: cp})
	now := r.now()
	genuine := r.request(relay.KindMessage, now, "not NIP-44")
	r.in.handle(r.run, genuine, false)
	r.in.handle(r.run, r.request(relay.KindMessage, now+10*365*24*3600, "not NIP-44 either"), false)

	since, _, err := r.in.since(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if want := now - nostr.Timestamp(r.in.cfg.Lookback/time.Second); since > want {
		t.Fatalf("the next start subscribes from %v, after now less the lookback (%v): genuine requests are never delivered",
			since.Time().UTC(), want.Time().UTC())
	}
	if seen, err := cp.Seen(t.Context(), genuine.ID); err != nil || !seen {
		t.Fatalf("the genuine request processed before: Seen = %v, %v; want true", seen, err)
	}
}
