package secp_test

import (
	"crypto/rand"
	"math/big"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/btcsuite/btcd/chaincfg/chainhash"

	"github.com/snapnode/snapnode/internal/secp"
)

// curveN is secp256k1's group order n, curveP its field size p.
var (
	curveN = btcec.S256().N
	curveP = btcec.S256().P
)

// btcecVerify is the reference: btcec's schnorr.Verify, with BIP-340's
// rejection of s ≥ n, which btcec's ParseSignature leaves out (it reduces
// s mod n).
func btcecVerify(pub *btcec.PublicKey, digest [32]byte, sig [64]byte) bool {
	if new(big.Int).SetBytes(sig[32:]).Cmp(curveN) >= 0 {
		return false
	}
	s, err := schnorr.ParseSignature(sig[:])
	return err == nil && s.Verify(digest[:], pub)
}

// checkVerify compares Verify, through the plain key and through the
// precomputed one (pre, when not nil), with btcec's answer for x.
func checkVerify(t *testing.T, what string, x [32]byte, pre *secp.PublicKey, digest [32]byte, sig [64]byte) bool {
	t.Helper()
	ref, refErr := schnorr.ParsePubKey(x[:])
	p, err := secp.ParsePublicKey(x)
	if (err == nil) != (refErr == nil) {
		t.Fatalf("%s: ParsePublicKey(%x) err = %v, btcec %v", what, x, err, refErr)
	}
	if err != nil {
		return false
	}
	want := btcecVerify(ref, digest, sig)
	if got := p.Verify(digest, sig); got != want {
		t.Fatalf("%s: Verify = %v, btcec %v (key %x, digest %x, sig %x)", what, got, want, x, digest, sig)
	}
	if pre != nil {
		if got := pre.Verify(digest, sig); got != want {
			t.Fatalf("%s: Precomputed().Verify = %v, btcec %v (key %x, digest %x, sig %x)", what, got, want, x, digest, sig)
		}
	}
	return want
}

func flip(b []byte, bit int) { b[bit/8] ^= 1 << (bit % 8) }

func be32(t *testing.T, v *big.Int) (b [32]byte) {
	t.Helper()
	if v.Sign() < 0 || v.BitLen() > 256 {
		t.Fatalf("%v does not fit 32 bytes", v)
	}
	return [32]byte(v.FillBytes(make([]byte, 32)))
}

// TestVerifyAgainstBtcec signs random digests with random btcec keys and
// checks that the package's Verify, through a plain key and a precomputed
// one, answers as btcec does for each signature and for each one-bit
// change of its r, its s, its digest and its key.
func TestVerifyAgainstBtcec(t *testing.T) {
	// Under the race detector or -short: one key, one signature, and
	// every 16th bit.
	keys, sigs, step := 2, 2, 1
	if testing.Short() || secp.RaceEnabled {
		keys, sigs, step = 1, 1, 16
	}
	for range keys {
		priv, err := btcec.NewPrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		x := [32]byte(schnorr.SerializePubKey(priv.PubKey()))
		p, err := secp.ParsePublicKey(x)
		if err != nil {
			t.Fatal(err)
		}
		pre := p.Precomputed()
		if pre.Precomputed() != pre {
			t.Error("Precomputed of a precomputed key made another")
		}
		for range sigs {
			var digest [32]byte
			rand.Read(digest[:])
			s, err := schnorr.Sign(priv, digest[:])
			if err != nil {
				t.Fatal(err)
			}
			sig := [64]byte(s.Serialize())
			if !checkVerify(t, "valid", x, pre, digest, sig) {
				t.Fatal("a valid signature does not verify")
			}
			for bit := 0; bit < 512; bit += step {
				bad := sig
				flip(bad[:], bit)
				checkVerify(t, "sig bit", x, pre, digest, bad)
			}
			for bit := 0; bit < 256; bit += step {
				bad := digest
				flip(bad[:], bit)
				checkVerify(t, "digest bit", x, pre, bad, sig)
			}
		}
		// A table per changed key costs several verifications: every
		// bit through the plain key, every 16th through a table too.
		var digest [32]byte
		rand.Read(digest[:])
		s, err := schnorr.Sign(priv, digest[:])
		if err != nil {
			t.Fatal(err)
		}
		sig := [64]byte(s.Serialize())
		for bit := 0; bit < 256; bit += step {
			bad := x
			flip(bad[:], bit)
			var badPre *secp.PublicKey
			if bit%(16*step) == 0 {
				if q, err := secp.ParsePublicKey(bad); err == nil {
					badPre = q.Precomputed()
				}
			}
			checkVerify(t, "key bit", bad, badPre, digest, sig)
		}
	}
}

// TestVerifyOutOfRange: r ≥ p and s ≥ n fail, whatever the rest, as
// BIP-340 says; so does a signature whose R has an odd y or is the point
// at infinity.
func TestVerifyOutOfRange(t *testing.T) {
	priv, err := btcec.NewPrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	// d with an even-y P, as BIP-340 signs.
	d := new(big.Int).SetBytes(priv.Serialize())
	if priv.PubKey().SerializeCompressed()[0] == 0x03 {
		d.Sub(curveN, d)
	}
	x := [32]byte(schnorr.SerializePubKey(priv.PubKey()))
	p, err := secp.ParsePublicKey(x)
	if err != nil {
		t.Fatal(err)
	}
	pre := p.Precomputed()
	var digest [32]byte
	rand.Read(digest[:])
	s, err := schnorr.Sign(priv, digest[:])
	if err != nil {
		t.Fatal(err)
	}
	sig := [64]byte(s.Serialize())
	max256 := new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 256), big.NewInt(1))
	one := big.NewInt(1)

	for _, r := range []*big.Int{curveP, new(big.Int).Add(curveP, one), max256} {
		bad := sig
		rb := be32(t, r)
		copy(bad[:32], rb[:])
		if checkVerify(t, "r ≥ p", x, pre, digest, bad) {
			t.Errorf("r = %x verifies", rb)
		}
	}
	sv := new(big.Int).SetBytes(sig[32:])
	for _, v := range []*big.Int{curveN, new(big.Int).Add(curveN, one), max256, new(big.Int).Add(sv, curveN)} {
		if v.BitLen() > 256 {
			continue // s + n does not fit: the usual case
		}
		bad := sig
		sb := be32(t, v)
		copy(bad[32:], sb[:])
		if checkVerify(t, "s ≥ n", x, pre, digest, bad) {
			t.Errorf("s = %x verifies", sb)
		}
	}

	// challenge is e = H(r ‖ P.x ‖ m) mod n.
	challenge := func(r [32]byte) *big.Int {
		h := chainhash.TaggedHash(chainhash.TagBIP0340Challenge, r[:], x[:], digest[:])
		return new(big.Int).Mod(new(big.Int).SetBytes(h[:]), curveN)
	}
	// R = k·G with an odd y, and s = k + e·d: s·G − e·P = R, which has
	// the right x but not an even y. The same with −k is valid.
	for {
		var kb [32]byte
		rand.Read(kb[:])
		k := new(big.Int).Mod(new(big.Int).SetBytes(kb[:]), curveN)
		if k.Sign() == 0 {
			continue
		}
		kk := be32(t, k)
		kx, ky := btcec.S256().ScalarBaseMult(kk[:])
		if ky.Bit(0) == 0 {
			continue
		}
		r := be32(t, kx)
		e := challenge(r)
		odd := [64]byte(append(r[:], make([]byte, 32)...))
		sOdd := be32(t, new(big.Int).Mod(new(big.Int).Add(k, new(big.Int).Mul(e, d)), curveN))
		copy(odd[32:], sOdd[:])
		if checkVerify(t, "R.y odd", x, pre, digest, odd) {
			t.Error("a signature whose R has an odd y verifies")
		}
		even := odd
		sEven := be32(t, new(big.Int).Mod(new(big.Int).Sub(new(big.Int).Mul(e, d), k), curveN))
		copy(even[32:], sEven[:])
		if !checkVerify(t, "R.y even", x, pre, digest, even) {
			t.Error("the same signature with −k does not verify")
		}
		break
	}
	// s = e·d: s·G − e·P is the point at infinity.
	var r [32]byte
	rand.Read(r[:])
	inf := [64]byte(append(r[:], make([]byte, 32)...))
	sInf := be32(t, new(big.Int).Mod(new(big.Int).Mul(challenge(r), d), curveN))
	copy(inf[32:], sInf[:])
	if checkVerify(t, "R infinite", x, pre, digest, inf) {
		t.Error("a signature whose R is the point at infinity verifies")
	}
}

// FuzzVerifySigned reaches what FuzzVerify's random bytes almost never
// do, signatures that verify: from a fuzzed secret d, nonce k and
// digest it makes s = k + e·d (BIP-340's equation, without making R's y
// even, so that about half have an odd R), flips one bit of the
// signature when bit < 512, and holds Verify, through the plain key and
// its table, to btcec's answer.
func FuzzVerifySigned(f *testing.F) {
	f.Add([]byte{1}, []byte{2}, make([]byte, 32), uint16(512))
	f.Add([]byte{3}, []byte{4}, make([]byte, 32), uint16(0))
	f.Add([]byte{0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFE, 0xBA, 0xAE, 0xDC, 0xE6, 0xAF, 0x48, 0xA0, 0x3B, 0xBF, 0xD2, 0x5E, 0x8C, 0xD0, 0x36, 0x41, 0x40}, []byte{1}, make([]byte, 32), uint16(1000))
	f.Fuzz(func(t *testing.T, db, kb, digest []byte, bit uint16) {
		if len(db) > 32 || len(kb) > 32 || len(digest) != 32 {
			return
		}
		d := new(big.Int).Mod(new(big.Int).SetBytes(db), curveN)
		k := new(big.Int).Mod(new(big.Int).SetBytes(kb), curveN)
		if d.Sign() == 0 || k.Sign() == 0 {
			return
		}
		curve := btcec.S256()
		db32, kb32 := be32(t, d), be32(t, k)
		px, py := curve.ScalarBaseMult(db32[:])
		if py.Bit(0) == 1 {
			d.Sub(curveN, d)
		}
		rx, _ := curve.ScalarBaseMult(kb32[:])
		x, r := be32(t, px), be32(t, rx)
		h := chainhash.TaggedHash(chainhash.TagBIP0340Challenge, r[:], x[:], digest)
		e := new(big.Int).Mod(new(big.Int).SetBytes(h[:]), curveN)
		s := be32(t, e.Mul(e, d).Add(e, k).Mod(e, curveN))
		sig := [64]byte(append(r[:], s[:]...))
		if bit < 512 {
			flip(sig[:], int(bit))
		}
		p, err := secp.ParsePublicKey(x)
		if err != nil {
			t.Fatal(err)
		}
		checkVerify(t, "signed", x, p.Precomputed(), [32]byte(digest), sig)
	})
}
