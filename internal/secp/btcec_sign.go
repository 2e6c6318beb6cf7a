//go:build !libsecp256k1

package secp

import (
	"crypto/sha256"
	"errors"
	"fmt"

	"github.com/btcsuite/btcd/btcec/v2"
)

// BIP-340's tagged hashes are SHA-256(SHA-256(tag) ‖ SHA-256(tag) ‖ data);
// these are the SHA-256 of each tag, computed once.
var (
	tagAux       = sha256.Sum256([]byte("BIP0340/aux"))
	tagNonce     = sha256.Sum256([]byte("BIP0340/nonce"))
	tagChallenge = sha256.Sum256([]byte("BIP0340/challenge"))
)

// errZeroNonce: BIP-340's nonce came out zero, which happens with
// probability 2⁻²⁵⁶; BIP-340 says to fail.
var errZeroNonce = errors.New("BIP-340 nonce is zero")

// signer holds what BIP-340 signing derives from a secret before it looks
// at the message: the scalar d, negated when its point has an odd y, and
// the x-only public key P. btcec's schnorr.Sign derives both again at
// every call, a base-point multiplication that is about 40 % of a
// signature; a signer computes them once, when the key is made.
type signer struct {
	d   btcec.ModNScalar
	pub [32]byte
}

// newSigner prepares priv, whose scalar must not be zero, for signing.
func newSigner(priv *btcec.PrivateKey) signer {
	var s signer
	s.d.Set(&priv.Key)
	compressed := priv.PubKey().SerializeCompressed()
	if compressed[0] == 0x03 { // odd y
		s.d.Negate()
	}
	copy(s.pub[:], compressed[1:])
	return s
}

// sign makes the BIP-340 signature of the 32-byte digest with auxiliary
// data aux, following BIP-340's signing algorithm step by step; it
// produces the same bytes as btcec's schnorr.Sign with
// schnorr.CustomNonce(aux) and schnorr.FastSign().
func (s *signer) sign(digest, aux [32]byte) ([64]byte, error) {
	var sig [64]byte
	// t = bytes(d) xor hash_BIP0340/aux(a)
	var buf [64 + 32 + 32 + 32]byte
	n := copy(buf[:], tagAux[:])
	n += copy(buf[n:], tagAux[:])
	n += copy(buf[n:], aux[:])
	t := sha256.Sum256(buf[:n])
	var d [32]byte
	s.d.PutBytes(&d)
	for i := range t {
		t[i] ^= d[i]
	}
	clear(d[:])
	// k' = int(hash_BIP0340/nonce(t ‖ bytes(P) ‖ m)) mod n; fail if zero
	n = copy(buf[:], tagNonce[:])
	n += copy(buf[n:], tagNonce[:])
	n += copy(buf[n:], t[:])
	n += copy(buf[n:], s.pub[:])
	n += copy(buf[n:], digest[:])
	rand := sha256.Sum256(buf[:n])
	clear(t[:])
	clear(buf[:])
	var k btcec.ModNScalar
	k.SetBytes(&rand)
	clear(rand[:])
	if k.IsZero() {
		return sig, fmt.Errorf("secp: sign: %w", errZeroNonce)
	}
	// R = k'·G; k = k' if R has an even y, else n − k'
	var r btcec.JacobianPoint
	btcec.ScalarBaseMultNonConst(&k, &r)
	r.ToAffine()
	if r.Y.IsOdd() {
		k.Negate()
	}
	r.X.PutBytesUnchecked(sig[:32])
	// e = int(hash_BIP0340/challenge(bytes(R) ‖ bytes(P) ‖ m)) mod n
	n = copy(buf[:], tagChallenge[:])
	n += copy(buf[n:], tagChallenge[:])
	n += copy(buf[n:], sig[:32])
	n += copy(buf[n:], s.pub[:])
	n += copy(buf[n:], digest[:])
	eh := sha256.Sum256(buf[:n])
	var e btcec.ModNScalar
	e.SetBytes(&eh)
	// sig = bytes(R) ‖ bytes((k + e·d) mod n)
	e.Mul(&s.d).Add(&k)
	k.Zero()
	e.PutBytesUnchecked(sig[32:])
	return sig, nil
}
