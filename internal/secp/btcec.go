//go:build !libsecp256k1

package secp

import (
	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/btcsuite/btcd/txscript"
)

// Implementation names the secp256k1 code this build uses.
const Implementation = "btcec"

// SecretKey is a secret scalar d with its x-only public key.
type SecretKey struct {
	k *btcec.PrivateKey
	x [32]byte
	s signer // d negated for an odd y, with x: what signing needs
}

// NewSecretKey makes a key from a 32-byte big-endian secret, which must be
// in 1…n−1.
func NewSecretKey(b [32]byte) (*SecretKey, error) {
	var s btcec.ModNScalar
	if overflow := s.SetBytes(&b); overflow != 0 || s.IsZero() {
		return nil, ErrInvalidSecret
	}
	k := btcec.PrivKeyFromScalar(&s)
	sk := &SecretKey{k: k, s: newSigner(k)}
	sk.x = sk.s.pub
	return sk, nil
}

// Bytes returns the secret d, 32 bytes big-endian.
func (k *SecretKey) Bytes() [32]byte { return k.k.Key.Bytes() }

// PublicKey returns the x-only public key of d (BIP-340).
func (k *SecretKey) PublicKey() [32]byte { return k.x }

// TaprootTweak returns the secret of the BIP-341 key-path-only output key
// of k's public key P (no script tree): d negated if P has an odd y, plus
// the TapTweak hash of P.
func (k *SecretKey) TaprootTweak() (*SecretKey, error) {
	t := txscript.TweakTaprootPrivKey(*k.k, nil)
	if t.Key.IsZero() {
		return nil, ErrTweak
	}
	sk := &SecretKey{k: t, s: newSigner(t)}
	sk.x = sk.s.pub
	return sk, nil
}

// Sign makes the BIP-340 signature of digest with auxiliary randomness
// aux: the same bytes as btcec's schnorr.Sign with that aux, without
// deriving the public key again at each call (see signer) and without
// btcec's self-verification, which would triple the cost: the nonce
// derivation of BIP-340 cannot produce an invalid signature from a valid
// key.
func (k *SecretKey) Sign(digest, aux [32]byte) ([64]byte, error) {
	return k.s.sign(digest, aux)
}

// ECDH returns the x coordinate of d·P: the shared secret of k and the
// peer's key P, from which NIP-44 derives its conversation key.
func (k *SecretKey) ECDH(peer *PublicKey) [32]byte {
	if peer.pt.y.IsZero() {
		// No point of secp256k1 has y = 0 (its order is odd): peer is
		// not a key ParsePublicKey made, and its zero point would give
		// an all-zero secret. The libsecp256k1 build panics too.
		panic("secp: ecdh of a key ParsePublicKey did not make")
	}
	var out [32]byte
	copy(out[:], btcec.GenerateSharedSecret(k.k, peer.btcec()))
	return out
}

// PublicKey is an x-only public key lifted to its point (the one with
// even y), ready to verify signatures against. It holds the point once,
// affine (128 bytes in all): the caches of senders' and signers' keys
// keep one per key they know.
type PublicKey struct {
	x  [32]byte
	pt affine // lift_x(x)
	t  *table // pt's table, for a key from Precomputed
}

// ParsePublicKey lifts the x-only key x (BIP-340 lift_x), or fails with
// ErrNotOnCurve.
func ParsePublicKey(x [32]byte) (*PublicKey, error) {
	k := &PublicKey{x: x}
	if k.pt.x.SetBytes(&x) != 0 || !btcec.DecompressY(&k.pt.x, false, &k.pt.y) {
		return nil, ErrNotOnCurve
	}
	k.pt.y.Normalize()
	return k, nil
}

// btcec returns P as btcec's type, for the operations btcec does for
// this package (ECDH, the output key); it is made at each call so that a
// PublicKey does not keep a second copy of its point.
func (p *PublicKey) btcec() *btcec.PublicKey {
	return btcec.NewPublicKey(&p.pt.x, &p.pt.y)
}

// Bytes returns the 32-byte x-only key.
func (p *PublicKey) Bytes() [32]byte { return p.x }

// TaprootOutputKey returns the BIP-341 key-path-only output key Q of P (no
// script tree): P plus its TapTweak hash times G, x-only.
func (p *PublicKey) TaprootOutputKey() ([32]byte, error) {
	var q [32]byte
	copy(q[:], schnorr.SerializePubKey(txscript.ComputeTaprootKeyNoScript(p.btcec())))
	return q, nil
}

// Verify reports whether sig is a valid BIP-340 signature of digest by P.
func (p *PublicKey) Verify(digest [32]byte, sig [64]byte) bool {
	return verify(&p.x, &p.pt, p.t, nil, &digest, &sig)
}

// OutputKey is the BIP-341 key-path-only output key Q = P + τ·G of an
// internal key P (no script tree), kept with P and what lets P verify
// Q's signatures (PublicKey.VerifyOutput): σ·τ and σ, where σ is the sign
// that makes σ·Q the point with even y that BIP-340 verifies against.
// It takes 192 bytes, P's included.
type OutputKey struct {
	p  PublicKey // P, without a table
	x  [32]byte  // Q.x
	tw tweak
}

// TaprootOutput returns P's output key Q, as TaprootOutputKey does, in a
// form P (or its Precomputed copy) verifies Q's signatures with.
func (p *PublicKey) TaprootOutput() (*OutputKey, error) {
	h := tapTweak(p.x)
	var tau btcec.ModNScalar
	if tau.SetBytes(&h) != 0 {
		return nil, ErrTweak
	}
	var q btcec.JacobianPoint
	btcec.ScalarBaseMultNonConst(&tau, &q)
	pt := p.pt.jacobian()
	btcec.AddNonConst(&pt, &q, &q)
	if (q.X.IsZero() && q.Y.IsZero()) || q.Z.IsZero() {
		return nil, ErrTweak
	}
	q.ToAffine()
	o := &OutputKey{p: PublicKey{x: p.x, pt: p.pt}, tw: tweak{st: tau, odd: q.Y.IsOdd()}}
	q.X.PutBytes(&o.x)
	if o.tw.odd {
		o.tw.st.Negate()
	}
	return o, nil
}

// Bytes returns Q, the 32-byte x-only output key.
func (o *OutputKey) Bytes() [32]byte { return o.x }

// Internal returns P, the internal key o is the output key of, which
// verifies o's signatures (VerifyOutput). It holds no table: Precomputed
// makes a copy that does.
func (o *OutputKey) Internal() *PublicKey { return &o.p }

// VerifyOutput reports whether sig is a valid BIP-340 signature of digest
// by o, which must be P's output key (TaprootOutput of P or of a copy of
// P; for any other, it reports false). It gives Verify's answer for the
// key o.Bytes(), computed from P's point, so that a key with a table
// (Precomputed) verifies its output key's signatures about twice as fast
// as well, without a table of its own.
func (p *PublicKey) VerifyOutput(o *OutputKey, digest [32]byte, sig [64]byte) bool {
	if o.p.x != p.x {
		return false
	}
	return verify(&o.x, &p.pt, p.t, &o.tw, &digest, &sig)
}

// Precomputed returns P with a table of its multiples (PrecomputedBytes
// of memory, built in about the time of four verifications) with which
// Verify gives the same answers about twice as fast. It is for a key
// that will verify many signatures; the caller decides which keys earn
// one, and bounds how many it keeps. A key already precomputed is
// returned as it is.
func (p *PublicKey) Precomputed() *PublicKey {
	if p.t != nil {
		return p
	}
	pt := p.pt.jacobian()
	return &PublicKey{x: p.x, pt: p.pt, t: newTable(&pt)}
}
