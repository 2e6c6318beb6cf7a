package relay

import (
	"encoding/hex"
	"fmt"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/bounded"
	"github.com/snapnode/snapnode/internal/secp"
)

// Verifier checks Nostr events (NIP-01 id and BIP-340 signature) and
// remembers, in bounded caches, the authors' lifted keys and the events it
// has verified or that this process signed. One Verifier shared by the
// embedded relay, the pool and the inbox checks each event's signature
// once per process: an event seen again costs the hash of its
// serialization, which is recomputed every time, so a cached signature
// only ever vouches for the exact event it was checked on.
// A Verifier is safe for concurrent use.
type Verifier struct {
	keys *bounded.Cache[string, *secp.PublicKey]
	seen *bounded.Cache[[32]byte, string] // event id → its verified signature
}

// NewVerifier returns a Verifier remembering up to 4,096 authors and
// 65,536 events.
func NewVerifier() *Verifier {
	return &Verifier{
		keys: bounded.NewCache[string, *secp.PublicKey](4096),
		seen: bounded.NewCache[[32]byte, string](65536),
	}
}

// Verify returns an error wrapping ErrInvalidEvent unless ev's id is the
// hash of its content and its signature is valid for its pubkey.
func (v *Verifier) Verify(ev *nostr.Event) error {
	id, err := CheckID(ev)
	if err != nil {
		return err
	}
	if sig, ok := v.seen.Get(id); ok && sig == ev.Sig {
		return nil
	}
	pub, ok := v.keys.Get(ev.PubKey)
	if !ok {
		var p [32]byte
		if _, err := decodeHex32(ev.PubKey, &p); err != nil {
			return fmt.Errorf("%w: pubkey: %w", ErrInvalidEvent, err)
		}
		if pub, err = secp.ParsePublicKey(p); err != nil {
			return fmt.Errorf("%w: pubkey is not a point on secp256k1", ErrInvalidEvent)
		}
		v.keys.Put(ev.PubKey, pub)
	}
	var raw [64]byte
	if len(ev.Sig) != 128 {
		return fmt.Errorf("%w: %s: signature is not 128 hex characters", ErrInvalidEvent, ev.ID)
	}
	if _, err := hex.Decode(raw[:], []byte(ev.Sig)); err != nil {
		return fmt.Errorf("%w: %s: signature: %w", ErrInvalidEvent, ev.ID, err)
	}
	if !pub.Verify(id, raw) {
		return fmt.Errorf("%w: %s: bad signature", ErrInvalidEvent, ev.ID)
	}
	v.seen.Put(id, ev.Sig)
	return nil
}

// checkID returns ev's id after checking it is the hash of its content.
func CheckID(ev *nostr.Event) ([32]byte, error) {
	var id [32]byte
	if _, err := decodeHex32(ev.ID, &id); err != nil {
		return id, fmt.Errorf("%w: id is not 64 hex characters", ErrInvalidEvent)
	}
	if EventID(ev) != id {
		return id, fmt.Errorf("%w: id %s does not match the content", ErrInvalidEvent, ev.ID)
	}
	return id, nil
}

// VerifyEvent checks one event with a throwaway Verifier.
func VerifyEvent(ev *nostr.Event) error { return NewVerifier().Verify(ev) }
