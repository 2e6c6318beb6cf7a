package delegate_test

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/agent/delegate"
	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
)

// once tries each endpoint once: a failed one goes to the next
// transport without the retries' waits.
func once(c *delegate.Config) { c.Fallback = client.FallbackConfig{Retries: -1} }

// downRelays are the node's relays, which refuse to carry its events
// while down is set.
type downRelays struct {
	delegate.Relays
	down atomic.Bool
}

func (r *downRelays) Publish(ctx context.Context, ev nostr.Event) (relay.PublishResult, error) {
	if r.down.Load() {
		return relay.PublishResult{}, errors.New("no relay took the event")
	}
	return r.Relays.Publish(ctx, ev)
}

func (r *downRelays) wrap(c *delegate.Config) {
	r.Relays = c.Relays
	c.Relays = r
}

// A delegate whose card declares an HTTP endpoint and names no relay is
// asked over Nostr, on the relays its card was found on, when the
// endpoint fails, as a card without endpoints is.
func TestDelegateWithoutCardRelaysAskedOverNostr(t *testing.T) {
	var peer idempotent
	p := &posts{}
	p.status.Store(http.StatusBadGateway)
	d, _, _ := setupCard(t, peer.reply, p.wrap, func(c *snap.Card) { c.NostrRelays = nil }, withHTTP(true), once)
	c, err := d.Complete(t.Context(), prompt("job-1", 0))
	if err != nil || c.Text != completed {
		t.Fatalf("%+v, %v; want the answer over Nostr", c, err)
	}
	peer.mu.Lock()
	defer peer.mu.Unlock()
	if n := p.n.Load(); n != 1 || peer.sends != 2 || len(peer.tasks) != 1 {
		t.Errorf("%d POSTs, %d message/send, %d tasks; want the POST, then Nostr with its key: one task", n, peer.sends, len(peer.tasks))
	}
}
