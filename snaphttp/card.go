package snaphttp

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/jsonenc"
	"github.com/snapnode/snapnode/snap"
)

// WellKnownPath is where an agent serves its signed card (RFC 8615; the
// SNAP specification's HTTP discovery).
const WellKnownPath = "/.well-known/snap-agent.json"

// cardSigner keeps the signed well-known document of the current card. It
// signs again when the card changes (compared by its JSON form) or when
// the signature is older than every, so that the timestamp stays fresh.
type cardSigner struct {
	key   *identity.Key
	card  func() *snap.Card
	now   func() time.Time
	every time.Duration

	mu    sync.Mutex
	src   []byte // the card's JSON when doc was signed
	doc   []byte // the SignedCard document served
	at    time.Time
	signs int // signatures made, for tests
}

// document returns the signed card document, or nil when there is no card.
func (c *cardSigner) document() ([]byte, error) {
	if c.card == nil {
		return nil, nil
	}
	card := c.card()
	if card == nil {
		return nil, nil
	}
	src, err := json.Marshal(card)
	if err != nil {
		return nil, fmt.Errorf("snaphttp: card: %w", err)
	}
	now := c.now()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.doc != nil && bytes.Equal(src, c.src) && now.Sub(c.at) < c.every && !now.Before(c.at) {
		return c.doc, nil
	}
	if c.key == nil {
		return nil, fmt.Errorf("snaphttp: a card is served but no key signs it")
	}
	sc, err := snap.SignCard(card, c.key, now)
	if err != nil {
		return nil, err
	}
	doc, err := jsonenc.Marshal(sc)
	if err != nil {
		return nil, fmt.Errorf("snaphttp: card: %w", err)
	}
	c.src, c.doc, c.at = src, doc, now
	c.signs++
	return c.doc, nil
}
