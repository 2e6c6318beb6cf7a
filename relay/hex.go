package relay

import (
	"encoding/hex"
	"fmt"

	"github.com/snapnode/snapnode/internal/lowerhex"
)

// decodeHex32 decodes 64 lowercase hex characters, the form of Nostr keys
// and event ids (NIP-01); upper case is refused, as the embedded relay
// refuses it.
func decodeHex32(s string, out *[32]byte) (int, error) {
	if len(s) != 64 {
		return 0, fmt.Errorf("want 64 hex characters, got %d", len(s))
	}
	if !lowerhex.Valid(s, 64) {
		return 0, fmt.Errorf("want lower-case hex characters")
	}
	return hex.Decode(out[:], []byte(s))
}

// DecodeHex32 decodes a Nostr public key or event id (64 lowercase hex
// characters) into out.
func DecodeHex32(s string, out *[32]byte) (int, error) { return decodeHex32(s, out) }
