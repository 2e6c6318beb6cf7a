package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snapnostr"
)

// ErrUnreachable is returned by discovery when no relay could be reached:
// a card that was not found was never looked for. The error names each
// relay and its last error.
var ErrUnreachable = errors.New("could not reach any relay")

// Discovered is an agent's card found on the relays with the Nostr key
// that publishes it; Rejected is a card event dropped, and why;
// Rejections counts those of one discovery and keeps the first few.
type (
	Discovered = snapnostr.Discovered
	Rejected   = snapnostr.Rejected
	Rejections = snapnostr.Rejections
	// DiscoverConfig is the clock and timestamp window discovery judges
	// the cards' dates by (DiscoverWith).
	DiscoverConfig = snapnostr.DiscoverConfig
)

// Relays is a requester's connection to Nostr relays: it finds agents by
// their cards and carries requests to them (see Nostr). Its connections
// are kept in the background until Close.
type Relays struct {
	pool     *relay.Pool
	verifier *relay.Verifier // the pool's
	urls     []string
}

// DialRelays starts connecting to the relays at urls; ctx bounds the
// connections' life, as Close does.
func DialRelays(ctx context.Context, urls []string, logger *slog.Logger) *Relays {
	v := relay.NewVerifier()
	p := relay.NewPool(relay.PoolConfig{URLs: urls, Logger: logger, Verifier: v})
	p.Start(ctx)
	return &Relays{pool: p, verifier: v, urls: urls}
}

// Close ends the connections and waits for them.
func (r *Relays) Close() { r.pool.Close() }

// Nostr returns a client that sends with key over these relays.
func (r *Relays) Nostr(key *identity.Key, logger *slog.Logger) *Nostr {
	return NewNostr(NostrConfig{Key: key, Relays: r.pool, Verifier: r.verifier, Logger: logger})
}

// Discover returns the newest valid card of the agent address, or of every
// agent that offers skill (give one of them), and the card events dropped
// (impostors, invalid cards, expired ones and those dated more than the
// SNAP timestamp window ahead of this clock): counted, the first few kept. The relays'
// cards are read a page at a time, newest first, so that however many
// card events an address or a skill has on them (a flood of impostors),
// the agent's newest valid card is found within bounded memory; see
// snapnostr.DiscoverByIdentity for the bounds. When nothing is found the error says why:
// ErrUnreachable when no relay could be reached, else snapnostr.ErrNotFound
// or the relays' error.
func (r *Relays) Discover(ctx context.Context, address, skill string) ([]Discovered, Rejections, error) {
	return r.DiscoverWith(ctx, address, skill, DiscoverConfig{})
}

// DiscoverWith is Discover judging the cards' dates by cfg's clock and
// timestamp window.
func (r *Relays) DiscoverWith(ctx context.Context, address, skill string, cfg DiscoverConfig) ([]Discovered, Rejections, error) {
	var (
		found    []Discovered
		rejected Rejections
		err      error
	)
	if address != "" {
		var d *Discovered
		d, rejected, err = snapnostr.DiscoverByIdentity(ctx, r.pool, address, cfg)
		if d != nil {
			found = append(found, *d)
		}
	} else {
		found, rejected, err = snapnostr.DiscoverBySkill(ctx, r.pool, skill, cfg)
	}
	if len(found) > 0 {
		return found, rejected, nil
	}
	if down := r.unreachable(); down != "" {
		return nil, rejected, fmt.Errorf("%w: %s", ErrUnreachable, down)
	}
	if err == nil {
		err = snapnostr.ErrNotFound
	}
	return nil, rejected, err
}

// FindAgent returns the Target of the agent address: its newest valid card
// on the relays, with the dropped card events, as Discover.
func (r *Relays) FindAgent(ctx context.Context, address string) (Target, Rejections, error) {
	found, rejected, err := r.Discover(ctx, address, "")
	switch {
	case errors.Is(err, ErrUnreachable):
		return Target{}, rejected, err
	case err != nil:
		return Target{}, rejected, fmt.Errorf("no valid card for %s on %s: %w", address, strings.Join(r.urls, ", "), err)
	}
	return Target{Address: address, PubKey: found[0].PubKey, Card: found[0].Card}, rejected, nil
}

// unreachable describes the relays and their last errors when none of them
// is connected ("" when one is, or none has failed yet).
func (r *Relays) unreachable() string {
	var down []string
	for _, h := range r.pool.Health() {
		if h.State == relay.StateConnected || h.LastError == nil {
			return ""
		}
		down = append(down, fmt.Sprintf("%s (%v)", h.URL, h.LastError))
	}
	return strings.Join(down, "; ")
}
