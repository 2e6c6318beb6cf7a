package snapnostr_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snapnostr"
)

// takeRecorder is a pool that records how the inbox subscribed.
type takeRecorder struct {
	*relay.Pool
	funcs, taken atomic.Int32
}

func (r *takeRecorder) SubscribeFunc(ctx context.Context, f nostr.Filter, take func(*nostr.Event)) (*relay.Subscription, error) {
	r.funcs.Add(1)
	return r.Pool.SubscribeFunc(ctx, f, func(ev *nostr.Event) { r.taken.Add(1); take(ev) })
}

// SubscribeWith is the pool's, which the inbox prefers (each relay from
// its own point); with a take function it counts as SubscribeFunc.
func (r *takeRecorder) SubscribeWith(ctx context.Context, f nostr.Filter, o relay.SubscribeOptions) (*relay.Subscription, error) {
	if take := o.Take; take != nil {
		r.funcs.Add(1)
		o.Take = func(ev *nostr.Event) { r.taken.Add(1); take(ev) }
	}
	return r.Pool.SubscribeWith(ctx, f, o)
}

// The inbox takes its requests from the pool in the goroutine that
// received them (SubscribeFunc), with no listener goroutine of its own in
// between, and answers them as before.
func TestInboxTakesRequestsFromThePool(t *testing.T) {
	var rec *takeRecorder
	n := newStreamNet(t, countRouter(nil), 4, func(c *snapnostr.InboxConfig) {
		rec = &takeRecorder{Pool: c.Transport.(*relay.Pool)}
		c.Transport = rec
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for range 3 {
		resp, err := n.client.Request(ctx, n.target, client.NostrRequest{Method: "tasks/get", Payload: []byte(`{"taskId":"t"}`)})
		if err != nil {
			t.Fatal(err)
		}
		if p := payload(t, resp); p["task"] == nil {
			t.Fatalf("answer: %v", p)
		}
	}
	if rec.funcs.Load() != 1 || rec.taken.Load() != 3 {
		t.Fatalf("subscribed with a take function %d times, %d events taken; want 1 and 3", rec.funcs.Load(), rec.taken.Load())
	}
}
