package snapnostr

import (
	"log/slog"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/testclock"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
)

// handleRig is an Inbox whose requests a test hands to its worker's
// handle, one at a time, with what it publishes counted.
type handleRig struct {
	t         *testing.T
	in        *Inbox
	agent     *identity.Key
	peer      *identity.Key
	clock     *testclock.Clock
	published *publishCounter
	run       *running
}

// newHandleRig returns a rig whose inbox has cfg (Key, Transport, Handler,
// Now and Logger set).
func newHandleRig(t *testing.T, cfg InboxConfig) *handleRig {
	r := &handleRig{t: t, clock: testclock.New(time.Unix(1_800_000_000, 0)), published: &publishCounter{}}
	var err error
	if r.agent, err = identity.Generate(); err != nil {
		t.Fatal(err)
	}
	if r.peer, err = identity.Generate(); err != nil {
		t.Fatal(err)
	}
	quiet := slog.New(slog.DiscardHandler)
	cfg.Key, cfg.Transport, cfg.Now, cfg.Logger = r.agent, r.published, r.clock.Now, quiet
	cfg.Handler = snap.NewServer(snap.ServerConfig{Key: r.agent, Router: snap.NewRouter(), Now: r.clock.Now, Logger: quiet})
	r.in = NewInbox(cfg)
	r.run = &running{stop: t.Context(), work: t.Context()}
	return r
}

// request returns a request event of kind from the peer to the agent,
// dated at and carrying content.
func (r *handleRig) request(kind int, at nostr.Timestamp, content string) *nostr.Event {
	ev := &nostr.Event{CreatedAt: at, Kind: kind, Tags: nostr.Tags{{"p", r.agent.NostrPublicKey()}}, Content: content}
	if err := relay.SignEvent(r.peer, ev); err != nil {
		r.t.Fatal(err)
	}
	return ev
}

// now is the rig's clock as a Nostr timestamp.
func (r *handleRig) now() nostr.Timestamp { return nostr.Timestamp(r.clock.Now().Unix()) }
