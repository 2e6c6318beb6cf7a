package client_test

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/internal/relaytest"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
	"github.com/snapnode/snapnode/snapnostr"
)

// expiredReplier is a relay pool through which, once the request is
// published, the agent's genuine replies to it are published, each with
// the NIP-40 expiration of its own: Unix seconds, or none when 0.
type expiredReplier struct {
	*relay.Pool
	t    *testing.T
	seal *snapnostr.Sealer
	exps []int64
}

func (f *expiredReplier) Publish(ctx context.Context, ev nostr.Event) (relay.PublishResult, error) {
	res, err := f.Pool.Publish(ctx, ev)
	if err != nil {
		return res, err
	}
	var v *relay.Verifier
	for _, exp := range f.exps {
		content := genuineReply(f.t, f.seal, ev)
		tags := nostr.Tags{{"p", ev.PubKey}, {"e", ev.ID}}
		if exp != 0 {
			tags = append(tags, nostr.Tag{"expiration", strconv.FormatInt(exp, 10)})
		}
		rev := nostr.Event{CreatedAt: ev.CreatedAt, Kind: ev.Kind, Tags: tags, Content: content}
		if err := v.Sign(serverKey, &rev); err != nil {
			f.t.Fatal(err)
		}
		if _, err := f.Pool.Publish(ctx, rev); err != nil {
			f.t.Errorf("reply: %v", err)
		}
	}
	return res, nil
}

// trailingRelay starts a relay whose clock trails an hour, which
// therefore delivers replies that have expired, and a pool on it.
func trailingRelay(t *testing.T, quiet *slog.Logger) (context.Context, *relay.Pool) {
	t.Helper()
	url := relaytest.Serve(t, embedded.Config{DBPath: ":memory:", Logger: quiet,
		Now: func() time.Time { return time.Now().Add(-time.Hour) }, CreatedAtUpperLimit: -1})
	return startPool(t, url, quiet)
}

// A reply whose NIP-40 expiration has passed by the requester's clock
// (a relay that does not drop expired events delivers it: here one whose
// clock trails an hour) is ignored, as NIP-40 asks of clients: it is
// rejected, and a later reply that has not expired is taken; when none
// comes, the time-out says the expired one was rejected, and why. Before,
// the client took an expired reply as any other.
func TestNostrIgnoresExpiredReplies(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	ctx, pool := trailingRelay(t, quiet)
	target := client.Target{Address: addr(serverKey), PubKey: serverKey.NostrPublicKey()}
	expired, ahead := time.Now().Add(-time.Minute).Unix(), time.Now().Add(time.Hour).Unix()

	f := &expiredReplier{Pool: pool, t: t, seal: snapnostr.NewSealer(serverKey, 4), exps: []int64{expired, ahead}}
	c := client.NewNostr(client.NostrConfig{Key: clientKey, Relays: f, Logger: quiet})
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	resp, err := c.Request(rctx, target, client.NostrRequest{Method: "tasks/get", Payload: []byte(`{"taskId":"t"}`), Persist: true})
	if err != nil {
		t.Fatalf("an expired reply, then one not expired: %v", err)
	}
	if exp, ok := snapnostr.Expiration(resp.Event); !ok || int64(exp) != ahead {
		t.Errorf("took the reply expiring at %d (%v), want the one not expired (%d)", exp, ok, ahead)
	}

	f.exps = []int64{expired}
	rctx, rcancel = context.WithTimeout(ctx, 2*time.Second)
	defer rcancel()
	_, err = c.Request(rctx, target, client.NostrRequest{Method: "tasks/get", Payload: []byte(`{"taskId":"t"}`), Persist: true})
	if !errors.Is(err, client.ErrTimeout) || !strings.Contains(err.Error(), "expired") {
		t.Errorf("an expired reply alone: %v; want a time-out naming the expired reply", err)
	}
}

// A reply expiring at the very second of the requester's clock has
// expired, as relays and the node's inbox count it; one expiring the next
// second has not.
func TestNostrReplyExpiringNowHasExpired(t *testing.T) {
	quiet := slog.New(slog.DiscardHandler)
	ctx, pool := trailingRelay(t, quiet)
	target := client.Target{Address: addr(serverKey), PubKey: serverKey.NostrPublicKey()}
	now := time.Now().Truncate(time.Second).Add(500 * time.Millisecond)

	f := &expiredReplier{Pool: pool, t: t, seal: snapnostr.NewSealer(serverKey, 4), exps: []int64{now.Unix(), now.Unix() + 1}}
	c := client.NewNostr(client.NostrConfig{Key: clientKey, Relays: f, Logger: quiet, Now: func() time.Time { return now }})
	rctx, rcancel := context.WithTimeout(ctx, 10*time.Second)
	defer rcancel()
	resp, err := c.Request(rctx, target, client.NostrRequest{Method: "tasks/get", Payload: []byte(`{"taskId":"t"}`), Persist: true})
	if err != nil {
		t.Fatalf("a reply expiring now, then one expiring the next second: %v", err)
	}
	if exp, ok := snapnostr.Expiration(resp.Event); !ok || int64(exp) != now.Unix()+1 {
		t.Errorf("took the reply expiring at %d (%v), want the one expiring at %d", exp, ok, now.Unix()+1)
	}
}
