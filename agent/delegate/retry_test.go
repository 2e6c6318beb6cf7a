package delegate_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/agent"
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

// A step whose exchange failed on every transport (the endpoint's answer
// lost behind a 502, the relays down) is tried again by the runtime as
// the job's next step; it goes with the same idempotency key and message
// id, so the delegate, which made the task the first time, makes no
// second one, and the answer read is the first message's. The step after
// has a key of its own, kept across its own retry.
func TestDelegateStepTriedAgainKeepsItsKey(t *testing.T) {
	var (
		peer   idempotent
		relays downRelays
	)
	p := &posts{}
	d, _, _ := setupHTTP(t, peer.reply, p.wrap, withHTTP(true), once, relays.wrap,
		// A failed endpoint is tried at the next exchange.
		func(c *delegate.Config) { c.Fallback.SetAside = -1 })
	ctx := t.Context()
	step := 0
	failThenAnswer := func() {
		t.Helper()
		p.status.Store(http.StatusBadGateway)
		relays.down.Store(true)
		_, err := d.Complete(ctx, prompt("job-1", step))
		if err == nil || errors.Is(err, agent.ErrWorkerFailed) {
			t.Fatalf("step %d: %v; want a failed exchange, which the runtime tries again", step, err)
		}
		step++
		p.status.Store(0)
		relays.down.Store(false)
		c, err := d.Complete(ctx, prompt("job-1", step))
		if err != nil || c.Text != completed {
			t.Fatalf("step %d, tried again: %+v, %v", step, c, err)
		}
		step++
	}
	failThenAnswer() // the job request
	failThenAnswer() // an observation
	peer.mu.Lock()
	defer peer.mu.Unlock()
	k, m := peer.keys, peer.msgs
	if len(k) != 4 || k[0] == "" || k[2] == "" || k[0] != k[1] || k[2] != k[3] || k[0] == k[2] {
		t.Errorf("keys %q; want one for each step across its tries", k)
	}
	if len(m) != 4 || m[0] != m[1] || m[2] != m[3] || m[0] == m[2] {
		t.Errorf("message ids %q; want one for each step across its tries", m)
	}
	if len(peer.tasks) != 1 {
		t.Errorf("%d tasks; want 1", len(peer.tasks))
	}
}

// A step's key and message id are recorded in the job's row
// (Prompt.KeepSent) before it is sent. When the node stops after the
// delegate made the task and before the answer came back, the Delegate of
// the restarted node, which remembers nothing, is given them back
// (Prompt.Sent) and sends the step as the same step: the delegate makes
// no second task. A record that cannot be written sends nothing, and one
// kept for another delegate is not used.
func TestDelegateKeptStepSentAgainAfterRestart(t *testing.T) {
	var (
		peer   idempotent
		relays downRelays
		cfg    delegate.Config
	)
	p := &posts{}
	d, _, _ := setupHTTP(t, peer.reply, p.wrap, withHTTP(true), once, relays.wrap,
		func(c *delegate.Config) { c.Fallback.SetAside = -1 },
		func(c *delegate.Config) { cfg = *c })
	ctx := t.Context()

	refused := prompt("job-0", 0)
	refused.KeepSent = func(context.Context, []byte) error { return agent.ErrLeaseLost }
	if _, err := d.Complete(ctx, refused); !errors.Is(err, agent.ErrLeaseLost) {
		t.Fatalf("a step whose record failed: %v; want the failure", err)
	}
	peer.mu.Lock()
	if peer.sends != 0 {
		t.Errorf("%d message/send; want none: the step was not recorded", peer.sends)
	}
	peer.mu.Unlock()

	var kept []byte
	first := prompt("job-1", 0)
	first.KeepSent = func(_ context.Context, b []byte) error {
		peer.mu.Lock()
		defer peer.mu.Unlock()
		if peer.sends != 0 {
			t.Error("the step was recorded after it was sent")
		}
		kept = b
		return nil
	}
	p.status.Store(http.StatusBadGateway) // the delegate makes the task; its answer is lost
	relays.down.Store(true)
	if _, err := d.Complete(ctx, first); err == nil {
		t.Fatal("the step was answered; want the exchange to fail")
	}
	if kept == nil {
		t.Fatal("the step was not recorded")
	}
	p.status.Store(0)
	relays.down.Store(false)

	// Another delegate's record: the step starts afresh, on a task of
	// its own.
	other := prompt("job-2", 0)
	other.Sent = []byte(`{"delegate":"bc1pother","key":"k","message_id":"m"}`)
	restarted, err := delegate.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c, err := restarted.Complete(ctx, other); err != nil || c.Text != completed {
		t.Fatalf("%+v, %v", c, err)
	}

	again := prompt("job-1", 0)
	again.Sent = kept
	var answered bool
	again.KeepSent = func(_ context.Context, b []byte) error {
		// Recorded with the step's key alone: again before it is sent
		// (the node still holds the job), then with its answer.
		var k struct {
			Key      string          `json:"key"`
			Answered json.RawMessage `json:"answered"`
		}
		if err := json.Unmarshal(b, &k); err != nil || !bytes.Contains(kept, []byte(k.Key)) {
			t.Errorf("the step sent again was recorded anew: %s", b)
		}
		answered = k.Answered != nil
		return nil
	}
	if c, err := restarted.Complete(ctx, again); err != nil || c.Text != completed {
		t.Fatalf("the step sent again after the restart: %+v, %v", c, err)
	}
	if !answered {
		t.Error("the answer to the step sent again was not recorded")
	}
	peer.mu.Lock()
	defer peer.mu.Unlock()
	k, m := peer.keys, peer.msgs
	if len(k) != 3 || k[0] == "" || k[0] != k[2] || m[0] != m[2] || k[1] == k[0] || k[1] == "k" {
		t.Errorf("keys %q, message ids %q; want the step's sent again after the restart, another's a key of its own", k, m)
	}
	if len(peer.tasks) != 2 {
		t.Errorf("%d tasks; want 2: job-1's, sent twice, and job-2's", len(peer.tasks))
	}
}
