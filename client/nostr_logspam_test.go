package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/internal/logcap"
	"github.com/snapnode/snapnode/internal/relaytest"
	"github.com/snapnode/snapnode/internal/testclock"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// forger is a relay pool through which, once the request is published,
// forged replies to it are published — signed by a key other than the
// agent's, as anyone reading the request's event id can — then the
// agent's genuine reply, last: when the request returns, the client has
// read the forged ones.
type forger struct {
	*relay.Pool
	t      *testing.T
	forged int
	seal   *snapnostr.Sealer
}

func (f *forger) Publish(ctx context.Context, ev nostr.Event) (relay.PublishResult, error) {
	res, err := f.Pool.Publish(ctx, ev)
	if err != nil {
		return res, err
	}
	tags := nostr.Tags{{"p", ev.PubKey}, {"e", ev.ID}}
	var v *relay.Verifier
	for i := range f.forged {
		fake := nostr.Event{CreatedAt: ev.CreatedAt, Kind: ev.Kind, Tags: tags, Content: fmt.Sprint("forged ", i)}
		if err := v.Sign(otherKey, &fake); err != nil {
			f.t.Fatal(err)
		}
		if _, err := f.Pool.Publish(ctx, fake); err != nil {
			f.t.Errorf("forged reply: %v", err)
		}
	}
	content := genuineReply(f.t, f.seal, ev)
	genuine := nostr.Event{CreatedAt: ev.CreatedAt, Kind: ev.Kind, Tags: tags, Content: content}
	if err := v.Sign(serverKey, &genuine); err != nil {
		f.t.Fatal(err)
	}
	if _, err := f.Pool.Publish(ctx, genuine); err != nil {
		f.t.Errorf("genuine reply: %v", err)
	}
	return res, nil
}

// genuineReply is the content of the agent's reply to the request ev
// carries, sealed by seal (the agent's) to ev's author.
func genuineReply(t *testing.T, seal *snapnostr.Sealer, ev nostr.Event) string {
	t.Helper()
	plain, err := seal.Open(ev.PubKey, ev.Content)
	if err != nil {
		t.Fatal(err)
	}
	req, err := snap.Parse(plain)
	if err != nil {
		t.Fatal(err)
	}
	content, err := seal.Seal(ev.PubKey, reply{}.build(t, req))
	if err != nil {
		t.Fatal(err)
	}
	return content
}

// startPool starts a relay pool on url, logging to logger, and returns it
// with a context; both end with t.
func startPool(t *testing.T, url string, logger *slog.Logger) (context.Context, *relay.Pool) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	pool := relay.NewPool(relay.PoolConfig{URLs: []string{url}, Logger: logger})
	pool.Start(ctx)
	t.Cleanup(func() { cancel(); pool.Close() })
	return ctx, pool
}

// Anyone who sees a request's event id can publish replies to it: each
// rejected reply was logged at warn, one line each, so a stranger filled
// the requester's log at will. They are logged logcap.PerMinute a minute,
// the next line counting those that were not.
func TestNostrRejectedRepliesLoggedBounded(t *testing.T) {
	const n = 60
	quiet := slog.New(slog.DiscardHandler)
	url := relaytest.Serve(t, embedded.Config{})
	ctx, pool := startPool(t, url, quiet)

	logs := &testutil.Records{}
	clock := testclock.New(time.Now().Truncate(time.Second))
	f := &forger{Pool: pool, t: t, forged: n, seal: snapnostr.NewSealer(serverKey, 4)}
	c := client.NewNostr(client.NostrConfig{Key: clientKey, Relays: f, Logger: slog.New(logs), Now: clock.Now})
	target := client.Target{Address: addr(serverKey), PubKey: serverKey.NostrPublicKey()}
	send := func() {
		t.Helper()
		rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
		defer rcancel()
		if _, err := c.To(target, false).Send(rctx, "tasks/get", []byte(`{"taskId":"t"}`)); err != nil {
			t.Fatalf("the genuine reply after the forged ones: %v", err)
		}
	}
	send()
	got := logs.Logged("rejected a reply")
	if len(got) == 0 || len(got) > logcap.PerMinute {
		t.Fatalf("%d lines logged for %d forged replies, want 1 to %d", len(got), n, logcap.PerMinute)
	}

	clock.Advance(time.Minute)
	f.forged = 1
	send()
	got = logs.Logged("rejected a reply")
	notLogged := testutil.AttrInt64(got[len(got)-1], logcap.NotLoggedKey)
	if notLogged <= 0 {
		t.Fatalf("the next minute's line says %d not logged before it", notLogged)
	}
}
