package secp_test

import (
	"crypto/sha256"
	"math/big"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/btcsuite/btcd/chaincfg/chainhash"
)

// TestVerifyOutputEdges holds VerifyOutput, through P and through P's
// table, to Q's own Verify for the signatures that land on the special
// cases of its formula R = (s − e·στ)·G − σe·P, for keys whose Q has an
// even y and keys whose Q has an odd one: R at infinity (s = e·q, q the
// secret of lift_x(Q)), s − e·στ = 0, the two terms equal (a doubling in
// the P form) and s·G = −e·Q (a doubling in the Q form), s = 0, and r
// and s at and beyond their bounds; and each answer is btcec's too.
func TestVerifyOutputEdges(t *testing.T) {
	n, fp := curveN, curveP
	mod := func(v *big.Int) *big.Int { return v.Mod(v, n) }
	parity := map[bool]int{}
	for i := 0; i < 64 && (parity[false] < 2 || parity[true] < 2); i++ {
		p, o, tweaked, ok := outputKeys(t, sha256.Sum256([]byte{'e', byte(i)}))
		if !ok {
			continue
		}
		odd := yOdd(t, p)
		parity[odd]++
		pre := p.Precomputed()
		qx := o.Bytes()
		// q, the secret of lift_x(Q); στ, σ = −1 when Q has an odd y.
		tb := tweaked.Bytes()
		q := new(big.Int).SetBytes(tb[:])
		if _, pub := btcec.PrivKeyFromBytes(tb[:]); pub.Y().Bit(0) == 1 {
			q = mod(q.Neg(q))
		}
		qb := be32(t, q)
		if _, qp := btcec.PrivKeyFromBytes(qb[:]); be32(t, qp.X()) != qx || qp.Y().Bit(0) != 0 {
			t.Fatalf("q·G is not lift_x(Q) %x", qx)
		}
		px := p.Bytes()
		tau := new(big.Int).SetBytes(chainhash.TaggedHash([]byte("TapTweak"), px[:])[:])
		st := new(big.Int).Set(tau)
		if odd {
			st = mod(st.Neg(st))
		}
		digest := sha256.Sum256([]byte{'d', byte(i)})
		// r: the x of some point, so that only s decides.
		_, rp := btcec.PrivKeyFromBytes([]byte{byte(i) + 1})
		r := be32(t, rp.X())
		e := mod(new(big.Int).SetBytes(chainhash.TaggedHash(chainhash.TagBIP0340Challenge, r[:], qx[:], digest[:])[:]))
		refQ, err := schnorr.ParsePubKey(qx[:])
		if err != nil {
			t.Fatal(err)
		}
		check := func(what string, sig [64]byte) bool {
			t.Helper()
			got := checkOutput(t, what, p, pre, o, digest, sig)
			if want := btcecVerify(refQ, digest, sig); got != want {
				t.Fatalf("%s: %v, btcec's verification by Q %v", what, got, want)
			}
			return got
		}
		sigOf := func(r [32]byte, s *big.Int) (sig [64]byte) {
			copy(sig[:32], r[:])
			b := be32(t, s)
			copy(sig[32:], b[:])
			return sig
		}
		cases := map[string]*big.Int{
			"R at infinity":   mod(new(big.Int).Mul(e, q)),
			"s − e·στ = 0":    mod(new(big.Int).Mul(e, st)),
			"P-form doubling": mod(new(big.Int).Mul(e, new(big.Int).Sub(new(big.Int).Lsh(st, 1), q))),
			"Q-form doubling": mod(new(big.Int).Neg(new(big.Int).Mul(e, q))),
			"s = 0":           new(big.Int),
			"s = n − 1":       new(big.Int).Sub(n, big.NewInt(1)),
			"s = n":           new(big.Int).Set(n),
			"s = n + e·στ":    new(big.Int).Add(n, mod(new(big.Int).Mul(e, st))),
		}
		for what, s := range cases {
			if s.BitLen() > 256 {
				continue
			}
			if check(what, sigOf(r, s)) {
				t.Fatalf("%s: verifies", what)
			}
		}
		// A valid signature with r made p or more (r + p, when it fits),
		// and r = p, p − 1, 2²⁵⁶ − 1.
		sig, err := tweaked.Sign(digest, [32]byte{})
		if err != nil {
			t.Fatal(err)
		}
		s := new(big.Int).SetBytes(sig[32:])
		if !check("valid", sig) {
			t.Fatal("a valid signature does not verify")
		}
		rv := new(big.Int).SetBytes(sig[:32])
		for what, r := range map[string]*big.Int{
			"r + p":      new(big.Int).Add(rv, fp),
			"r = p":      new(big.Int).Set(fp),
			"r = p − 1":  new(big.Int).Sub(fp, big.NewInt(1)),
			"r = 2²⁵⁶−1": new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1)),
			"r = 0":      new(big.Int),
		} {
			if r.BitLen() > 256 {
				continue
			}
			check(what, sigOf(be32(t, r), s))
		}
	}
	if parity[false] < 2 || parity[true] < 2 {
		t.Fatalf("output keys by parity of y: %v; want both kinds tested", parity)
	}
}
