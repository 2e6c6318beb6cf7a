//go:build !libsecp256k1

package secp

import (
	"encoding/binary"
	"unsafe"

	"github.com/btcsuite/btcd/chaincfg/chainhash"
	"github.com/decred/dcrd/dcrec/secp256k1/v4"
)

// BIP-340 verification is written here from decred's secp256k1 primitives
// (the field, the scalars, the Jacobian points and the base point's
// tables, which btcec itself is built on) because btcec offers neither a
// verification over a point already lifted (schnorr.Signature.Verify
// serializes the key and lifts it again, a field square root, at every
// call) nor any precomputation for a key that verifies many signatures.
// verify follows BIP-340's Verify step by step; TestVerifyAgainstBtcec
// and FuzzVerify hold it to btcec's answer.

// window is the width in bits of a digit of the challenge e when e·P is
// taken from a key's table: signed digits in −2^(window−1)…2^(window−1),
// so a window of the table holds 2^(window−1) multiples. Measured in CPU
// time per operation, windows of 4, 5 and 6 bits made verification about
// 2.1, 2.1 and 2.4 times faster than the plain path (61, 50 and 42
// additions for e·P instead of a variable-base multiplication), for
// tables of 41.6, 66.6 and 110 KB built in the time of 4, 8.5 and 13
// verifications: 4 bits give nearly all the gain for the least memory and
// the cheapest build.
const window = 4

const (
	// windows is the number of signed digits of a 256-bit scalar: one
	// more than 256/window, for the carry out of the top window.
	windows   = 256/window + 1
	perWindow = 1 << (window - 1)
)

// affine is a point with Z = 1, normalized, as x and y.
type affine struct{ x, y secp256k1.FieldVal }

// jacobian returns a as a Jacobian point, Z = 1.
func (a *affine) jacobian() secp256k1.JacobianPoint {
	var j secp256k1.JacobianPoint
	j.X.Set(&a.x)
	j.Y.Set(&a.y)
	j.Z.SetInt(1)
	return j
}

// table holds, for a point P, the multiples d·2^(window·i)·P for every
// window i and every d in 1…2^(window−1), affine, so that e·P is one
// addition per nonzero signed digit of e and no doubling, each addition
// taking decred's faster path for an operand with Z = 1.
type table [windows][perWindow]affine

// PrecomputedBytes is the memory a key returned by Precomputed holds
// beyond a plain key's: its table, 41,600 bytes (65 windows of 8 affine
// points of 80 bytes).
const PrecomputedBytes = int(unsafe.Sizeof(table{}))

// newTable builds the table of the affine point p: the multiples in
// Jacobian coordinates (additions and one doubling per window), then one
// batch inversion (Montgomery's trick) that makes them all affine. It
// costs about as much as four verifications (BenchmarkPrecompute).
func newTable(p *secp256k1.JacobianPoint) *table {
	const n = windows * perWindow
	jac := make([]secp256k1.JacobianPoint, n)
	var base secp256k1.JacobianPoint
	base.Set(p)
	for i := range windows {
		row := jac[i*perWindow : (i+1)*perWindow]
		row[0].Set(&base)
		for j := 1; j < perWindow; j++ {
			secp256k1.AddNonConst(&row[j-1], &base, &row[j])
		}
		// 2^window·base, the next window's base, is twice its last
		// multiple 2^(window−1)·base.
		secp256k1.DoubleNonConst(&row[perWindow-1], &base)
	}
	// No multiple is the point at infinity: each is d·2^k·P with d below
	// 2^window, and P's order n is a prime that divides no such number.
	// So every Z is nonzero and invertible. prefix[i] = Z₀·…·Zᵢ.
	prefix := make([]secp256k1.FieldVal, n)
	prefix[0].Set(&jac[0].Z)
	for i := 1; i < n; i++ {
		prefix[i].Mul2(&prefix[i-1], &jac[i].Z).Normalize()
	}
	var inv secp256k1.FieldVal // (Z₀·…·Zᵢ)⁻¹, walking i down
	inv.Set(&prefix[n-1]).Inverse()
	t := new(table)
	for i := n - 1; i >= 0; i-- {
		var zInv, zInv2 secp256k1.FieldVal
		if i > 0 {
			zInv.Mul2(&inv, &prefix[i-1]) // Zᵢ⁻¹
			inv.Mul(&jac[i].Z)            // (Z₀·…·Zᵢ₋₁)⁻¹
		} else {
			zInv.Set(&inv)
		}
		zInv2.SquareVal(&zInv)
		a := &t[i/perWindow][i%perWindow]
		a.x.Mul2(&jac[i].X, &zInv2).Normalize()
		a.y.Mul2(&jac[i].Y, zInv2.Mul(&zInv)).Normalize()
	}
	return t
}

// digits returns the signed digits of the 256-bit big-endian scalar k in
// base 2^window, least significant first: k = Σ dᵢ·2^(window·i), each dᵢ
// in −2^(window−1)+1…2^(window−1).
func digits(k *[32]byte) [windows]int32 {
	var limbs [5]uint64 // little-endian; the fifth, zero, for the top window
	for i := range 4 {
		limbs[i] = binary.BigEndian.Uint64(k[24-8*i:])
	}
	var d [windows]int32
	var carry uint64
	for i := range d {
		bit := i * window
		v := limbs[bit/64] >> (bit % 64)
		if bit%64+window > 64 {
			v |= limbs[bit/64+1] << (64 - bit%64)
		}
		v = v&(1<<window-1) + carry
		carry = 0
		if v > perWindow {
			d[i] = int32(v) - 1<<window
			carry = 1
		} else {
			d[i] = int32(v)
		}
	}
	// The top window holds at most window−1 bits of k, so it never
	// carries out.
	return d
}

// mulAdd adds k·P to acc, P being the table's point.
func (t *table) mulAdd(k *secp256k1.ModNScalar, acc *secp256k1.JacobianPoint) {
	kb := k.Bytes()
	for i, d := range digits(&kb) {
		if d == 0 {
			continue
		}
		var q secp256k1.JacobianPoint
		if d > 0 {
			a := &t[i][d-1]
			q.X.Set(&a.x)
			q.Y.Set(&a.y)
		} else {
			a := &t[i][-d-1]
			q.X.Set(&a.x)
			q.Y.NegateVal(&a.y, 1).Normalize()
		}
		q.Z.SetInt(1)
		secp256k1.AddNonConst(acc, &q, acc)
	}
}

// tweak is what verifies the signatures of an output key Q = P + τ·G
// (BIP-341) through its internal key P: BIP-340 verifies against
// lift_x(Q.x) = σ·Q, σ = −1 when Q has an odd y (odd), else 1, so
// R = s·G − e·σ·Q = (s − e·στ)·G − σe·P. st is σ·τ mod n.
type tweak struct {
	st  secp256k1.ModNScalar
	odd bool
}

// verify reports whether sig is a valid BIP-340 signature of digest by
// the key x. With tw nil, x is p's (lifted, even y); otherwise x is the
// output key tw describes, of the internal key p. t, when not nil, is p's
// table.
func verify(x *[32]byte, p *affine, t *table, tw *tweak, digest *[32]byte, sig *[64]byte) bool {
	// r = int(sig[0:32]); fail if r ≥ p. s = int(sig[32:64]); fail if
	// s ≥ n. (btcec's ParseSignature reduces an s ≥ n instead.)
	var r secp256k1.FieldVal
	if r.SetByteSlice(sig[:32]) {
		return false
	}
	var s secp256k1.ModNScalar
	if s.SetByteSlice(sig[32:]) {
		return false
	}
	// e = int(hash_BIP0340/challenge(r ‖ x ‖ m)) mod n.
	h := chainhash.TaggedHash(chainhash.TagBIP0340Challenge, sig[:32], x[:], digest[:])
	var e secp256k1.ModNScalar
	e.SetBytes((*[32]byte)(h))
	if tw != nil {
		// s − e·στ, and −σe as the multiple of P.
		var est secp256k1.ModNScalar
		s.Add(est.Mul2(&e, &tw.st).Negate())
		if !tw.odd {
			e.Negate()
		}
	} else {
		e.Negate()
	}
	// R = s·G + e·P, with s and e as made above: s·G − e·P for a plain
	// key, (s − e·στ)·G − σe·P for an output key.
	var R secp256k1.JacobianPoint
	secp256k1.ScalarBaseMultNonConst(&s, &R)
	if t != nil {
		t.mulAdd(&e, &R)
	} else {
		var eP secp256k1.JacobianPoint
		pj := p.jacobian()
		secp256k1.ScalarMultNonConst(&e, &pj, &eP)
		secp256k1.AddNonConst(&R, &eP, &R)
	}
	// Fail if R is infinite, if R.y is odd, or if R.x ≠ r.
	if (R.X.IsZero() && R.Y.IsZero()) || R.Z.IsZero() {
		return false
	}
	R.ToAffine()
	return !R.Y.IsOdd() && R.X.Equals(&r)
}
