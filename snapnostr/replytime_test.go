package snapnostr

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
)

// A reply is dated now, or its request's created_at when that is later
// (the requester's clock ahead of the agent's), but never more than the
// agent's window ahead of its clock, however far ahead the request is
// dated.
func TestReplyTime(t *testing.T) {
	r := newHandleRig(t, InboxConfig{})
	now := r.now()
	for _, c := range []struct{ req, want nostr.Timestamp }{
		{now - 3600, now},
		{now, now},
		{now + 30, now + 30},
		{now + 60, now + 60},
		{now + 61, now + 60},
		{now + 86400*365*100, now + 60},
	} {
		if got := r.in.replyTime(r.request(relay.KindMessage, c.req, "x")); got != c.want {
			t.Errorf("request dated now%+d: reply dated now%+d, want now%+d", c.req-now, got-now, c.want-now)
		}
	}
}

// lastPublished is a Transport that keeps the last event published.
type lastPublished struct {
	mu sync.Mutex
	ev nostr.Event
}

func (p *lastPublished) Subscribe(context.Context, nostr.Filter) (*relay.Subscription, error) {
	return nil, context.Canceled
}

func (p *lastPublished) Publish(_ context.Context, ev nostr.Event) (relay.PublishResult, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.ev = ev
	return relay.PublishResult{}, nil
}

// A reply to a stored request expires ReplyTTL after it is dated, rounded
// up to the whole second NIP-40 counts in: never before ReplyTTL has
// passed, and never at its own created_at. Before, a ReplyTTL under a
// second (the library takes any positive one) gave the reply an
// expiration equal to its created_at: expired as it was published, and
// dropped by relays that honour NIP-40.
func TestReplyExpirationRoundsUpToASecond(t *testing.T) {
	for _, c := range []struct {
		ttl  time.Duration
		want nostr.Timestamp // after the reply's created_at
	}{
		{time.Nanosecond, 1},
		{500 * time.Millisecond, 1},
		{time.Second, 1},
		{1500 * time.Millisecond, 2},
		{relay.DefaultReplyTT * time.Second, relay.DefaultReplyTT},
	} {
		r := newHandleRig(t, InboxConfig{ReplyTTL: c.ttl})
		out := &lastPublished{}
		r.in.cfg.Transport = out
		req := r.request(relay.KindMessage, r.now(), "x")
		if err := r.in.publish(t.Context(), req, r.in.cfg.Handler.Refuse(&snap.Error{Code: snap.CodeInternal, Message: "x"})); err != nil {
			t.Fatal(err)
		}
		exp, ok := Expiration(&out.ev)
		if !ok {
			t.Fatalf("ReplyTTL %v: the reply has no expiration: %v", c.ttl, out.ev.Tags)
		}
		if got := exp - out.ev.CreatedAt; got != c.want {
			t.Errorf("ReplyTTL %v: the reply expires %d s after it is dated, want %d", c.ttl, got, c.want)
		}
	}
}
