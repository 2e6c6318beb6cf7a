//go:build !libsecp256k1

package secp

import (
	"crypto/sha256"
	"math/big"
	"testing"

	"github.com/decred/dcrd/dcrec/secp256k1/v4"
)

// curveOrder is secp256k1's group order n.
var curveOrder = secp256k1.S256().N

// TestDigits: the signed digits of a 256-bit scalar, least significant
// first, sum back to it, each in −7…8, for the scalars at the edges of
// the carries (every nibble 8, 9 or F, the top nibble carrying into the
// 65th window) and a few others.
func TestDigits(t *testing.T) {
	var edges [][32]byte
	for _, fill := range []byte{0x00, 0x11, 0x77, 0x78, 0x87, 0x88, 0x89, 0x98, 0x99, 0xF8, 0x8F, 0xFF} {
		var k [32]byte
		for i := range k {
			k[i] = fill
		}
		edges = append(edges, k)
	}
	for _, v := range []*big.Int{big.NewInt(1), big.NewInt(8), big.NewInt(9), big.NewInt(16), big.NewInt(0x88), new(big.Int).Sub(curveOrder, big.NewInt(1)), new(big.Int).Lsh(big.NewInt(1), 255)} {
		edges = append(edges, [32]byte(v.FillBytes(make([]byte, 32))))
	}
	for i := range 64 {
		edges = append(edges, sha256.Sum256([]byte{byte(i)}))
	}
	for _, k := range edges {
		d := digits(&k)
		sum := new(big.Int)
		for i := len(d) - 1; i >= 0; i-- {
			if d[i] < -(perWindow-1) || d[i] > perWindow {
				t.Fatalf("k = %x: digit %d is %d, outside −%d…%d", k, i, d[i], perWindow-1, perWindow)
			}
			sum.Lsh(sum, window).Add(sum, big.NewInt(int64(d[i])))
		}
		if want := new(big.Int).SetBytes(k[:]); sum.Cmp(want) != 0 {
			t.Fatalf("k = %x: the digits sum to %x", k, sum)
		}
	}
}

// edgePoints returns points whose tables the tests check: G, a point with
// x = 1 or the smallest x on the curve, the one with the largest x below
// p, and a few keys, each with even y as ParsePublicKey lifts them.
func edgePoints(t *testing.T) []*PublicKey {
	t.Helper()
	var keys []*PublicKey
	lift := func(x *big.Int) bool {
		p, err := ParsePublicKey([32]byte(x.FillBytes(make([]byte, 32))))
		if err == nil {
			keys = append(keys, p)
		}
		return err == nil
	}
	g := secp256k1.S256().Gx
	lift(g)
	for x := big.NewInt(1); !lift(x); x.Add(x, big.NewInt(1)) {
	}
	fieldP := secp256k1.S256().P
	for x := new(big.Int).Sub(fieldP, big.NewInt(1)); !lift(x); x.Sub(x, big.NewInt(1)) {
	}
	for i := range 2 {
		k, err := NewSecretKey(sha256.Sum256([]byte{'k', byte(i)}))
		if err != nil {
			t.Fatal(err)
		}
		lift(new(big.Int).SetBytes(k.x[:]))
	}
	return keys
}

// scalar returns v mod n.
func scalar(v *big.Int) *secp256k1.ModNScalar {
	var s secp256k1.ModNScalar
	b := new(big.Int).Mod(v, curveOrder).FillBytes(make([]byte, 32))
	s.SetByteSlice(b)
	return &s
}

// checkMulAdd compares t.mulAdd(k, acc) with decred's variable-base
// multiplication (GLV and NAF, another algorithm) added to acc.
func checkMulAdd(t *testing.T, p *PublicKey, tab *table, k *secp256k1.ModNScalar, acc *secp256k1.JacobianPoint) {
	t.Helper()
	var want, kP secp256k1.JacobianPoint
	secp256k1.ScalarMultNonConst(k, p.jacobian(), &kP)
	secp256k1.AddNonConst(acc, &kP, &want)
	var got secp256k1.JacobianPoint
	got.Set(acc)
	tab.mulAdd(k, &got)
	infinite := func(q *secp256k1.JacobianPoint) bool {
		return (q.X.IsZero() && q.Y.IsZero()) || q.Z.IsZero()
	}
	if infinite(&got) || infinite(&want) {
		if infinite(&got) != infinite(&want) {
			t.Fatalf("key %x, k = %x: table gives infinity %v, decred %v", p.x, k.Bytes(), infinite(&got), infinite(&want))
		}
		return
	}
	got.ToAffine()
	want.ToAffine()
	if !got.X.Equals(&want.X) || !got.Y.Equals(&want.Y) {
		t.Fatalf("key %x, k = %x: table gives (%v, %v), decred (%v, %v)", p.x, k.Bytes(), got.X, got.Y, want.X, want.Y)
	}
}

// TestMulAddEdges holds a table's k·P, added to an accumulator, to
// decred's for the scalars whose digits sit at the edges (0, 8, −7, the
// carry through every window, n − 1) and for accumulators that make an
// addition a doubling or reach the point at infinity on the way: acc
// equal to, or opposite to, the first multiple added, and acc = −k·P.
// Decred's AddNonConst is called with the result aliasing its first
// operand, as decred itself does in its base-point multiplication.
func TestMulAddEdges(t *testing.T) {
	n := curveOrder
	var ks []*big.Int
	for _, v := range []int64{0, 1, 2, 7, 8, 9, 15, 16, 17, 0x88, 0x89, 0x99} {
		ks = append(ks, big.NewInt(v))
	}
	for _, v := range []int64{1, 2, 7, 8, 9, 16, 17} {
		ks = append(ks, new(big.Int).Sub(n, big.NewInt(v)))
	}
	for _, fill := range []byte{0x77, 0x88, 0x99, 0xFF} {
		b := make([]byte, 32)
		for i := range b {
			b[i] = fill
		}
		ks = append(ks, new(big.Int).SetBytes(b)) // taken mod n
	}
	ks = append(ks, new(big.Int).Rsh(n, 1), new(big.Int).Lsh(big.NewInt(1), 252), new(big.Int).Lsh(big.NewInt(1), 255))
	for i := range 8 {
		h := sha256.Sum256([]byte{'s', byte(i)})
		ks = append(ks, new(big.Int).SetBytes(h[:]))
	}
	for _, p := range edgePoints(t) {
		tab := newTable(p.jacobian())
		for _, kv := range ks {
			k := scalar(kv)
			var inf secp256k1.JacobianPoint
			checkMulAdd(t, p, tab, k, &inf)
			var aG secp256k1.JacobianPoint
			secp256k1.ScalarBaseMultNonConst(scalar(big.NewInt(12345)), &aG)
			checkMulAdd(t, p, tab, k, &aG)
			// acc = −k·P: the sum is the point at infinity.
			var negK secp256k1.ModNScalar
			negK.NegateVal(k)
			var neg secp256k1.JacobianPoint
			secp256k1.ScalarMultNonConst(&negK, p.jacobian(), &neg)
			checkMulAdd(t, p, tab, k, &neg)
			// acc = ±(the first multiple added): a doubling, or the
			// point at infinity, at the first addition.
			kb := k.Bytes()
			for i, d := range digits(&kb) {
				if d == 0 {
					continue
				}
				first := new(big.Int).Lsh(big.NewInt(int64(d)), uint(window*i))
				for _, m := range []*big.Int{first, new(big.Int).Neg(first)} {
					var acc secp256k1.JacobianPoint
					secp256k1.ScalarMultNonConst(scalar(m), p.jacobian(), &acc)
					checkMulAdd(t, p, tab, k, &acc)
				}
				break
			}
		}
	}
}

// FuzzMulAdd holds a table's k·P + a·G to decred's for any k and a, and
// for a = 0 (the sum from the point at infinity) and a·G = −k·P.
func FuzzMulAdd(f *testing.F) {
	k, err := NewSecretKey(sha256.Sum256([]byte("fuzz mulAdd")))
	if err != nil {
		f.Fatal(err)
	}
	p, err := ParsePublicKey(k.x)
	if err != nil {
		f.Fatal(err)
	}
	tab := newTable(p.jacobian())
	f.Add(make([]byte, 32), make([]byte, 32), byte(0))
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 0xBA, 0xAE, 0xDC, 0xE6, 0xAF, 0x48, 0xA0, 0x3B, 0xBF, 0xD2, 0x5E, 0x8C, 0xD0, 0x36, 0x41, 0x40}, []byte{1}, byte(1))
	f.Fuzz(func(t *testing.T, kb, ab []byte, mode byte) {
		if len(kb) > 32 || len(ab) > 32 {
			return
		}
		k := scalar(new(big.Int).SetBytes(kb))
		var acc secp256k1.JacobianPoint
		switch mode % 3 {
		case 0:
			secp256k1.ScalarBaseMultNonConst(scalar(new(big.Int).SetBytes(ab)), &acc)
		case 1: // acc = −k·P + a·P: near the point at infinity
			var m secp256k1.ModNScalar
			m.NegateVal(k).Add(scalar(new(big.Int).SetBytes(ab)))
			secp256k1.ScalarMultNonConst(&m, p.jacobian(), &acc)
		case 2: // acc at infinity
		}
		checkMulAdd(t, p, tab, k, &acc)
	})
}

// jacobian returns p's point as a Jacobian point, for the tests that
// multiply it directly.
func (p *PublicKey) jacobian() *secp256k1.JacobianPoint {
	j := p.pt.jacobian()
	return &j
}
