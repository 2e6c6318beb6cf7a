package snapnostr_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/ratelimit"
	"github.com/snapnode/snapnode/internal/testclock"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// A Nostr key over its allowance is refused with 5002 before its request
// is opened or queued; another key is served.
func TestInboxKeyLimiter(t *testing.T) {
	clock := testclock.New(time.Now())
	lim := ratelimit.New(ratelimit.Config{Rate: 0.001, Burst: 2, Now: clock.Now})
	n := newStreamNet(t, countRouter(nil), 4, func(c *snapnostr.InboxConfig) { c.KeyLimiter = lim })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	get := func(c *client.Nostr) map[string]any {
		t.Helper()
		r, err := c.Request(ctx, n.target, client.NostrRequest{Method: "tasks/get", Payload: []byte(`{"taskId":"t"}`)})
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
	oc := client.NewNostr(client.NostrConfig{Key: other, Relays: n.pool, Logger: quiet()})
	if p := get(oc); p["error"] != nil {
		t.Fatalf("another key: %v", p)
	}
	if lim.Len() != 2 {
		t.Errorf("%d keys limited, want the two requesters'", lim.Len())
	}
}

// A full queue serves keys in turn: a key that floods it is refused past
// its share (5003, at once, and once a second: its other refused requests
// are not answered within that second), and another key's request pushes
// out the flooder's newest and is answered in its turn.
func TestInboxQueueIsFairToOtherKeys(t *testing.T) {
	clock := testclock.New(time.Now())
	n, entered, unhold := heldNet(t, 4, clock)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	type answer struct {
		p   map[string]any
		err error
	}
	flood := make(chan answer, 16)
	send := func(c *client.Nostr, method string, out chan<- answer) {
		r, err := c.Request(ctx, n.target, client.NostrRequest{Method: method, Payload: []byte(`{"taskId":"t"}`)})
		if err != nil {
			out <- answer{err: err}
			return
		}
		var p map[string]any
		json.Unmarshal(r.Payload, &p)
		out <- answer{p: p}
	}
	go send(n.client, "test/hold", flood)
	<-entered // the one worker is held
	for range 8 {
		go send(n.client, "tasks/get", flood)
	}
	busy := func(a answer) bool {
		e, _ := a.p["error"].(map[string]any)
		return a.err == nil && e != nil && e["code"] == float64(snap.CodeServiceUnavailable)
	}
	// 4 queued, 4 refused: the first refusal is answered at once, the
	// other 3 are not answered within the second.
	if a := <-flood; !busy(a) {
		t.Fatalf("flood answer before the release: %v %v, want 5003", a.p, a.err)
	}
	clock.Advance(time.Second)
	other, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	valid := make(chan answer, 1)
	go send(client.NewNostr(client.NostrConfig{Key: other, Relays: n.pool, Logger: quiet()}), "tasks/get", valid)
	if a := <-flood; !busy(a) { // the flooder's newest, pushed out
		t.Fatalf("the flooder's pushed-out request: %v %v, want 5003", a.p, a.err)
	}
	unhold()
	if a := <-valid; a.err != nil || a.p["task"] == nil {
		t.Fatalf("the other key's request: %v %v, want its answer", a.p, a.err)
	}
	for range 4 { // the hold and the 3 queued requests left
		if a := <-flood; a.err != nil || a.p["error"] != nil {
			t.Errorf("a queued flood request: %v %v", a.p, a.err)
		}
	}
}
