package relay

import (
	"encoding/hex"
	"fmt"
)

// decodeHex32 decodes 64 lowercase hex characters, the form of Nostr keys
// and event ids.
func decodeHex32(s string, out *[32]byte) (int, error) {
	if len(s) != 64 {
		return 0, fmt.Errorf("want 64 hex characters, got %d", len(s))
	}
	return hex.Decode(out[:], []byte(s))
}

// DecodeHex32 decodes a Nostr public key or event id (64 lowercase hex
// characters) into out.
func DecodeHex32(s string, out *[32]byte) (int, error) { return decodeHex32(s, out) }
