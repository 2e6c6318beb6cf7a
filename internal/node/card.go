package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
	"github.com/snapnode/snapnode/tasks"
)

// proposalSkill is what every node does: carry out a peer's proposals.
func proposalSkill() snap.Skill {
	return snap.Skill{ID: "file-actions", Name: "File actions",
		Description: "Carries out proposals (a data part with schema_version 1.x: READ_FILE, LIST_FILES, WRITE_FILE, RENAME_FILE, DELETE_FILE and composites) in the node's sandbox folder: each is validated, judged by policy and audited; risky ones wait for an operator.",
		Tags:        []string{"files", "sandbox", "proposals"},
		Examples:    []string{`{"schema_version":"1.0.0","id":"…","reasoning":"…","action":"WRITE_FILE","args":{"path":"/sandbox/notes.md","content":"…"}}`}}
}

// publicEndpoints are the HTTP transport's endpoints a peer can reach:
// under http_public_url when it is set, else under the listen address
// when other machines can reach it (not loopback, not a wildcard that
// names no host, not port 0). An https URL also serves WebSocket (wss).
func publicEndpoints(cfg config.Config) []snap.Endpoint {
	if cfg.HTTPListen == "" {
		return nil
	}
	base := cfg.HTTPPublicURL
	if base == "" {
		host, port, err := net.SplitHostPort(cfg.HTTPListen)
		ip := net.ParseIP(host)
		if err != nil || host == "" || port == "0" || strings.EqualFold(host, "localhost") || (ip != nil && (ip.IsLoopback() || ip.IsUnspecified())) {
			return nil
		}
		base = "http://" + cfg.HTTPListen
	}
	u, err := url.Parse(strings.TrimSuffix(base, "/"))
	if err != nil {
		return nil // Validate refused it
	}
	u = u.JoinPath("snap")
	out := []snap.Endpoint{{Protocol: "http", URL: u.String()}}
	if u.Scheme == "https" {
		ws := *u
		ws.Scheme = "wss"
		out = append(out, snap.Endpoint{Protocol: "wss", URL: ws.String()})
	}
	return out
}

// inputModes are the media types the node accepts in a message's parts
// and its card lists: [card] input_modes, else every type the node reads
// (tasks.InputModes). A configured type the node does not read is an
// error: the card would promise what the agent drops.
func inputModes(cfg config.Config) ([]string, error) {
	if len(cfg.Card.InputModes) == 0 {
		return tasks.InputModes(), nil
	}
	for _, m := range cfg.Card.InputModes {
		if !slices.ContainsFunc(tasks.InputModes(), func(r string) bool { return strings.EqualFold(r, m) }) {
			return nil, fmt.Errorf("node: [card] input_modes lists %q, which the node does not read; it reads %s", m, strings.Join(tasks.InputModes(), ", "))
		}
	}
	return cfg.Card.InputModes, nil
}

// buildCard makes the agent card from the configuration.
func buildCard(cfg config.Config, addr string, relays []string) (*snap.Card, error) {
	modes, err := inputModes(cfg)
	if err != nil {
		return nil, err
	}
	c := &snap.Card{
		Name: cfg.Card.Name, Description: cfg.Card.Description, Version: cfg.Card.Version,
		Identity: addr, NostrRelays: cardRelays(cfg, relays),
		ProtocolVersion: snap.ProtocolVersion, SupportedVersions: snap.SupportedVersions(),
		DefaultInputModes: modes, DefaultOutputModes: cfg.Card.OutputModes,
		// The task service serves message/stream and tasks/resubscribe on
		// every transport; unsaid, streaming reads as false.
		Capabilities: &snap.Capabilities{Streaming: true},
	}
	for _, s := range cfg.Card.Skills {
		c.Skills = append(c.Skills, snap.Skill{ID: s.ID, Name: s.Name, Description: s.Description, Tags: s.Tags, Examples: s.Examples})
	}
	if cfg.AgentEnabled() && cfg.DatabaseDSN() != config.MemoryDatabase &&
		!slices.ContainsFunc(c.Skills, func(s snap.Skill) bool { return s.ID == "agent" }) {
		c.Skills = append(c.Skills, agentSkill(cfg))
	}
	if ps := proposalSkill(); !slices.ContainsFunc(c.Skills, func(s snap.Skill) bool { return s.ID == ps.ID }) {
		c.Skills = append(c.Skills, ps)
	}
	for _, e := range cfg.Card.Endpoints {
		c.Endpoints = append(c.Endpoints, snap.Endpoint{Protocol: e.Protocol, URL: e.URL})
	}
	for _, e := range publicEndpoints(cfg) {
		if !slices.ContainsFunc(c.Endpoints, func(x snap.Endpoint) bool { return x.URL == e.URL }) {
			c.Endpoints = append(c.Endpoints, e)
		}
	}
	if err := c.Validate(); err != nil {
		var se *snap.Error
		if len(cfg.Card.NostrRelays) == 0 && errors.As(err, &se) && strings.HasPrefix(se.Field(), "nostrRelays") {
			return nil, fmt.Errorf("node: the card would advertise a relay peers may not use (%w); set [card] nostr_relays (--card-relay) to the wss:// URLs peers reach the node's relays at", err)
		}
		return nil, fmt.Errorf("node: the configured card is invalid: %w", err)
	}
	return c, nil
}

// cardRelays are the relays the card advertises: [card] nostr_relays,
// else used, the relays the node uses.
func cardRelays(cfg config.Config, used []string) []string {
	if len(cfg.Card.NostrRelays) > 0 {
		return cfg.Card.NostrRelays
	}
	return used
}

// cardStartWait is how long publishing the card retries while no relay
// takes it: at the start (then the background goes on, see publishLate)
// and for each change of the card (UpdateCard, Reload).
const cardStartWait = 15 * time.Second

// cardLateWait is how long each of publishLate's tries lasts.
const cardLateWait = 3 * time.Second

// publish publishes card to the node's relays, retrying while no relay
// is connected yet, for up to wait. The event is dated after the newest
// card of this identity already on the relays (a restart within the same
// second, or a clock that went back): relays keep only the newest.
func (n *Node) publish(ctx context.Context, card *snap.Card, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	at := time.Now().Truncate(time.Second)
	if prev, err := n.pool.Query(ctx, nostr.Filter{Kinds: []int{relay.KindCard},
		Authors: []string{n.key.NostrPublicKey()}, Tags: nostr.TagMap{"d": {card.Identity}}}); err == nil {
		for _, ev := range prev {
			if t := ev.CreatedAt.Time(); !at.After(t) {
				at = t.Add(time.Second)
			}
		}
	}
	ev, err := snapnostr.CardEvent(card, n.key, at)
	if err != nil {
		return err
	}
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		_, err := n.pool.Publish(ctx, ev)
		if err == nil {
			n.logger.Info("card published", "event", ev.ID, "relays", n.urls)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node: publish card: %w", err)
		case <-time.After(delay):
		}
	}
}

// UpdateCard rebuilds the card from c and, when it differs from the one
// published, publishes it (the relays keep the newest per identity). It
// reports whether it published.
func (n *Node) UpdateCard(ctx context.Context, c config.Card) (bool, error) {
	n.cardMu.Lock()
	defer n.cardMu.Unlock()
	cfg := n.cfg
	cfg.Card = c
	card, err := buildCard(cfg, n.Address(), n.urls)
	if err != nil {
		return false, err
	}
	return n.setCard(ctx, card)
}

// setCard publishes card when it differs from the one published and
// reports whether it did. The caller holds cardMu.
func (n *Node) setCard(ctx context.Context, card *snap.Card) (bool, error) {
	old, _ := json.Marshal(n.card.Load())
	neu, _ := json.Marshal(card)
	if bytes.Equal(old, neu) {
		return false, nil
	}
	if err := n.publish(ctx, card, cardStartWait); err != nil {
		return false, err
	}
	n.card.Store(card)
	n.cardOut = true
	return true, nil
}

// publishLate publishes the card of a node that started while no relay
// took it (see wiring.publishCard), until one does or ctx ends: the
// relays come up later, or the network does. Tries are spaced from 2 s,
// doubling to a minute, each as long as cardLateWait; a change of the
// card published meanwhile (Reload) ends it. The first failure was
// warned of at the start; later ones are logged at debug level.
func (n *Node) publishLate(ctx context.Context) error {
	for delay := 2 * time.Second; ; delay = min(2*delay, time.Minute) {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C:
		}
		if n.publishPending(ctx) {
			return nil
		}
	}
}

// publishPending publishes the card unless a relay took it already, and
// reports whether one has now.
func (n *Node) publishPending(ctx context.Context) bool {
	n.cardMu.Lock()
	defer n.cardMu.Unlock()
	if n.cardOut {
		return true
	}
	// A try is short: a reload waits for cardMu meanwhile.
	if err := n.publish(ctx, n.card.Load(), cardLateWait); err != nil {
		n.logger.Debug("card still not published; trying again", "err", err)
		return false
	}
	n.cardOut = true
	return true
}
