package identity_test

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/secp"
)

// The tests of this file run against the secp256k1 implementation the
// build selects (btcec by default, libsecp256k1 with -tags libsecp256k1):
// run them under both.

var update = flag.Bool("update", false, "rewrite testdata/keys.golden.json (with the default btcec build)")

// goldenKey is one key of testdata/keys.golden.json: a secret and every
// name derived from it.
type goldenKey struct {
	Secret   string `json:"secret"`
	Internal string `json:"internal"` // P
	Output   string `json:"output"`   // Q
	Mainnet  string `json:"mainnet"`
	Testnet  string `json:"testnet"`
}

// goldenSecrets are the keys of the golden file: the smallest and largest
// secrets, BIP-340's vector secrets, secrets whose P has an odd y (the
// tweak negates them) and others.
var goldenSecrets = []string{
	"0000000000000000000000000000000000000000000000000000000000000001",
	"0000000000000000000000000000000000000000000000000000000000000003",
	"b7e151628aed2a6abf7158809cf4f3c762e7160f38b4da56a784d9045190cfef",
	"c90fdaa22168c234c4c6628b80dc1cd129024e088a67cc74020bbea63b14e5c9",
	"0b432b2677937381aef05bb02a66ecd012773062cf3fa2549e44f58ed2401710",
	"fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364140",
	hex.EncodeToString(sha256.New().Sum(nil)),
	strings.Repeat("7f", 32),
}

func derive(t *testing.T, secret string) goldenKey {
	t.Helper()
	k, err := identity.FromHex(secret)
	if err != nil {
		t.Fatal(err)
	}
	p, q := k.InternalKey(), k.OutputKey()
	return goldenKey{Secret: k.Hex(), Internal: hex.EncodeToString(p[:]), Output: hex.EncodeToString(q[:]),
		Mainnet: k.Address(identity.Mainnet), Testnet: k.Address(identity.Testnet)}
}

// TestKeyDerivationGolden derives each golden key's P, Q and addresses,
// and Q again from P alone (OutputKeyOf, what checks a Nostr author).
func TestKeyDerivationGolden(t *testing.T) {
	const path = "testdata/keys.golden.json"
	if *update {
		if secp.Implementation != "btcec" {
			t.Fatal("rewrite the golden keys with the default (btcec) build")
		}
		var all []goldenKey
		for _, s := range goldenSecrets {
			all = append(all, derive(t, s))
		}
		b, _ := json.MarshalIndent(all, "", "  ")
		if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var want []goldenKey
	if err := json.Unmarshal(raw, &want); err != nil {
		t.Fatal(err)
	}
	if len(want) != len(goldenSecrets) {
		t.Fatalf("%s has %d keys, want %d: run with -update", path, len(want), len(goldenSecrets))
	}
	for _, w := range want {
		t.Run(w.Secret[:8], func(t *testing.T) {
			if got := derive(t, w.Secret); got != w {
				t.Errorf("derived\n%+v\nwant\n%+v", got, w)
			}
			p := unhex32(t, w.Internal)
			q, err := identity.OutputKeyOf(p)
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(q[:]); got != w.Output {
				t.Errorf("OutputKeyOf(P) = %s, want %s", got, w.Output)
			}
		})
	}
}

func unhex32(t *testing.T, s string) (b [32]byte) {
	t.Helper()
	if len(s) != 64 {
		t.Fatalf("%q is not 64 hex characters", s)
	}
	if _, err := hex.Decode(b[:], []byte(s)); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSignatures checks each way a Key signs: the signature verifies for
// the key it must (Q for SNAP messages, P for Nostr events), not for the
// other, both through the build's implementation and through btcec.
func TestSignatures(t *testing.T) {
	k, err := identity.FromHex(goldenSecrets[2])
	if err != nil {
		t.Fatal(err)
	}
	d := sha256.Sum256([]byte("a SNAP message"))
	var aux [32]byte
	aux[0] = 9
	cases := []struct {
		name       string
		sign       func() ([64]byte, error)
		key, other [32]byte
	}{
		{"Sign: tweaked secret, fresh randomness", func() ([64]byte, error) { return k.Sign(d) }, k.OutputKey(), k.InternalKey()},
		{"SignWithAux: tweaked secret, given randomness", func() ([64]byte, error) { return k.SignWithAux(d, aux) }, k.OutputKey(), k.InternalKey()},
		{"SignUntweaked: the Nostr key", func() ([64]byte, error) { return k.SignUntweaked(d) }, k.InternalKey(), k.OutputKey()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sig, err := tc.sign()
			if err != nil {
				t.Fatal(err)
			}
			if !verifies(t, tc.key, d, sig) {
				t.Error("the signature does not verify for its key")
			}
			if verifies(t, tc.other, d, sig) {
				t.Error("the signature verifies for the other key")
			}
			again, _ := tc.sign()
			fresh := !strings.Contains(tc.name, "given")
			if fresh == (again == sig) {
				t.Errorf("two signatures equal: %v, want %v (fresh auxiliary randomness each time)", again == sig, !fresh)
			}
		})
	}
}

// verifies checks sig with the build's implementation and with btcec,
// which must agree.
func verifies(t *testing.T, key, d [32]byte, sig [64]byte) bool {
	t.Helper()
	p, err := (identity.Address{Key: key}).PublicKey()
	if err != nil {
		t.Fatal(err)
	}
	got := p.Verify(d, sig)
	refKey, _ := schnorr.ParsePubKey(key[:])
	refSig, err := schnorr.ParseSignature(sig[:])
	if want := err == nil && refSig.Verify(d[:], refKey); got != want {
		t.Fatalf("%s verifies %v, btcec %v", secp.Implementation, got, want)
	}
	return got
}

// TestSharedSecret checks the ECDH shared x coordinate NIP-44 starts
// from: both sides get the same, it is btcec's, and a peer key off the
// curve is refused.
func TestSharedSecret(t *testing.T) {
	for i := range goldenSecrets {
		a, err := identity.FromHex(goldenSecrets[i])
		if err != nil {
			t.Fatal(err)
		}
		b, err := identity.FromHex(goldenSecrets[(i+1)%len(goldenSecrets)])
		if err != nil {
			t.Fatal(err)
		}
		t.Run(goldenSecrets[i][:8], func(t *testing.T) {
			ab, err := a.SharedSecret(b.InternalKey())
			if err != nil {
				t.Fatal(err)
			}
			ba, err := b.SharedSecret(a.InternalKey())
			if err != nil {
				t.Fatal(err)
			}
			if ab != ba {
				t.Errorf("not symmetric: %x and %x", ab, ba)
			}
			secret := unhex32(t, goldenSecrets[i])
			ref, _ := btcec.PrivKeyFromBytes(secret[:])
			p := b.InternalKey()
			peer, _ := schnorr.ParsePubKey(p[:])
			if want := [32]byte(btcec.GenerateSharedSecret(ref, peer)); ab != want {
				t.Errorf("shared secret %x, btcec %x", ab, want)
			}
		})
	}
	k, _ := identity.FromHex(goldenSecrets[0])
	if _, err := k.SharedSecret([32]byte{31: 5}); !errors.Is(err, identity.ErrInvalidKey) || !errors.Is(err, secp.ErrNotOnCurve) {
		t.Errorf("peer off the curve: err = %v, want ErrInvalidKey and secp.ErrNotOnCurve", err)
	}
}
