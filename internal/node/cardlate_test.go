package node_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
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

// A reload that changes the card while no relay takes it puts the new
// card in force everywhere at once: served over HTTP at once, the same
// card whose input modes the node now applies, and published to the relay
// in the background once it is back, a newer card in place of an older
// one still being published. Before, Reload waited for the relay
// (15 s) and gave up with an error, the old card still served over HTTP
// while the new one's settings were in force, and nothing tried again
// until the next SIGHUP.
func TestReloadPublishesCardInBackground(t *testing.T) {
	r := newTestRelay(t)
	logs := newMessageLog()
	cfg := config.Default()
	cfg.DataDir = filepath.Join(t.TempDir(), "data")
	cfg.RelayListen, cfg.HTTPListen = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Relays = []string{r.url()}
	n, _ := startConfigured(t, cfg, slog.New(logs))
	if got := relayCard(t, r.url(), n); got.Name != cfg.Card.Name {
		t.Fatalf("the card on the relay at the start is %q, want %q", got.Name, cfg.Card.Name)
	}

	r.kill()
	next := cfg
	next.Card.Name = "renamed"
	next.Card.InputModes = []string{"text/plain"}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := n.Reload(ctx, next); err != nil {
		t.Fatalf("reload while the relay is down: %v", err)
	}
	card, _, err := newHTTPClient(t).Discover(ctx, n.HTTPURL())
	if err != nil {
		t.Fatal(err)
	}
	if card.Name != "renamed" || !slices.Equal(card.DefaultInputModes, next.Card.InputModes) {
		t.Fatalf("the card served over HTTP after the reload: name %q, input modes %q; want the new one",
			card.Name, card.DefaultInputModes)
	}
	logs.await(t, "settings reloaded")
	logs.await(t, "card not published; trying again in the background")
	// A newer card replaces the one still being published.
	next.Card.Name = "renamed again"
	if _, err := n.Reload(ctx, next); err != nil {
		t.Fatal(err)
	}
	if got := n.Card().Name; got != "renamed again" {
		t.Fatalf("the card in force after the second reload is %q", got)
	}

	r.restart()
	// The pool reconnects with its backoff, and the card goes out at the
	// next of the node's own tries after that.
	deadline := time.Now().Add(60 * time.Second)
	for got := relayCard(t, r.url(), n); got.Name != "renamed again"; got = relayCard(t, r.url(), n) {
		if time.Now().After(deadline) {
			t.Fatalf("the card on the relay 60 s after it came up is %q, want the reloaded one", got.Name)
		}
		time.Sleep(250 * time.Millisecond)
	}
	logs.await(t, "card published")
}

// relayCard returns the card of n on the relay at url, or a zero card.
func relayCard(t *testing.T, url string, n *node.Node) snap.Card {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	p := relay.NewPool(relay.PoolConfig{URLs: []string{url}, Logger: slog.New(slog.DiscardHandler)})
	p.Start(ctx)
	defer p.Close()
	evs, err := p.Query(ctx, nostr.Filter{Kinds: []int{relay.KindCard}, Authors: []string{n.NostrPublicKey()}})
	var card snap.Card
	if err != nil || len(evs) == 0 {
		return card
	}
	if err := json.Unmarshal([]byte(evs[len(evs)-1].Content), &card); err != nil || card.Identity != n.Address() {
		t.Fatalf("the card published is %s (%v), want one for %s", evs[0].Content, err, n.Address())
	}
	return card
}

// messageLog is a slog.Handler keeping the messages logged (the first
// 1000), for a test to wait for one.
type messageLog struct {
	mu      sync.Mutex
	msgs    []string
	changed chan struct{} // closed and replaced at each message
}

func newMessageLog() *messageLog {
	return &messageLog{changed: make(chan struct{})}
}

func (l *messageLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *messageLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *messageLog) WithGroup(string) slog.Handler            { return l }

func (l *messageLog) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.msgs) < 1000 {
		l.msgs = append(l.msgs, r.Message)
	}
	close(l.changed)
	l.changed = make(chan struct{})
	return nil
}

// await waits up to 30 s for msg to be logged.
func (l *messageLog) await(t *testing.T, msg string) {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		l.mu.Lock()
		found, changed := slices.Contains(l.msgs, msg), l.changed
		l.mu.Unlock()
		if found {
			return
		}
		select {
		case <-changed:
		case <-timeout:
			t.Fatalf("%q not logged in 30 s", msg)
		}
	}
}
