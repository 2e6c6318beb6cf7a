package identity

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/btcsuite/btcd/txscript"
)

// ErrInvalidKey is returned for a secret that is not 32 bytes in 1…n−1.
var ErrInvalidKey = errors.New("invalid secp256k1 secret key")

// Key is an agent's secret together with everything derived from it. The
// tweak and both public keys are computed once, when the key is made, so
// signing costs one BIP-340 signature and nothing more. A Key is safe for
// concurrent use.
type Key struct {
	secret   *btcec.PrivateKey // d
	internal [32]byte          // P, x-only: the Nostr public key
	output   [32]byte          // Q, x-only: what the address encodes
	nostr    signer            // d with P: signs Nostr events
	snap     signer            // d' = tweak(d) with Q: signs SNAP messages
}

// Generate returns a new random key.
func Generate() (*Key, error) {
	var b [32]byte
	for {
		if _, err := rand.Read(b[:]); err != nil {
			return nil, fmt.Errorf("identity: read random: %w", err)
		}
		k, err := FromBytes(b[:])
		if err == nil {
			return k, nil
		}
	}
}

// FromBytes makes a key from a 32-byte big-endian secret.
func FromBytes(b []byte) (*Key, error) {
	if len(b) != 32 {
		return nil, fmt.Errorf("%w: %d bytes, want 32", ErrInvalidKey, len(b))
	}
	var s btcec.ModNScalar
	if overflow := s.SetByteSlice(b); overflow || s.IsZero() {
		return nil, fmt.Errorf("%w: not in 1…n−1", ErrInvalidKey)
	}
	secret := btcec.PrivKeyFromScalar(&s)
	tweaked := txscript.TweakTaprootPrivKey(*secret, nil)
	k := &Key{secret: secret, nostr: newSigner(secret), snap: newSigner(tweaked)}
	k.internal, k.output = k.nostr.pub, k.snap.pub
	return k, nil
}

// FromHex makes a key from 64 hexadecimal characters.
func FromHex(s string) (*Key, error) {
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: not hex: %v", ErrInvalidKey, err)
	}
	return FromBytes(b)
}

// Hex returns the secret d as 64 lowercase hex characters, the form of key
// files and SNAPNODE_KEY. Handle it as the secret it is.
func (k *Key) Hex() string {
	b := k.secret.Key.Bytes()
	return hex.EncodeToString(b[:])
}

// InternalKey returns P, the x-only public key of d.
func (k *Key) InternalKey() [32]byte { return k.internal }

// OutputKey returns Q, the BIP-341 key-path tweak of P.
func (k *Key) OutputKey() [32]byte { return k.output }

// NostrPublicKey returns P as 64 lowercase hex characters.
func (k *Key) NostrPublicKey() string { return hex.EncodeToString(k.internal[:]) }

// NostrSecretKey returns the untweaked secret d in hex, the form Nostr
// libraries take to sign events and open NIP-44 messages.
func (k *Key) NostrSecretKey() string { return k.Hex() }

// Address returns the agent's P2TR address on network n.
func (k *Key) Address(n Network) string { return EncodeAddress(n, k.output) }

// Sign makes a BIP-340 signature of the 32-byte digest with the tweaked
// secret d', using fresh auxiliary randomness as BIP-340 recommends. It skips
// btcec's self-verification of the signature, which would triple the cost:
// the nonce derivation of BIP-340 cannot produce an invalid signature from a
// valid key.
func (k *Key) Sign(digest [32]byte) ([64]byte, error) {
	var aux [32]byte
	if _, err := rand.Read(aux[:]); err != nil {
		return [64]byte{}, fmt.Errorf("identity: read random: %w", err)
	}
	return k.SignWithAux(digest, aux)
}

// SignUntweaked makes a BIP-340 signature of digest with the untweaked
// secret d, whose public key is P: what a Nostr event's signature is.
// Like Sign it uses fresh auxiliary randomness and skips self-verification.
func (k *Key) SignUntweaked(digest [32]byte) ([64]byte, error) {
	var aux [32]byte
	if _, err := rand.Read(aux[:]); err != nil {
		return [64]byte{}, fmt.Errorf("identity: read random: %w", err)
	}
	return k.nostr.sign(digest, aux)
}

// SignWithAux is Sign with the caller's auxiliary data. With 32 zero bytes it
// reproduces the SNAP reference vectors byte for byte.
func (k *Key) SignWithAux(digest [32]byte, aux [32]byte) ([64]byte, error) {
	return k.snap.sign(digest, aux)
}

// OutputKeyOf returns the BIP-341 key-path output key Q of the x-only
// internal key p: what P2TR(p) encodes. A Nostr event's pubkey is such a p,
// so this checks that an event's author is the agent its message names.
func OutputKeyOf(p [32]byte) ([32]byte, error) {
	pub, err := schnorr.ParsePubKey(p[:])
	if err != nil {
		return [32]byte{}, fmt.Errorf("%w: internal key is not on the curve", ErrInvalidKey)
	}
	var q [32]byte
	copy(q[:], schnorr.SerializePubKey(txscript.ComputeTaprootKeyNoScript(pub)))
	return q, nil
}
