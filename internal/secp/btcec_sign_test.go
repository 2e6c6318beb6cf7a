//go:build !libsecp256k1

package secp

import (
	"crypto/sha256"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/btcsuite/btcd/txscript"
)

// btcecSign is what the signer replaces: btcec's BIP-340 signature with
// the same auxiliary data.
func btcecSign(t testing.TB, priv *btcec.PrivateKey, digest, aux [32]byte) [64]byte {
	t.Helper()
	sig, err := schnorr.Sign(priv, digest[:], schnorr.FastSign(), schnorr.CustomNonce(aux))
	if err != nil {
		t.Fatal(err)
	}
	return [64]byte(sig.Serialize())
}

// checkSigner signs digest with secret's key, untweaked and tweaked, and
// compares each signature byte for byte with btcec's and verifies it.
func checkSigner(t testing.TB, secret, digest, aux [32]byte) {
	t.Helper()
	k, err := NewSecretKey(secret)
	if err != nil {
		return // not a valid secret: nothing to sign with
	}
	tweaked, err := k.TaprootTweak()
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		s    *signer
		priv *btcec.PrivateKey
	}{{"untweaked", &k.s, k.k}, {"tweaked", &tweaked.s, txscript.TweakTaprootPrivKey(*k.k, nil)}} {
		got, err := c.s.sign(digest, aux)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if want := btcecSign(t, c.priv, digest, aux); got != want {
			t.Fatalf("%s key %x, digest %x, aux %x:\n got %x\nwant %x", c.name, secret, digest, aux, got, want)
		}
		pub, err := schnorr.ParsePubKey(c.s.pub[:])
		if err != nil {
			t.Fatalf("%s: public key: %v", c.name, err)
		}
		sig, err := schnorr.ParseSignature(got[:])
		if err != nil || !sig.Verify(digest[:], pub) {
			t.Fatalf("%s: the signature does not verify (%v)", c.name, err)
		}
	}
}

// The signer makes the same signatures as btcec's schnorr.Sign, for keys
// whose points have odd and even y, with the tweak and without, and with
// the smallest and largest secrets.
func TestSignerMatchesBtcec(t *testing.T) {
	odd, even := 0, 0
	for i := range 64 {
		secret := sha256.Sum256([]byte{byte(i), 's'})
		digest := sha256.Sum256([]byte{byte(i), 'm'})
		aux := sha256.Sum256([]byte{byte(i), 'a'})
		if i%4 == 0 {
			aux = [32]byte{} // as the reference vectors sign
		}
		k, err := NewSecretKey(secret)
		if err != nil {
			t.Fatal(err)
		}
		if k.k.PubKey().SerializeCompressed()[0] == 0x03 {
			odd++
		} else {
			even++
		}
		checkSigner(t, secret, digest, aux)
	}
	if odd == 0 || even == 0 {
		t.Fatalf("keys with odd y: %d, even: %d; want both", odd, even)
	}
	one := [32]byte{31: 1}
	nMinus1 := [32]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe,
		0xba, 0xae, 0xdc, 0xe6, 0xaf, 0x48, 0xa0, 0x3b, 0xbf, 0xd2, 0x5e, 0x8c, 0xd0, 0x36, 0x41, 0x40}
	for _, secret := range [][32]byte{one, nMinus1} {
		checkSigner(t, secret, sha256.Sum256(secret[:]), [32]byte{})
	}
}

// FuzzSignerMatchesBtcec: for any secret, digest and auxiliary data, the
// signer's signature is btcec's, byte for byte, and verifies.
func FuzzSignerMatchesBtcec(f *testing.F) {
	f.Add(make([]byte, 32), make([]byte, 32), make([]byte, 32))
	f.Add([]byte{31: 1}, []byte("0123456789abcdef0123456789abcdef"), []byte{0: 0xff, 31: 0xff})
	f.Fuzz(func(t *testing.T, secret, digest, aux []byte) {
		if len(secret) != 32 || len(digest) != 32 || len(aux) != 32 {
			return
		}
		checkSigner(t, [32]byte(secret), [32]byte(digest), [32]byte(aux))
	})
}

// Signing allocates nothing: no public key derived, no signature object,
// no serialization (btcec's schnorr.Sign made 13 per signature).
func TestSignAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector makes crypto/rand's buffer escape")
	}
	k, err := NewSecretKey(sha256.Sum256([]byte("k")))
	if err != nil {
		t.Fatal(err)
	}
	tweaked, err := k.TaprootTweak()
	if err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256([]byte("x"))
	for name, sign := range map[string]func(){
		"Sign":          func() { _, _ = k.Sign(d, [32]byte{}) },
		"Sign(tweaked)": func() { _, _ = tweaked.Sign(d, [32]byte{1}) },
	} {
		if n := testing.AllocsPerRun(100, sign); n != 0 {
			t.Errorf("%s: %v allocations, want 0", name, n)
		}
	}
}

// BenchmarkSignBtcec is btcec's schnorr.Sign, which derives the public
// key at each call, beside BenchmarkSign's signer.
func BenchmarkSignBtcec(b *testing.B) {
	k, err := NewSecretKey(sha256.Sum256([]byte("k")))
	if err != nil {
		b.Fatal(err)
	}
	d := sha256.Sum256([]byte("x"))
	for b.Loop() {
		btcecSign(b, k.k, d, [32]byte{})
	}
}

// BenchmarkVerifyBtcec is what Verify replaces: btcec's schnorr Verify,
// which parses the signature and lifts the key again at every call.
func BenchmarkVerifyBtcec(b *testing.B) {
	k, err := NewSecretKey(sha256.Sum256([]byte("bench")))
	if err != nil {
		b.Fatal(err)
	}
	d := sha256.Sum256([]byte("digest"))
	sig, err := k.Sign(d, [32]byte{1})
	if err != nil {
		b.Fatal(err)
	}
	x := k.PublicKey()
	p, err := schnorr.ParsePubKey(x[:])
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		s, err := schnorr.ParseSignature(sig[:])
		if err != nil || !s.Verify(d[:], p) {
			b.Fatal("does not verify")
		}
	}
}
