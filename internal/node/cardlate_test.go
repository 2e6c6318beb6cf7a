package node_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/relay"
)

// A node whose only relay is down when it starts starts all the same, and
// publishes its card and answers requests once the relay comes up: before,
// it gave up publishing the card after 15 s and exited.
func TestStartsWhileItsRelayIsDown(t *testing.T) {
	r := newTestRelay(t)
	r.kill()
	n := startNodeWith(t, func(c *config.Config) { c.Relays = []string{r.url()} }, node.WithCardWait(200*time.Millisecond))
	r.restart()

	// The pool reconnects with its backoff (up to 30 s between tries), and
	// the card goes out at the next of the node's own tries after that.
	deadline := time.Now().Add(90 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		p := relay.NewPool(relay.PoolConfig{URLs: []string{r.url()}, Logger: slog.New(slog.DiscardHandler)})
		p.Start(ctx)
		evs, err := p.Query(ctx, nostr.Filter{Kinds: []int{relay.KindCard}, Authors: []string{n.NostrPublicKey()}})
		p.Close()
		cancel()
		if err == nil && len(evs) == 1 {
			var card struct{ Identity string }
			if err := json.Unmarshal([]byte(evs[0].Content), &card); err != nil || card.Identity != n.Address() {
				t.Fatalf("the card published is %s (%v), want one for %s", evs[0].Content, err, n.Address())
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no card on the relay 90 s after it came up (%d events, %v)", len(evs), err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	p := newRequester(t, []string{r.url()}).call(t, n, "message/send", text("hello"), true)
	if taskOf(t, p).ID == "" {
		t.Fatalf("message/send through the relay that came up answered %v", p)
	}
}
