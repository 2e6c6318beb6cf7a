//go:build libsecp256k1

package secp

import (
	"crypto/rand"
	"errors"
	"fmt"
	"sync"

	"github.com/snapnode/snapnode/internal/libsecp256k1"
)

// Implementation names the secp256k1 code this build uses.
const Implementation = "libsecp256k1"

// shared is the process's one libsecp256k1 context, made and randomized
// on first use and only read afterwards (the library allows concurrent
// reads of a context). It is package state because every key and every
// verification of the process needs the same read-only value, as
// crypto/rand's reader is.
var shared = sync.OnceValue(func() *libsecp256k1.Context {
	var seed [32]byte
	rand.Read(seed[:]) // never fails: it panics where there is no source
	c, err := libsecp256k1.NewContext(seed)
	if err != nil {
		panic("secp: " + err.Error())
	}
	return c
})

// SecretKey is a secret scalar d with its x-only public key.
type SecretKey struct {
	kp *libsecp256k1.Keypair
	d  [32]byte
	x  [32]byte
}

// NewSecretKey makes a key from a 32-byte big-endian secret, which must be
// in 1…n−1.
func NewSecretKey(b [32]byte) (*SecretKey, error) {
	c := shared()
	kp, err := c.Keypair(b)
	if err != nil {
		return nil, ErrInvalidSecret
	}
	return &SecretKey{kp: kp, d: b, x: c.XOnly(kp)}, nil
}

// Bytes returns the secret d, 32 bytes big-endian.
func (k *SecretKey) Bytes() [32]byte { return k.d }

// PublicKey returns the x-only public key of d (BIP-340).
func (k *SecretKey) PublicKey() [32]byte { return k.x }

// TaprootTweak returns the secret of the BIP-341 key-path-only output key
// of k's public key P (no script tree): d negated if P has an odd y, plus
// the TapTweak hash of P.
func (k *SecretKey) TaprootTweak() (*SecretKey, error) {
	c := shared()
	kp, err := c.TweakKeypair(k.kp, tapTweak(k.x))
	if err != nil {
		return nil, ErrTweak
	}
	return &SecretKey{kp: kp, d: c.Secret(kp), x: c.XOnly(kp)}, nil
}

// Sign makes the BIP-340 signature of digest with auxiliary randomness
// aux.
func (k *SecretKey) Sign(digest, aux [32]byte) ([64]byte, error) {
	sig, err := shared().Sign(k.kp, digest, aux)
	if err != nil {
		return sig, fmt.Errorf("secp: sign: %w", err)
	}
	return sig, nil
}

// ECDH returns the x coordinate of d·P: the shared secret of k and the
// peer's key P, from which NIP-44 derives its conversation key.
func (k *SecretKey) ECDH(peer *PublicKey) [32]byte {
	x, err := shared().ECDHX(k.d, peer.x)
	if err != nil {
		// Both keys were checked when they were made.
		panic("secp: ecdh of checked keys: " + err.Error())
	}
	return x
}

// PublicKey is an x-only public key lifted to its point (the one with
// even y), ready to verify signatures against.
type PublicKey struct {
	pk *libsecp256k1.XOnlyPublicKey
	x  [32]byte
}

// ParsePublicKey lifts the x-only key x (BIP-340 lift_x), or fails with
// ErrNotOnCurve.
func ParsePublicKey(x [32]byte) (*PublicKey, error) {
	pk, err := shared().ParseXOnly(x)
	if err != nil {
		return nil, ErrNotOnCurve
	}
	return &PublicKey{pk: pk, x: x}, nil
}

// Bytes returns the 32-byte x-only key.
func (p *PublicKey) Bytes() [32]byte { return p.x }

// TaprootOutputKey returns the BIP-341 key-path-only output key Q of P (no
// script tree): P plus its TapTweak hash times G, x-only.
func (p *PublicKey) TaprootOutputKey() ([32]byte, error) {
	q, err := shared().TweakXOnly(p.pk, tapTweak(p.x))
	if errors.Is(err, libsecp256k1.ErrTweak) {
		return q, ErrTweak
	}
	return q, err
}

// Verify reports whether sig is a valid BIP-340 signature of digest by P.
func (p *PublicKey) Verify(digest [32]byte, sig [64]byte) bool {
	return shared().Verify(p.pk, digest, sig)
}

// OutputKey is the BIP-341 key-path-only output key Q of an internal key
// P (no script tree), lifted, kept with P, for PublicKey.VerifyOutput.
type OutputKey struct {
	p PublicKey // P
	q PublicKey // Q
}

// TaprootOutput returns P's output key Q, as TaprootOutputKey does, in a
// form P verifies Q's signatures with.
func (p *PublicKey) TaprootOutput() (*OutputKey, error) {
	x, err := p.TaprootOutputKey()
	if err != nil {
		return nil, err
	}
	q, err := ParsePublicKey(x)
	if err != nil {
		return nil, ErrTweak
	}
	return &OutputKey{p: *p, q: *q}, nil
}

// Bytes returns Q, the 32-byte x-only output key.
func (o *OutputKey) Bytes() [32]byte { return o.q.x }

// Internal returns P, the internal key o is the output key of, which
// verifies o's signatures (VerifyOutput).
func (o *OutputKey) Internal() *PublicKey { return &o.p }

// VerifyOutput reports whether sig is a valid BIP-340 signature of digest
// by o, which must be P's output key (TaprootOutput of P; for any other,
// it reports false): in this build, Q's own verification.
func (p *PublicKey) VerifyOutput(o *OutputKey, digest [32]byte, sig [64]byte) bool {
	return o.p.x == p.x && o.q.Verify(digest, sig)
}

// PrecomputedBytes is the memory a key returned by Precomputed holds
// beyond a plain key's: none in this build.
const PrecomputedBytes = 0

// Precomputed returns p: libsecp256k1 keeps no table per key (its own
// verification is already faster than the btcec build's with one).
func (p *PublicKey) Precomputed() *PublicKey { return p }
