package snapnostr

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
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
	// returns. Each relay has its share of them: its agents with the
	// newest cards are taken in turn with the other relays' (see
	// DiscoverBySkill), so that a relay serving many agents' cards, made
	// up ones among them, does not crowd out the agents the others hold.
	// At most DiscoverMaxAgents cards of each relay are held meanwhile.
	DiscoverMaxAgents = 1000
)

// Querier fetches stored events with the relays each came from, each
// relay's until its own point; *relay.Pool implements it.
type Querier interface {
	QuerySources(ctx context.Context, f nostr.Filter, o relay.QueryOptions) ([]relay.Sourced, error)
}

// DiscoverConfig is how a discovery judges the cards' dates. The zero
// value is the defaults.
type DiscoverConfig struct {
	// Now is the clock the cards' NIP-40 expirations and dates are read
	// by; nil is time.Now.
	Now func() time.Time
	// MaxDrift is how far ahead of Now a card may be dated (default
	// snap.DefaultMaxDrift, the SNAP timestamp window: an agent whose
	// clock is further ahead cannot be talked to anyway). A card dated
	// later is dropped: one published by a clock that was wrong would
	// otherwise pass for the agent's newest card until that date.
	MaxDrift time.Duration
}

func (c DiscoverConfig) withDefaults() DiscoverConfig {
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.MaxDrift <= 0 {
		c.MaxDrift = snap.DefaultMaxDrift
	}
	return c
}

// ErrStaleCard is wrapped by discovery's rejection of a card event whose
// NIP-40 expiration has passed, or that is dated further ahead than
// DiscoverConfig.MaxDrift.
var ErrStaleCard = errors.New("card event expired or dated in the future")

// DiscoverByIdentity returns the newest valid card of the agent addr.
// Impostor and invalid cards, expired ones (NIP-40) and those dated more
// than cfg.MaxDrift ahead are dropped and counted in the Rejections.
// The relays' cards tagged with addr are read a page at a time
// (DiscoverPage), newest first, each relay's until they are older than
// the card found, so that a flood of impostors tagged with addr, on one
// relay or several, costs time (at most DiscoverMaxEvents card events are
// read, within ctx) but hides no card; the author cannot be asked of the
// relays instead, as the address is the tweaked key, not the untweaked
// one that signs the card event.
func DiscoverByIdentity(ctx context.Context, q Querier, addr string, cfg DiscoverConfig) (*Discovered, Rejections, error) {
	found, rejected, err := discover(ctx, q, nostr.Filter{Kinds: []int{relay.KindCard}, Tags: nostr.TagMap{"d": {addr}}}, addr, cfg.withDefaults())
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
// skill, newest first, dropping the cards DiscoverByIdentity drops. When
// there are more than DiscoverMaxAgents agents (Rejections.Cut says so),
// the relays take turns: each gives the agent with the newest card it
// holds that is not taken yet, until DiscoverMaxAgents are; so every
// relay holding such cards is represented by its newest agents, however
// many cards another relay serves.
func DiscoverBySkill(ctx context.Context, q Querier, skill string, cfg DiscoverConfig) ([]Discovered, Rejections, error) {
	return discover(ctx, q, nostr.Filter{Kinds: []int{relay.KindCard}, Tags: nostr.TagMap{"skill": {skill}}}, "", cfg.withDefaults())
}

// relayCards is one relay's part in a discovery: where its next page
// ends, the ids it gave dated then (which it gives again), and, by
// identity, the newest created_at of the valid cards it brought (at most
// DiscoverMaxAgents identities, those of its newest cards: its share).
type relayCards struct {
	until   nostr.Timestamp
	begun   bool // until is set
	done    bool // the relay has nothing more to give this discovery
	stepped bool // its page before brought nothing new: until went one second back
	seen    map[string]struct{}
	agents  map[string]time.Time
	// this page's events, and the oldest
	page   []*nostr.Event
	oldest nostr.Timestamp
}

// trim keeps the DiscoverMaxAgents agents of rc with the newest cards and
// reports whether it has that many.
func (rc *relayCards) trim() bool {
	if len(rc.agents) <= DiscoverMaxAgents {
		return len(rc.agents) == DiscoverMaxAgents
	}
	ids := slices.Collect(maps.Keys(rc.agents))
	slices.SortFunc(ids, func(a, b string) int { return rc.agents[b].Compare(rc.agents[a]) })
	for _, id := range ids[DiscoverMaxAgents:] {
		delete(rc.agents, id)
	}
	return true
}

// discover runs f (kind 31337, a tag condition) a page at a time, newest
// first, and returns, per identity, the newest card that passes
// ParseCardEvent, is neither expired nor dated too far ahead and, for a
// skill's filter, offers it, newest first; everything else is rejected.
//
// Each relay is paged on its own: a page asks each relay for the events
// of f dated until the oldest of the page it gave before (the same second
// included: the ids it gave then are skipped), so that however many card
// events match, each page is bounded and every one is read, and one
// relay's events, however many or however dated, neither hold back
// another's paging nor make it skip any. A relay is done when its page is
// empty; looking for addr's card, when its pages are older than the
// newest valid card found; for a skill, when it gave DiscoverMaxAgents
// agents: older cards would not be among its share. A done relay is asked
// for nothing more (until 0).
//
// A relay that holds more events of f at one second than it gives at once
// gives only some of them (NIP-01 pages by time alone); Cut says so.
func discover(ctx context.Context, q Querier, f nostr.Filter, addr string, cfg DiscoverConfig) ([]Discovered, Rejections, error) {
	var skill string
	if s := f.Tags["skill"]; len(s) == 1 {
		skill = s[0]
	}
	var (
		rejected Rejections
		newest   = map[string]Discovered{}
		// judged holds the ids read, each with the identity of its valid
		// card ("" for one rejected): another relay's copy counts for
		// that relay too.
		judged = map[string]string{}
		relays = map[string]*relayCards{}
		read   int
		limit  = DiscoverPage
	)
	now := cfg.Now()
	ahead := nostr.Timestamp(now.Add(cfg.MaxDrift).Unix())
	for {
		var opts relay.QueryOptions
		if len(relays) > 0 {
			opts.Until = make(map[string]nostr.Timestamp, len(relays))
			for url, rc := range relays {
				opts.Until[url] = rc.until // 0 when done: nothing
			}
		}
		page := f
		page.Limit = limit
		evs, err := q.QuerySources(ctx, page, opts)
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
		for _, rc := range relays {
			rc.page = rc.page[:0]
		}
		for _, src := range evs {
			ev := src.Event
			id, ok := judged[ev.ID]
			if !ok {
				read++
				if d, err := judge(ev, skill, now, ahead); err != nil {
					rejected.add(Rejected{EventID: ev.ID, PubKey: ev.PubKey, Err: err})
				} else {
					id = d.Card.Identity
					if old, ok := newest[id]; !ok || d.CreatedAt.After(old.CreatedAt) ||
						d.CreatedAt.Equal(old.CreatedAt) && d.EventID < old.EventID {
						newest[id] = d
					}
				}
				judged[ev.ID] = id
			}
			for _, url := range src.Relays {
				rc := relays[url]
				if rc == nil {
					rc = &relayCards{agents: map[string]time.Time{}}
					relays[url] = rc
				}
				if rc.done {
					continue
				}
				if len(rc.page) == 0 || ev.CreatedAt < rc.oldest {
					rc.oldest = ev.CreatedAt
				}
				rc.page = append(rc.page, ev)
				if at := ev.CreatedAt.Time(); id != "" && at.After(rc.agents[id]) {
					rc.agents[id] = at
				}
			}
		}
		found, haveFound := newest[addr]
		active := false
		for url, rc := range relays {
			if rc.done {
				continue
			}
			if len(rc.page) == 0 {
				rc.done, rc.until = true, 0
				continue
			}
			if rc.stepped {
				rejected.Cut = fmt.Sprintf("%s holds more card events dated %s than it gives at once: some were not read",
					url, (rc.until + 1).Time().UTC().Format(time.RFC3339))
			}
			// The ids it gave dated until are kept while until stays:
			// a relay that gives them again in turns, not one new
			// among them, is stepped past that second all the same.
			if !rc.begun || rc.oldest < rc.until {
				rc.seen = map[string]struct{}{}
			}
			fresh := 0
			for _, ev := range rc.page {
				if _, ok := rc.seen[ev.ID]; !ok {
					fresh++
					if ev.CreatedAt == rc.oldest {
						rc.seen[ev.ID] = struct{}{}
					}
				}
			}
			rc.until, rc.begun, rc.stepped = rc.oldest, true, fresh == 0
			if rc.stepped {
				rc.until-- // every event at this second that it gives was read
				rc.seen = map[string]struct{}{}
			}
			shareFull := rc.trim()
			switch {
			case addr == "" && shareFull:
				rc.done = true // older cards would not be among its share
			case addr != "" && haveFound && nostr.Timestamp(found.CreatedAt.Unix()) > rc.until:
				rc.done = true // its pages left are older than the card found
			case rc.until <= 0:
				rc.done = true
			}
			if rc.done {
				rc.until = 0
			} else {
				active = true
			}
		}
		dropUnheld(newest, relays, addr)
		if !active {
			break
		}
		if read >= DiscoverMaxEvents {
			rejected.Cut = fmt.Sprintf("stopped after %d card events, the bound of one discovery: older ones were not read", read)
			break
		}
	}
	out := share(newest, relays)
	if len(out) < len(newest) {
		rejected.Cut = fmt.Sprintf("more than %d agents found: each relay's newest kept in turn, %d in all", DiscoverMaxAgents, DiscoverMaxAgents)
	}
	slices.SortFunc(out, func(a, b Discovered) int {
		if c := b.CreatedAt.Compare(a.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.Card.Identity, b.Card.Identity)
	})
	return out, rejected, nil
}

// judge returns the card of ev if discovery takes it: it passes
// ParseCardEvent, offers skill (when not ""), has not expired by now
// (NIP-40) and is dated at most ahead.
func judge(ev *nostr.Event, skill string, now time.Time, ahead nostr.Timestamp) (Discovered, error) {
	card, err := ParseCardEvent(ev)
	if err != nil {
		return Discovered{}, err
	}
	if skill != "" && !slices.ContainsFunc(card.Skills, func(s snap.Skill) bool { return s.ID == skill }) {
		// Relays may ignore multi-letter tag filters: keep only real matches.
		return Discovered{}, fmt.Errorf("snapnostr: card event %s does not offer the skill %q", ev.ID, skill)
	}
	if exp, ok := Expiration(ev); ok && int64(exp) <= now.Unix() {
		return Discovered{}, fmt.Errorf("snapnostr: card event %s expired at %s (NIP-40): %w",
			ev.ID, exp.Time().UTC().Format(time.RFC3339), ErrStaleCard)
	}
	if ev.CreatedAt > ahead {
		return Discovered{}, fmt.Errorf("snapnostr: card event %s is dated %s, ahead of this clock by more than the timestamp window: %w",
			ev.ID, ev.CreatedAt.Time().UTC().Format(time.RFC3339), ErrStaleCard)
	}
	return Discovered{Card: card, PubKey: ev.PubKey, CreatedAt: ev.CreatedAt.Time(), EventID: ev.ID}, nil
}

// dropUnheld lets go of the cards of newest that no relay holds among its
// share any more (trimmed out), but addr's: the cards held stay bounded by
// DiscoverMaxAgents a relay.
func dropUnheld(newest map[string]Discovered, relays map[string]*relayCards, addr string) {
	if len(newest) <= DiscoverMaxAgents {
		return
	}
	for id := range newest {
		if id == addr {
			continue
		}
		held := false
		for _, rc := range relays {
			if _, held = rc.agents[id]; held {
				break
			}
		}
		if !held {
			delete(newest, id)
		}
	}
}

// share returns the cards of newest, at most DiscoverMaxAgents of them:
// all when there are no more; else the relays, in the order of their
// URLs, take turns giving the agent with the newest card they hold that
// is not taken yet.
func share(newest map[string]Discovered, relays map[string]*relayCards) []Discovered {
	if len(newest) <= DiscoverMaxAgents {
		return slices.Collect(maps.Values(newest))
	}
	var lists [][]string
	for _, url := range slices.Sorted(maps.Keys(relays)) {
		rc := relays[url]
		ids := slices.Collect(maps.Keys(rc.agents))
		slices.SortFunc(ids, func(a, b string) int {
			if c := rc.agents[b].Compare(rc.agents[a]); c != 0 {
				return c
			}
			return strings.Compare(a, b)
		})
		lists = append(lists, ids)
	}
	taken := map[string]bool{}
	out := make([]Discovered, 0, DiscoverMaxAgents)
	for more := true; more && len(out) < DiscoverMaxAgents; {
		more = false
		for i, ids := range lists {
			for len(ids) > 0 && taken[ids[0]] {
				ids = ids[1:]
			}
			lists[i] = ids
			if len(ids) == 0 || len(out) == DiscoverMaxAgents {
				continue
			}
			more = true
			taken[ids[0]] = true
			out = append(out, newest[ids[0]])
			lists[i] = ids[1:]
		}
	}
	return out
}
