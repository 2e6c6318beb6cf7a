package secp_test

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/csv"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/btcsuite/btcd/txscript"

	"github.com/snapnode/snapnode/internal/secp"
	"github.com/snapnode/snapnode/internal/snapref"
)

// These tests run against the implementation the build selects (btcec, or
// libsecp256k1 with -tags libsecp256k1) and compare it with btcec called
// directly, the reference for every deterministic result.

func TestImplementation(t *testing.T) {
	t.Logf("secp256k1 implementation: %s", secp.Implementation)
}

func unhex32(t *testing.T, s string) (b [32]byte) {
	t.Helper()
	if _, err := hex.Decode(b[:], []byte(s)); err != nil || len(s) != 64 {
		t.Fatalf("bad 32-byte hex %q: %v", s, err)
	}
	return b
}

// TestBIP340Vectors checks key derivation, signing (with the vector's
// auxiliary randomness) and verification against BIP-340's test vectors
// (testdata/bip340-vectors.csv, BIP-340's CSV format).
func TestBIP340Vectors(t *testing.T) {
	f, err := os.Open("testdata/bip340-vectors.csv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) < 2 {
		t.Fatal("no vectors")
	}
	for _, r := range rows[1:] {
		idx, sec, pub, aux, msg, sigHex, result, comment := r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7]
		t.Run(idx+" "+comment, func(t *testing.T) {
			want := result == "TRUE"
			var sig [64]byte
			if _, err := hex.Decode(sig[:], []byte(sigHex)); err != nil {
				t.Fatal(err)
			}
			m := unhex32(t, msg)
			if sec != "" {
				k, err := secp.NewSecretKey(unhex32(t, sec))
				if err != nil {
					t.Fatal(err)
				}
				if got := k.PublicKey(); !strings.EqualFold(hex.EncodeToString(got[:]), pub) {
					t.Errorf("public key %x, want %s", got, pub)
				}
				got, err := k.Sign(m, unhex32(t, aux))
				if err != nil {
					t.Fatal(err)
				}
				if got != sig {
					t.Errorf("signature %X\nwant      %X", got, sig)
				}
			}
			p, err := secp.ParsePublicKey(unhex32(t, pub))
			if err != nil {
				if want {
					t.Fatalf("valid key refused: %v", err)
				}
				if !errors.Is(err, secp.ErrNotOnCurve) {
					t.Errorf("err = %v, want ErrNotOnCurve", err)
				}
				return
			}
			if got := p.Verify(m, sig); got != want {
				t.Errorf("Verify = %v, want %v", got, want)
			}
			if got := p.Precomputed().Verify(m, sig); got != want {
				t.Errorf("Precomputed().Verify = %v, want %v", got, want)
			}
		})
	}
}

// TestReferenceVectors checks the SNAP reference vectors: each identity's
// internal key P and output key Q, both from the secret and from P alone,
// and each message signature (auxiliary randomness zero).
func TestReferenceVectors(t *testing.T) {
	var keys snapref.KeyVectors
	snapref.Load(t, "keys/key-encoding.json", &keys)
	if len(keys.Vectors) == 0 {
		t.Fatal("no key vectors")
	}
	for _, v := range keys.Vectors {
		t.Run("key "+v.Description, func(t *testing.T) {
			checkKey(t, v.PrivateKey, v.PublicKeyXOnly, v.TweakedPublicKey)
		})
	}
	var sigs snapref.SignatureVectors
	snapref.Load(t, "signatures/schnorr-signatures.json", &sigs)
	if len(sigs.Valid) == 0 {
		t.Fatal("no signature vectors")
	}
	for _, v := range sigs.Valid {
		t.Run("signature "+v.Description, func(t *testing.T) {
			tweaked := checkKey(t, v.PrivateKey, v.InternalPublicKey, v.TweakedPublicKey)
			d := unhex32(t, v.Intermediates.SHA256Hash)
			sig, err := tweaked.Sign(d, [32]byte{})
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(sig[:]); got != v.ExpectedSignature {
				t.Errorf("signature %s\nwant      %s", got, v.ExpectedSignature)
			}
			q, err := secp.ParsePublicKey(unhex32(t, v.TweakedPublicKey))
			if err != nil {
				t.Fatal(err)
			}
			if !q.Verify(d, sig) {
				t.Error("the expected signature does not verify")
			}
			sig[63] ^= 1
			if q.Verify(d, sig) {
				t.Error("a changed signature verifies")
			}
		})
	}
}

// checkKey checks that secret gives the internal key p and the output key
// q, and returns the tweaked secret.
func checkKey(t *testing.T, secret, p, q string) *secp.SecretKey {
	t.Helper()
	k, err := secp.NewSecretKey(unhex32(t, secret))
	if err != nil {
		t.Fatal(err)
	}
	if got := k.PublicKey(); hex.EncodeToString(got[:]) != p {
		t.Errorf("P = %x, want %s", got, p)
	}
	tw, err := k.TaprootTweak()
	if err != nil {
		t.Fatal(err)
	}
	if got := tw.PublicKey(); hex.EncodeToString(got[:]) != q {
		t.Errorf("Q from the tweaked secret = %x, want %s", got, q)
	}
	pub, err := secp.ParsePublicKey(unhex32(t, p))
	if err != nil {
		t.Fatal(err)
	}
	got, err := pub.TaprootOutputKey()
	if err != nil {
		t.Fatal(err)
	}
	if hex.EncodeToString(got[:]) != q {
		t.Errorf("Q from P = %x, want %s", got, q)
	}
	return tw
}

// TestSameAsBTCEC compares every operation with btcec's on random keys:
// public keys, tweaks, ECDH and signatures for the same auxiliary
// randomness are byte-identical, and each side verifies the other's
// signatures.
func TestSameAsBTCEC(t *testing.T) {
	for range 32 {
		var b, aux, digest [32]byte
		rand.Read(b[:])
		rand.Read(aux[:])
		rand.Read(digest[:])
		k, err := secp.NewSecretKey(b)
		if err != nil {
			continue // not in 1…n−1: about 2⁻¹²⁸
		}
		ref, _ := btcec.PrivKeyFromBytes(b[:])
		if got, want := k.PublicKey(), [32]byte(schnorr.SerializePubKey(ref.PubKey())); got != want {
			t.Fatalf("public key %x, btcec %x", got, want)
		}
		if got := k.Bytes(); got != b {
			t.Fatalf("Bytes = %x, want %x", got, b)
		}
		tw, err := k.TaprootTweak()
		if err != nil {
			t.Fatal(err)
		}
		refTw := txscript.TweakTaprootPrivKey(*ref, nil)
		if got, want := tw.Bytes(), refTw.Key.Bytes(); got != want {
			t.Fatalf("tweaked secret %x, btcec %x", got, want)
		}
		if got, want := tw.PublicKey(), [32]byte(schnorr.SerializePubKey(refTw.PubKey())); got != want {
			t.Fatalf("tweaked public key %x, btcec %x", got, want)
		}
		sig, err := tw.Sign(digest, aux)
		if err != nil {
			t.Fatal(err)
		}
		refSig, err := schnorr.Sign(refTw, digest[:], schnorr.CustomNonce(aux))
		if err != nil {
			t.Fatal(err)
		}
		if want := [64]byte(refSig.Serialize()); sig != want {
			t.Fatalf("signature %x\nbtcec     %x", sig, want)
		}
		q, err := secp.ParsePublicKey(tw.PublicKey())
		if err != nil {
			t.Fatal(err)
		}
		otherSig, err := schnorr.Sign(refTw, aux[:]) // btcec's own randomness
		if err != nil {
			t.Fatal(err)
		}
		if !q.Verify(aux, [64]byte(otherSig.Serialize())) {
			t.Fatal("a btcec signature does not verify")
		}
		if q.Verify(digest, [64]byte(otherSig.Serialize())) {
			t.Fatal("a signature of another digest verifies")
		}

		// ECDH: d·P of the implementation, btcec's, and the peer's side.
		var pb [32]byte
		rand.Read(pb[:])
		peer, err := secp.NewSecretKey(pb)
		if err != nil {
			continue
		}
		peerPub, err := secp.ParsePublicKey(peer.PublicKey())
		if err != nil {
			t.Fatal(err)
		}
		ourPub, err := secp.ParsePublicKey(k.PublicKey())
		if err != nil {
			t.Fatal(err)
		}
		x := k.ECDH(peerPub)
		if y := peer.ECDH(ourPub); x != y {
			t.Fatalf("ECDH not symmetric: %x and %x", x, y)
		}
		px := peer.PublicKey()
		refPeer, _ := schnorr.ParsePubKey(px[:])
		if want := [32]byte(btcec.GenerateSharedSecret(ref, refPeer)); x != want {
			t.Fatalf("ECDH %x, btcec %x", x, want)
		}
	}
}

func TestInvalidKeys(t *testing.T) {
	n := "fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141"
	for _, s := range []string{strings.Repeat("0", 64), n, strings.Repeat("f", 64)} {
		if _, err := secp.NewSecretKey(unhex32(t, s)); !errors.Is(err, secp.ErrInvalidSecret) {
			t.Errorf("NewSecretKey(%s…) err = %v, want ErrInvalidSecret", s[:8], err)
		}
	}
	// x = 5 is not on the curve (5³+7 = 132 is not a square mod p); p
	// itself is not below the field size.
	notOn := [32]byte{31: 5}
	p := unhex32(t, "fffffffffffffffffffffffffffffffffffffffffffffffffffffffefffffc2f")
	for _, x := range [][32]byte{notOn, p} {
		if _, err := secp.ParsePublicKey(x); !errors.Is(err, secp.ErrNotOnCurve) {
			t.Errorf("ParsePublicKey(%x) err = %v, want ErrNotOnCurve", x, err)
		}
	}
}

// TestConcurrentUse signs and verifies from many goroutines at once (run
// it with -race): the implementation's shared state is read-only.
func TestConcurrentUse(t *testing.T) {
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			b := sha256.Sum256([]byte{byte(i)})
			k, err := secp.NewSecretKey(b)
			if err != nil {
				t.Error(err)
				return
			}
			p, err := secp.ParsePublicKey(k.PublicKey())
			if err != nil {
				t.Error(err)
				return
			}
			for j := range 50 {
				d := sha256.Sum256([]byte{byte(i), byte(j)})
				var aux [32]byte
				rand.Read(aux[:])
				sig, err := k.Sign(d, aux)
				if err != nil || !p.Verify(d, sig) {
					t.Errorf("goroutine %d, signature %d: err %v or does not verify", i, j, err)
					return
				}
			}
		})
	}
	wg.Wait()
}

// FuzzVerify checks that the implementation accepts exactly the keys and
// signatures btcec accepts (with BIP-340's s < n, see btcecVerify),
// through a plain key and through its precomputed one.
func FuzzVerify(f *testing.F) {
	k, _ := secp.NewSecretKey(sha256.Sum256([]byte("seed")))
	d := sha256.Sum256([]byte("digest"))
	sig, _ := k.Sign(d, [32]byte{})
	x := k.PublicKey()
	f.Add(x[:], d[:], sig[:])
	f.Add(make([]byte, 32), d[:], make([]byte, 64))
	f.Fuzz(func(t *testing.T, xb, db, sb []byte) {
		if len(xb) != 32 || len(db) != 32 || len(sb) != 64 {
			return
		}
		x, d, s := [32]byte(xb), [32]byte(db), [64]byte(sb)
		p, err := secp.ParsePublicKey(x)
		refP, refErr := schnorr.ParsePubKey(xb)
		if (err == nil) != (refErr == nil) {
			t.Fatalf("ParsePublicKey(%x) err = %v, btcec %v", x, err, refErr)
		}
		if err != nil {
			return
		}
		want := btcecVerify(refP, d, s)
		if got := p.Verify(d, s); got != want {
			t.Fatalf("Verify = %v, btcec %v", got, want)
		}
		if got := p.Precomputed().Verify(d, s); got != want {
			t.Fatalf("Precomputed().Verify = %v, btcec %v", got, want)
		}
	})
}

// ECDH with a PublicKey that ParsePublicKey did not make (the zero value,
// or the internal key of a zero OutputKey) panics in both builds instead
// of returning a secret: the btcec build's zero point would give an
// all-zero one, from which NIP-44 would derive a conversation key anyone
// can compute.
func TestECDHOfAnUnliftedKeyPanics(t *testing.T) {
	k, err := secp.NewSecretKey([32]byte{31: 1})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		p    *secp.PublicKey
	}{
		{"the zero PublicKey", new(secp.PublicKey)},
		{"a zero OutputKey's Internal", new(secp.OutputKey).Internal()},
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("ECDH with %s returned without a panic", c.name)
				}
			}()
			x := k.ECDH(c.p)
			t.Logf("ECDH with %s: %x", c.name, x)
		}()
	}
}
