package node

import (
	"bytes"
	"cmp"
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

// cardStartWait is how long the start tries to publish the card before
// it leaves that to the background (see publishCards).
const cardStartWait = 15 * time.Second

// cardTryWait is how long each of publishCards's tries lasts.
const cardTryWait = 3 * time.Second

// cardRetry and cardRetryMax space publishCards's tries after a failed
// one: from cardRetry, doubling to cardRetryMax.
const (
	cardRetry    = 2 * time.Second
	cardRetryMax = time.Minute
)

// publish publishes card to the node's relays, retrying while no relay
// is connected yet, for up to wait. The event is dated after the newest
// card of this identity already on the relays (a restart within the same
// second, or a clock that went back): relays keep only the newest.
func (n *Node) publish(ctx context.Context, card *snap.Card, wait time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	now := time.Now()
	at := now.Truncate(time.Second)
	if prev, err := n.pool.Query(ctx, nostr.Filter{Kinds: []int{relay.KindCard},
		Authors: []string{n.key.NostrPublicKey()}, Tags: nostr.TagMap{"d": {card.Identity}}}); err == nil {
		var ahead bool
		if at, ahead = cardDate(now, prev, cmp.Or(n.cfg.MaxDrift.Duration, snap.DefaultMaxDrift)); ahead {
			n.logger.Warn("the relays hold a card of this node dated ahead of this clock by more than max_drift (a clock that ran ahead published it): "+
				"the card is dated after it, as relays keep only the newest, and peers' discovery ignores cards dated so far ahead, so it does not find this node on these relays until about then",
				"dated", at.Add(-time.Second).UTC())
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

// cardDate returns the date of a card published now (to the second):
// now, or a second after the newest of prev, the node's cards on the
// relays, when that is not before now. ahead says that card is dated more
// than maxDrift after now: discovery ignores a card dated so far ahead.
func cardDate(now time.Time, prev []*nostr.Event, maxDrift time.Duration) (at time.Time, ahead bool) {
	at = now.Truncate(time.Second)
	for _, ev := range prev {
		if t := ev.CreatedAt.Time(); !at.After(t) {
			at = t.Add(time.Second)
		}
	}
	return at, at.Add(-time.Second).After(now.Add(maxDrift))
}

// UpdateCard rebuilds the card from c and, when it differs from the one
// in force, puts it in force (see setCard) and waits until a relay took
// it or ctx ends. It reports whether the card changed; the error says
// that ctx ended first (the card stays in force, and publishCards goes on
// publishing it).
func (n *Node) UpdateCard(ctx context.Context, c config.Card) (bool, error) {
	n.cardMu.Lock()
	cfg := n.cfg
	cfg.Card = c
	card, err := buildCard(cfg, n.Address(), n.urls)
	if err != nil {
		n.cardMu.Unlock()
		return false, err
	}
	changed := n.setCard(card)
	out := n.cardDone
	n.cardMu.Unlock()
	if !changed {
		return false, nil
	}
	select {
	case <-out:
		return true, nil
	case <-ctx.Done():
		return true, fmt.Errorf("node: card not published yet: %w", ctx.Err())
	}
}

// setCard puts card in force when it differs from the one in force, and
// reports whether it did: the HTTP transport serves it from now on, and
// publishCards publishes it to the relays, the try of an older card (if
// one is running) given up. The caller holds cardMu.
func (n *Node) setCard(card *snap.Card) bool {
	old, _ := json.Marshal(n.card.Load())
	neu, _ := json.Marshal(card)
	if bytes.Equal(old, neu) {
		return false
	}
	n.card.Store(card)
	n.cardGen++
	if n.cardOut {
		n.cardOut, n.cardDone = false, make(chan struct{})
	}
	if n.cardTry != nil {
		n.cardTry()
	}
	select {
	case n.cardNew <- struct{}{}:
	default: // publishCards is told already
	}
	return true
}

// publishCards keeps the relays' card the one in force until ctx ends:
// whenever the card in force is not out yet (the start's publication
// failed, or setCard changed it), it publishes it, each try as long as
// cardTryWait, tries after a failed one spaced from cardRetry doubling to
// cardRetryMax, a new card tried at once. The first failure of a card is
// warned of (the start's failure was, by publishCard), later ones are
// logged at debug level; the success is logged by publish. delay is the
// wait before the first try.
func (n *Node) publishCards(ctx context.Context, delay time.Duration) error {
	for {
		n.cardMu.Lock()
		pending := !n.cardOut
		n.cardMu.Unlock()
		var next <-chan time.Time // nil: no try due
		t := time.NewTimer(delay)
		if pending {
			next = t.C
		}
		woken := false
		select {
		case <-ctx.Done():
		case <-n.cardNew:
			woken = true
		case <-next:
		}
		t.Stop()
		switch {
		case ctx.Err() != nil:
			return nil
		case woken:
			delay = 0
			continue
		}
		if n.tryCard(ctx, delay == 0) {
			delay = 0 // superseded, or out: the next card at once
		} else {
			delay = min(max(2*delay, cardRetry), cardRetryMax)
		}
	}
}

// tryCard makes one try at publishing the card in force, and reports
// whether the try is over: the card is out, or a newer one replaced it.
// first says to warn of a failure.
func (n *Node) tryCard(ctx context.Context, first bool) bool {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	n.cardMu.Lock()
	card, gen := n.card.Load(), n.cardGen
	n.cardTry = cancel
	n.cardMu.Unlock()
	err := n.publish(ctx, card, cardTryWait)
	n.cardMu.Lock()
	defer n.cardMu.Unlock()
	n.cardTry = nil
	switch {
	case gen != n.cardGen:
		return true
	case err == nil:
		n.cardOut = true
		close(n.cardDone)
		return true
	case first:
		n.logger.Warn("card not published; trying again in the background", "relays", n.urls, "err", err)
	default:
		n.logger.Debug("card still not published; trying again", "err", err)
	}
	return false
}
