package snapnostr

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/testclock"
	"github.com/snapnode/snapnode/relay"
)

// seenCounter counts the checkpoint's Seen calls.
type seenCounter struct {
	Checkpoint
	calls atomic.Int32
}

func (c *seenCounter) Seen(ctx context.Context, id string) (bool, error) {
	c.calls.Add(1)
	return c.Checkpoint.Seen(ctx, id)
}

// The checkpoint is asked only about what a process before this Inbox, or
// another replica, may have processed: a stored request dated before the
// Inbox began (and one processed is not queued again), or one taken up
// late; not about a request dated after it began, which costs no read.
func TestInboxAsksTheCheckpointOnlyAboutOlderRequests(t *testing.T) {
	clock := testclock.New(time.Unix(1_800_000_000, 0))
	cp := &seenCounter{Checkpoint: NewMemoryCheckpoint()}
	r := newShareRig(t, InboxConfig{Checkpoint: cp, Now: clock.Now, Transport: &publishCounter{}})
	begun := nostr.Timestamp(clock.Now().Unix())
	clock.Advance(5 * time.Second)
	stored := func(at nostr.Timestamp, content string) *nostr.Event {
		ev := &nostr.Event{CreatedAt: at, Kind: relay.KindMessage, Tags: nostr.Tags{{"p", r.agent.NostrPublicKey()}}, Content: content}
		if err := relay.SignEvent(r.peer, ev); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	check := func(what string, ev *nostr.Event, late bool, calls int32, queued int) {
		t.Helper()
		r.in.admit(r.ctx, ev, r.jobs, r.refusals, late)
		if got := cp.calls.Load(); got != calls || r.jobs.Len() != queued {
			t.Fatalf("%s: %d Seen calls, %d queued; want %d, %d", what, got, r.jobs.Len(), calls, queued)
		}
	}
	check("new", stored(begun+1, "new"), false, 0, 1)
	check("dated when it began", stored(begun, "at"), false, 1, 2)
	old := stored(begun-60, "old")
	if err := cp.Done(r.ctx, old.ID, old.CreatedAt); err != nil {
		t.Fatal(err)
	}
	check("old and processed", old, false, 2, 2)
	check("new, taken up late", stored(begun+2, "late"), true, 3, 3)
}
