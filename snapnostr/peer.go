package snapnostr

import (
	"context"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/relay"
)

// Sealer seals and opens the NIP-44 v2 payloads one identity exchanges
// with its peers, keeping the conversation key of each peer in a cache of
// bounded size. A requester outside this package (the client package)
// uses it to speak to an agent's inbox as the outbox does.
type Sealer struct{ s *sealer }

// NewSealer returns a Sealer for k that caches the conversation keys of at
// most size peers.
func NewSealer(k *identity.Key, size int) *Sealer {
	return &Sealer{s: newSealer(k, size)}
}

// Seal encrypts plaintext (1 to relay.MaxNIP44Plain bytes) for the Nostr key
// peer (hex).
func (s *Sealer) Seal(peer string, plaintext []byte) (string, error) {
	return s.s.seal(peer, plaintext)
}

// Open decrypts content sealed by the Nostr key peer (hex).
func (s *Sealer) Open(peer, content string) ([]byte, error) {
	return s.s.open(peer, content)
}

// Transport is what the inbox, and a requester's client, need of relays.
// *relay.Pool implements it: Subscribe delivers verified, deduplicated events
// matching f until the subscription is closed; Publish succeeds when at
// least one relay accepted the event. The inbox uses the pool's
// SubscribeFunc too when the transport has it (see funcSubscriber).
type Transport interface {
	Subscribe(ctx context.Context, f nostr.Filter) (*relay.Subscription, error)
	Publish(ctx context.Context, ev nostr.Event) (relay.PublishResult, error)
}

func hasTag(ev *nostr.Event, name, value string) bool {
	for _, tag := range ev.Tags {
		if len(tag) >= 2 && tag[0] == name && tag[1] == value {
			return true
		}
	}
	return false
}
