package secp

import (
	"errors"

	"github.com/btcsuite/btcd/chaincfg/chainhash"
)

// Errors of this package. Test them with errors.Is.
var (
	// ErrInvalidSecret: a secret key is zero or not below the curve order n.
	ErrInvalidSecret = errors.New("secret key is not in 1…n−1")
	// ErrNotOnCurve: 32 bytes are not the x coordinate of a point on
	// secp256k1 (or not below the field size), so no key has them.
	ErrNotOnCurve = errors.New("not the x coordinate of a point on secp256k1")
	// ErrTweak: the BIP-341 tweak hash of a key is not below n, or the
	// tweaked key is zero: a probability of about 2⁻¹²⁸ per key.
	ErrTweak = errors.New("BIP-341 tweak out of range")
)

// tapTweak returns the BIP-341 TapTweak hash of the x-only key p with no
// script tree: the scalar a key-path-only P2TR output adds to p.
func tapTweak(p [32]byte) [32]byte {
	return *chainhash.TaggedHash(chainhash.TagTapTweak, p[:])
}
