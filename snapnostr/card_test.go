package snapnostr_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// cardOf returns a valid card of k with two skills, two endpoints and a
// relay, whose texts hold the characters JSON encoders may escape.
func cardOf(t *testing.T, k *identity.Key) *snap.Card {
	t.Helper()
	return &snap.Card{
		Name: "R&D <agent>", Description: "answers > asks & more", Version: "1.2.3",
		Identity: k.Address(identity.Mainnet),
		Skills: []snap.Skill{
			{ID: "echo", Name: "Echo & <repeat>", Description: "echoes", Tags: []string{"test"}},
			{ID: "translate", Name: "Translate", Description: "translates", Tags: []string{"text"}},
		},
		Endpoints: []snap.Endpoint{
			{Protocol: "http", URL: "https://agent.example/snap"},
			{Protocol: "wss", URL: "wss://agent.example/snap"},
		},
		NostrRelays:        []string{"wss://relay.example"},
		DefaultInputModes:  []string{"text/plain"},
		DefaultOutputModes: []string{"text/plain"},
	}
}

// The card event is the one SDK peers publish and query, to the byte:
// kind 31337 by the untweaked key, the tags d, name, version, then a skill
// per skill (id, name), an endpoint per endpoint (protocol, url) and a
// relay per relay, in that order, and the card as JSON in the content,
// written as JSON.stringify writes it (no \u escapes of <, > and &), so
// that the content is no larger than the 64 KB the card was measured at.
func TestCardEventOnTheWire(t *testing.T) {
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	card := cardOf(t, k)
	at := time.Unix(1_800_000_000, 0)
	ev, err := snapnostr.CardEvent(card, k, at)
	if err != nil {
		t.Fatal(err)
	}
	if ev.Kind != 31337 || ev.PubKey != k.NostrPublicKey() || ev.CreatedAt != nostr.Timestamp(at.Unix()) {
		t.Errorf("kind %d, pubkey %s, created_at %d", ev.Kind, ev.PubKey, ev.CreatedAt)
	}
	if ok, err := ev.CheckSignature(); !ok || err != nil || ev.ID != ev.GetID() {
		t.Errorf("event id or signature do not verify: %v", err)
	}
	want := nostr.Tags{
		{"d", card.Identity}, {"name", "R&D <agent>"}, {"version", "1.2.3"},
		{"skill", "echo", "Echo & <repeat>"}, {"skill", "translate", "Translate"},
		{"endpoint", "http", "https://agent.example/snap"}, {"endpoint", "wss", "wss://agent.example/snap"},
		{"relay", "wss://relay.example"},
	}
	if !slices.EqualFunc(ev.Tags, want, func(a, b nostr.Tag) bool { return slices.Equal(a, b) }) {
		t.Errorf("tags\n%v\nwant\n%v", ev.Tags, want)
	}
	if strings.Contains(ev.Content, `\u00`) || !strings.Contains(ev.Content, `"name":"R&D <agent>"`) {
		t.Errorf("content escapes what JSON.stringify does not: %s", ev.Content)
	}
	var back map[string]any
	if err := json.Unmarshal([]byte(ev.Content), &back); err != nil || back["identity"] != card.Identity {
		t.Errorf("content is not the card: %v %v", back, err)
	}
	got, err := snapnostr.ParseCardEvent(&ev)
	if err != nil || got.Name != card.Name {
		t.Errorf("ParseCardEvent: %v %v", got, err)
	}
	// The well-known document carries the same bytes.
	sc, err := snap.SignCard(card, k, at)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(sc.Card, []byte(ev.Content)) {
		t.Errorf("the card event's content\n%s\nis not the well-known card\n%s", ev.Content, sc.Card)
	}
}

// A card at the size bound, made of characters an HTML-escaping encoder
// writes six bytes for, is published within the bound.
func TestCardEventWithinTheSizeBound(t *testing.T) {
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	card := cardOf(t, k)
	card.Skills = nil
	for i := range 50 {
		card.Skills = append(card.Skills, snap.Skill{ID: "s" + strings.Repeat("x", i), Name: "n",
			Description: strings.Repeat("<&>", 1024/3), Tags: []string{"t"}})
	}
	if err := card.Validate(); err != nil {
		t.Fatalf("the card is over the bound already: %v", err)
	}
	ev, err := snapnostr.CardEvent(card, k, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Content) > snap.MaxCardSize {
		t.Errorf("content of %d bytes, over the card's %d", len(ev.Content), snap.MaxCardSize)
	}
}

// An impostor's card event (tagged with an agent's address, signed by
// another key) is told as one from its d tag and author alone, before its
// content is read: the content, up to 64 KB of card to parse and check,
// cost a millisecond an impostor, twenty times the check of the author,
// and a flood of them (discovery reads up to DiscoverMaxEvents) spent that
// before the agent's card was found. Before, an impostor whose content was
// not a card was refused as an invalid card, after its content was parsed.
func TestImpostorCardToldBeforeItsContent(t *testing.T) {
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	other, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{
		"the agent's card": mustContent(t, cardOf(t, agent)),
		"not a card":       `{"name":`,
	} {
		ev := nostr.Event{PubKey: other.NostrPublicKey(), CreatedAt: nostr.Now(), Kind: 31337,
			Tags: nostr.Tags{{"d", agent.Address(identity.Mainnet)}}, Content: content}
		if _, err := snapnostr.ParseCardEvent(&ev); !errors.Is(err, snapnostr.ErrImpostorCard) {
			t.Errorf("%s by another key: %v; want ErrImpostorCard", name, err)
		}
	}
	// The author's own event naming another identity in its d tag than
	// its card's is refused as before.
	ev, err := snapnostr.CardEvent(cardOf(t, agent), agent, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ev.Tags[0] = nostr.Tag{"d", agent.Address(identity.Testnet)}
	if _, err := snapnostr.ParseCardEvent(&ev); !errors.Is(err, snapnostr.ErrImpostorCard) {
		t.Errorf("d tag of another network than the card's identity: %v; want ErrImpostorCard", err)
	}
}

func mustContent(t *testing.T, c *snap.Card) string {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
