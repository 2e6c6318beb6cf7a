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
	"github.com/snapnode/snapnode/internal/textcut"
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
// author is checked against the d tag first, before the content (up to
// 64 KB of card) is parsed: an impostor, who may flood the relays with
// cards tagged with an agent's address, costs one key tweak, not a
// card's parse. The event's own id and signature are the pool's to check.
func ParseCardEvent(ev *nostr.Event) (*snap.Card, error) {
	if ev.Kind != relay.KindCard {
		return nil, fmt.Errorf("snapnostr: kind %d is not a card", ev.Kind)
	}
	d := ""
	if t := ev.Tags.GetFirst([]string{"d", ""}); t != nil && len(*t) > 1 {
		d = (*t)[1]
	}
	a, err := identity.ParseAddress(d)
	if err != nil {
		return nil, fmt.Errorf("snapnostr: card event %s: d tag %q is not an agent's address: %w", ev.ID, textcut.Shorten(d, 100, "…"), ErrImpostorCard)
	}
	var p [32]byte
	if n, err := relay.DecodeHex32(ev.PubKey, &p); err != nil || n != 32 {
		return nil, fmt.Errorf("snapnostr: card event %s: bad pubkey: %w", ev.ID, ErrImpostorCard)
	}
	if q, err := identity.OutputKeyOf(p); err != nil || q != a.Key {
		return nil, fmt.Errorf("snapnostr: card event %s: pubkey %s does not own %s: %w", ev.ID, ev.PubKey, d, ErrImpostorCard)
	}
	card, err := snap.ParseCard([]byte(ev.Content))
	if err != nil {
		return nil, fmt.Errorf("snapnostr: card event %s: %w", ev.ID, err)
	}
	if d != card.Identity {
		return nil, fmt.Errorf("snapnostr: card event %s: d tag %q is not the card's identity %s: %w", ev.ID, d, card.Identity, ErrImpostorCard)
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

// MaxRejectedKept bounds the rejected card events a discovery keeps with
// their reasons; the others are only counted.
const MaxRejectedKept = 20

// Rejections are the card events a discovery dropped: how many, and the
// first MaxRejectedKept of them, newest first, with why. Cut says why
// the discovery stopped before reading every card event the relays hold
// ("" when it read them all, or when the card found was newer than what
// it left).
type Rejections struct {
	Count int
	First []Rejected
	Cut   string
}

func (r *Rejections) add(x Rejected) {
	r.Count++
	if len(r.First) < MaxRejectedKept {
		r.First = append(r.First, x)
	}
}

// Bounds of one discovery, whatever the relays hold: a flood of card
// events (impostors tagged with an agent's address, cards naming a
// skill) costs it time, never its answer's correctness within them.
const (
	// DiscoverPage is the limit of one query: the card events asked of
	// each relay at once. A query past the pool's bound of events
	// (relay.ErrQueryTruncated) is asked again with half the limit.
	DiscoverPage = 500
	// DiscoverMaxEvents bounds the card events one discovery reads,
	// over all its pages.
	DiscoverMaxEvents = 100_000
	// DiscoverMaxAgents bounds the agents one discovery by skill
	// returns: the DiscoverMaxAgents whose cards are newest.
	DiscoverMaxAgents = 1000
)

// Querier fetches stored events; *relay.Pool implements it.
type Querier interface {
	Query(ctx context.Context, f nostr.Filter) ([]*nostr.Event, error)
}

// DiscoverByIdentity returns the newest valid card of the agent addr.
// Impostor and invalid cards are dropped and counted in the Rejections.
// The relays' cards tagged with addr are read a page at a time
// (DiscoverPage), newest first, until the pages are older than the card
// found, so that a flood of impostors tagged with addr costs time (at
// most DiscoverMaxEvents card events are read, within ctx) but hides no
// card; the author cannot be asked of the relays instead, as the address
// is the tweaked key, not the untweaked one that signs the card event.
func DiscoverByIdentity(ctx context.Context, q Querier, addr string) (*Discovered, Rejections, error) {
	found, rejected, err := discover(ctx, q, nostr.Filter{Kinds: []int{relay.KindCard}, Tags: nostr.TagMap{"d": {addr}}}, addr)
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
// skill, at most DiscoverMaxAgents of them (Rejections.Cut says when
// there were more).
func DiscoverBySkill(ctx context.Context, q Querier, skill string) ([]Discovered, Rejections, error) {
	return discover(ctx, q, nostr.Filter{Kinds: []int{relay.KindCard}, Tags: nostr.TagMap{"skill": {skill}}}, "")
}

// discover runs f (kind 31337, a tag condition) a page at a time, newest
// first, and returns, per identity, the newest card that passes
// ParseCardEvent and, for a skill's filter, offers it, newest first;
// everything else is rejected. A page asks each relay for the events of f
// dated until the oldest of the page before (the same second included:
// the ids seen then are skipped), so that however many card events match,
// each page is bounded and every one is read. Looking for addr's card, it
// stops once the pages are older than the newest valid card found.
//
// A relay that holds more events of f at one second than it gives at once
// gives only some of them (NIP-01 pages by time alone); Cut says so.
func discover(ctx context.Context, q Querier, f nostr.Filter, addr string) ([]Discovered, Rejections, error) {
	var skill string
	if s := f.Tags["skill"]; len(s) == 1 {
		skill = s[0]
	}
	var (
		rejected Rejections
		newest   = map[string]Discovered{}
		seen     = map[string]struct{}{} // the ids of the page before
		read     int
		limit    = DiscoverPage
		until    *nostr.Timestamp
		stepped  bool // the page before brought nothing new: until went one second back
		full     bool // DiscoverMaxAgents agents found
	)
	for {
		page := f
		page.Until, page.Limit = until, limit
		evs, err := q.Query(ctx, page)
		if errors.Is(err, relay.ErrQueryTruncated) && limit > 1 {
			limit /= 2 // many relays: ask each for fewer
			continue
		}
		if err != nil {
			if read == 0 {
				return nil, rejected, err
			}
			rejected.Cut = fmt.Sprintf("stopped after %d card events: %v", read, err)
			break
		}
		if len(evs) == 0 {
			break
		}
		if stepped {
			rejected.Cut = fmt.Sprintf("the relays hold more card events dated %s than they give at once: some were not read",
				(*until + 1).Time().UTC().Format(time.RFC3339))
		}
		oldest := evs[0].CreatedAt
		fresh := 0
		next := make(map[string]struct{}, len(evs))
		for _, ev := range evs {
			next[ev.ID] = struct{}{}
			oldest = min(oldest, ev.CreatedAt)
			if _, ok := seen[ev.ID]; ok {
				continue
			}
			fresh++
			read++
			card, err := ParseCardEvent(ev)
			if err == nil && skill != "" && !slices.ContainsFunc(card.Skills, func(s snap.Skill) bool { return s.ID == skill }) {
				// Relays may ignore multi-letter tag filters: keep only real matches.
				err = fmt.Errorf("snapnostr: card event %s does not offer the skill %q", ev.ID, skill)
			}
			if err != nil {
				rejected.add(Rejected{EventID: ev.ID, PubKey: ev.PubKey, Err: err})
				continue
			}
			d := Discovered{Card: card, PubKey: ev.PubKey, CreatedAt: ev.CreatedAt.Time(), EventID: ev.ID}
			old, ok := newest[card.Identity]
			if !ok && len(newest) >= DiscoverMaxAgents {
				full = true
				rejected.Cut = fmt.Sprintf("more than %d agents found: the %d of the newest cards kept", DiscoverMaxAgents, DiscoverMaxAgents)
				continue
			}
			if !ok || d.CreatedAt.After(old.CreatedAt) ||
				d.CreatedAt.Equal(old.CreatedAt) && d.EventID < old.EventID {
				newest[card.Identity] = d
			}
		}
		seen = next
		stepped = fresh == 0
		if stepped {
			oldest-- // every event at this second that the relays give was read
		}
		until = &oldest
		if d, ok := newest[addr]; addr != "" && ok && nostr.Timestamp(d.CreatedAt.Unix()) > oldest {
			break // the pages left are older than the card found
		}
		if full {
			break // the pages left are older than the agents kept
		}
		if read >= DiscoverMaxEvents {
			rejected.Cut = fmt.Sprintf("stopped after %d card events, the bound of one discovery: older ones were not read", read)
			break
		}
	}
	out := make([]Discovered, 0, len(newest))
	for _, d := range newest {
		out = append(out, d)
	}
	slices.SortFunc(out, func(a, b Discovered) int { return b.CreatedAt.Compare(a.CreatedAt) })
	return out, rejected, nil
}
