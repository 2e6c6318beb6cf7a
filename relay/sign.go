package relay

import (
	"encoding/hex"
	"fmt"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
)

// signEvent sets ev's pubkey, id and signature (BIP-340 by the untweaked
// key, as NIP-01 requires) and, when v is not nil, tells v the event is
// genuine, so that publishing it costs no verification. It signs with the
// identity key directly: go-nostr's Event.Sign would parse the hex secret
// and derive the public key again on every call.
func signEvent(k *identity.Key, ev *nostr.Event, v *Verifier) error {
	ev.PubKey = k.NostrPublicKey()
	id := EventID(ev)
	sig, err := k.SignUntweaked(id)
	if err != nil {
		return fmt.Errorf("relay: sign event: %w", err)
	}
	ev.ID = hex.EncodeToString(id[:])
	ev.Sig = hex.EncodeToString(sig[:])
	if v != nil {
		v.seen.Put(vouched(id, sig), struct{}{})
	}
	return nil
}

// SignEvent sets ev's pubkey, id and signature with k, as every event the
// node publishes is signed.
func SignEvent(k *identity.Key, ev *nostr.Event) error {
	return signEvent(k, ev, nil)
}

// Sign signs ev with k as SignEvent does and remembers it as verified, so
// that publishing it through a pool sharing v costs no verification. A
// nil v only signs.
func (v *Verifier) Sign(k *identity.Key, ev *nostr.Event) error {
	return signEvent(k, ev, v)
}
