package snapnostr

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/jsonenc"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
)

// CardEvent returns the kind-31337 event that publishes card: pubkey P,
// tags d (the identity), name, version, one skill per skill, one endpoint
// per endpoint, one relay per relay, and the card as JSON content (the
// bytes the well-known document carries, which Card.Validate measured
// against the 64 KB bound: no \u escapes of <, > and &, as SDK peers'
// JSON.stringify writes it), signed with the untweaked key as Nostr
// requires. The card must be valid and be k's.
func CardEvent(card *snap.Card, k *identity.Key, at time.Time) (nostr.Event, error) {
	if err := card.Validate(); err != nil {
		return nostr.Event{}, err
	}
	a, _ := identity.ParseAddress(card.Identity)
	if a.Key != k.OutputKey() {
		return nostr.Event{}, fmt.Errorf("snapnostr: card identity %s is not this key's address", card.Identity)
	}
	content, err := jsonenc.Marshal(card)
	if err != nil {
		return nostr.Event{}, fmt.Errorf("snapnostr: card: %w", err)
	}
	tags := nostr.Tags{{"d", card.Identity}, {"name", card.Name}, {"version", card.Version}}
	for _, s := range card.Skills {
		tags = append(tags, nostr.Tag{"skill", s.ID, s.Name})
	}
	for _, e := range card.Endpoints {
		tags = append(tags, nostr.Tag{"endpoint", e.Protocol, e.URL})
	}
	for _, r := range card.NostrRelays {
		tags = append(tags, nostr.Tag{"relay", r})
	}
	ev := nostr.Event{
		PubKey: k.NostrPublicKey(), CreatedAt: nostr.Timestamp(at.Unix()),
		Kind: relay.KindCard, Tags: tags, Content: string(content),
	}
	if err := relay.SignEvent(k, &ev); err != nil {
		return nostr.Event{}, err
	}
	return ev, nil
}

// ErrImpostorCard is wrapped by ParseCardEvent for a card event whose
// author is not the agent the card names.
var ErrImpostorCard = errors.New("card event not authored by the card's identity")

// ParseCardEvent checks a kind-31337 event as discovery must before
// trusting it: the card is valid, and its d tag, the card's identity and
// P2TR(tweak(event pubkey)) are one address (on either network). The
// event's own id and signature are the pool's to check.
func ParseCardEvent(ev *nostr.Event) (*snap.Card, error) {
	if ev.Kind != relay.KindCard {
		return nil, fmt.Errorf("snapnostr: kind %d is not a card", ev.Kind)
	}
	card, err := snap.ParseCard([]byte(ev.Content))
	if err != nil {
		return nil, fmt.Errorf("snapnostr: card event %s: %w", ev.ID, err)
	}
	d := ""
	if t := ev.Tags.GetFirst([]string{"d", ""}); t != nil && len(*t) > 1 {
		d = (*t)[1]
	}
	if d != card.Identity {
		return nil, fmt.Errorf("snapnostr: card event %s: d tag %q is not the card's identity %s: %w", ev.ID, d, card.Identity, ErrImpostorCard)
	}
	var p [32]byte
	if n, err := relay.DecodeHex32(ev.PubKey, &p); err != nil || n != 32 {
		return nil, fmt.Errorf("snapnostr: card event %s: bad pubkey: %w", ev.ID, ErrImpostorCard)
	}
	q, err := identity.OutputKeyOf(p)
	a, _ := identity.ParseAddress(card.Identity)
	if err != nil || q != a.Key {
		return nil, fmt.Errorf("snapnostr: card event %s: pubkey %s does not own %s: %w", ev.ID, ev.PubKey, card.Identity, ErrImpostorCard)
	}
	return card, nil
}

// Discovered is a card found on the relays with the Nostr key that
// publishes it, which is what messaging the agent over Nostr needs.
type Discovered struct {
	Card      *snap.Card
	PubKey    string
	CreatedAt time.Time
	EventID   string
}

// Rejected is a card event discovery dropped, and why.
type Rejected struct {
	EventID string
	PubKey  string
	Err     error
}

// Querier fetches stored events; *relay.Pool implements it.
type Querier interface {
	Query(ctx context.Context, f nostr.Filter) ([]*nostr.Event, error)
}

// DiscoverByIdentity returns the newest valid card of the agent addr.
// Impostor and invalid cards are dropped and returned as rejected.
func DiscoverByIdentity(ctx context.Context, q Querier, addr string) (*Discovered, []Rejected, error) {
	found, rejected, err := Discover(ctx, q, nostr.Filter{Kinds: []int{relay.KindCard}, Tags: nostr.TagMap{"d": {addr}}})
	if err != nil {
		return nil, rejected, err
	}
	for _, d := range found {
		if d.Card.Identity == addr {
			return &d, rejected, nil
		}
	}
	return nil, rejected, fmt.Errorf("snapnostr: no valid card for %s: %w", addr, ErrNotFound)
}

// ErrNotFound is returned when discovery finds no valid card.
var ErrNotFound = errors.New("not found")

// DiscoverBySkill returns the newest valid card of every agent that offers
// skill.
func DiscoverBySkill(ctx context.Context, q Querier, skill string) ([]Discovered, []Rejected, error) {
	found, rejected, err := Discover(ctx, q, nostr.Filter{Kinds: []int{relay.KindCard}, Tags: nostr.TagMap{"skill": {skill}}})
	if err != nil {
		return nil, rejected, err
	}
	// Relays may ignore multi-letter tag filters: keep only real matches.
	found = slices.DeleteFunc(found, func(d Discovered) bool {
		return !slices.ContainsFunc(d.Card.Skills, func(s snap.Skill) bool { return s.ID == skill })
	})
	return found, rejected, nil
}

// Discover runs f (kind 31337) and returns, per identity, the newest card
// that passes ParseCardEvent, newest first; everything else is rejected.
func Discover(ctx context.Context, q Querier, f nostr.Filter) ([]Discovered, []Rejected, error) {
	evs, err := q.Query(ctx, f)
	if err != nil {
		return nil, nil, err
	}
	newest := map[string]Discovered{}
	var rejected []Rejected
	for _, ev := range evs {
		card, err := ParseCardEvent(ev)
		if err != nil {
			rejected = append(rejected, Rejected{EventID: ev.ID, PubKey: ev.PubKey, Err: err})
			continue
		}
		d := Discovered{Card: card, PubKey: ev.PubKey, CreatedAt: ev.CreatedAt.Time(), EventID: ev.ID}
		if old, ok := newest[card.Identity]; !ok || d.CreatedAt.After(old.CreatedAt) ||
			d.CreatedAt.Equal(old.CreatedAt) && d.EventID < old.EventID {
			newest[card.Identity] = d
		}
	}
	out := make([]Discovered, 0, len(newest))
	for _, d := range newest {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Discovered) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, rejected, nil
}
