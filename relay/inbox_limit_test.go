package relay_test

import (
	"context"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/ratelimit"
	"github.com/snapnode/snapnode/internal/testclock"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
)

// A Nostr key over its allowance is refused with 5002 before its request
// is opened or queued; another key is served.
func TestInboxKeyLimiter(t *testing.T) {
	clock := testclock.New(time.Now())
	lim := ratelimit.New(ratelimit.Config{Rate: 0.001, Burst: 2, Now: clock.Now})
	n := newStreamNet(t, countRouter(nil), 4, func(c *relay.InboxConfig) { c.KeyLimiter = lim })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	get := func(c *relay.Client) map[string]any {
		t.Helper()
		r, err := c.Request(ctx, n.target, relay.Request{Method: "tasks/get", Payload: []byte(`{"taskId":"t"}`)})
		if err != nil {
			t.Fatal(err)
		}
		return payload(t, r)
	}
	for i := range 2 {
		if p := get(n.client); p["error"] != nil {
			t.Fatalf("request %d within the burst: %v", i+1, p)
		}
	}
	p := get(n.client)
	e, _ := p["error"].(map[string]any)
	d, _ := e["data"].(map[string]any)
	if e == nil || e["code"] != float64(snap.CodeRateLimitExceeded) || d["scope"] != "key" || d["retryAfter"].(float64) < 1 {
		t.Fatalf("over the allowance: %v", p)
	}
	other, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	oc := relay.NewClient(relay.ClientConfig{Key: other, Transport: n.pool, Logger: quiet()})
	if p := get(oc); p["error"] != nil {
		t.Fatalf("another key: %v", p)
	}
	if lim.Len() != 2 {
		t.Errorf("%d keys limited, want the two requesters'", lim.Len())
	}
}
