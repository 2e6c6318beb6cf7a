package identity_test

import (
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/btcutil/bech32"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/snapref"
)

func TestReferenceKeyVectors(t *testing.T) {
	var vs snapref.KeyVectors
	snapref.Load(t, "keys/key-encoding.json", &vs)
	if len(vs.Vectors) == 0 {
		t.Fatal("no key vectors")
	}
	for _, v := range vs.Vectors {
		t.Run(v.Description, func(t *testing.T) {
			k, err := identity.FromHex(v.PrivateKey)
			if err != nil {
				t.Fatal(err)
			}
			p, q := k.InternalKey(), k.OutputKey()
			if got := hex.EncodeToString(p[:]); got != v.PublicKeyXOnly {
				t.Errorf("P = %s, want %s", got, v.PublicKeyXOnly)
			}
			if got := k.NostrPublicKey(); got != v.NostrPubkeyHex {
				t.Errorf("Nostr key = %s, want %s", got, v.NostrPubkeyHex)
			}
			if got := hex.EncodeToString(q[:]); got != v.TweakedPublicKey {
				t.Errorf("Q = %s, want %s", got, v.TweakedPublicKey)
			}
			n := identity.Mainnet
			if v.Network == "testnet" {
				n = identity.Testnet
			}
			if got := k.Address(n); got != v.P2TRAddress {
				t.Errorf("address = %s, want %s", got, v.P2TRAddress)
			}
			a, err := identity.ParseAddress(v.P2TRAddress)
			if err != nil {
				t.Fatal(err)
			}
			if a.Network != n || a.Key != q {
				t.Errorf("ParseAddress = %v %x, want %v %x", a.Network, a.Key, n, q)
			}
		})
	}
}

// bip86Vector is the first test vector of BIP-86 (account 0, first receiving
// address) for the mnemonic "abandon … about".
func TestBIP86Derivation(t *testing.T) {
	const mnemonic = "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about"
	k, err := identity.FromMnemonic(mnemonic, "", identity.Mainnet, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := k.NostrPublicKey(), "cc8a4bc64d897bddc5fbc2f670f7a8ba0b386779106cf1223c6fc5d7cd6fc115"; got != want {
		t.Errorf("internal key = %s, want %s", got, want)
	}
	q := k.OutputKey()
	if got, want := hex.EncodeToString(q[:]), "a60869f0dbcf1dc659c9cecbaf8050135ea9e8cdc487053f1dc6880949dc684c"; got != want {
		t.Errorf("output key = %s, want %s", got, want)
	}
	if got, want := k.Address(identity.Mainnet), "bc1p5cyxnuxmeuwuvkwfem96lqzszd02n6xdcjrs20cac6yqjjwudpxqkedrcr"; got != want {
		t.Errorf("address = %s, want %s", got, want)
	}
	k1, err := identity.FromMnemonic(mnemonic, "", identity.Mainnet, 1)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := k1.Address(identity.Mainnet), "bc1p4qhjn9zdvkux4e44uhx8tc55attvtyu358kutcqkudyccelu0was9fqzwh"; got != want {
		// BIP-86's second receiving address.
		t.Errorf("index 1 address = %s, want %s", got, want)
	}
	kt, err := identity.FromMnemonic(mnemonic, "", identity.Testnet, 0)
	if err != nil {
		t.Fatal(err)
	}
	if kt.NostrPublicKey() == k.NostrPublicKey() {
		t.Error("testnet derivation (coin type 1) gave the mainnet key")
	}
	if _, err := identity.FromMnemonic(strings.Replace(mnemonic, "about", "abandon", 1), "", identity.Mainnet, 0); err == nil {
		t.Error("mnemonic with a bad checksum accepted")
	}
	m, err := identity.NewMnemonic()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(strings.Fields(m)); n != 24 {
		t.Errorf("NewMnemonic gave %d words, want 24", n)
	}
	if _, err := identity.FromMnemonic(m, "", identity.Mainnet, 0); err != nil {
		t.Errorf("a fresh mnemonic does not derive: %v", err)
	}
}

const vectorB = "bc1p8ujjp6rlj8vhlp0h6xzn722glk7jv5u7pev7c024v9m8ux29nq0qcnnhqz"

// encodeRaw builds a bech32(m) string over arbitrary 5-bit words.
func encodeRaw(t *testing.T, hrp string, words []byte, m bool) string {
	t.Helper()
	var s string
	var err error
	if m {
		s, err = bech32.EncodeM(hrp, words)
	} else {
		s, err = bech32.Encode(hrp, words)
	}
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParseAddressFailures(t *testing.T) {
	prog := make([]byte, 32)
	for i := range prog {
		prog[i] = 7
	}
	words, _ := bech32.ConvertBits(prog, 8, 5, true)
	v1 := append([]byte{1}, words...)
	v0 := append([]byte{0}, words...)
	padded := append([]byte{}, v1...)
	padded[len(padded)-1] |= 1 // a padding bit set: valid checksum, bad program
	v2 := append([]byte{2}, words...)

	cases := []struct {
		name string
		addr string
		rule error
	}{
		{"checksum: last character changed", vectorB[:61] + "q", identity.ErrChecksum},
		{"padding bit set", encodeRaw(t, "bc", padded, true), identity.ErrPadding},
		{"bech32 v0 checksum constant on a v1 program", encodeRaw(t, "bc", v1, false), identity.ErrChecksum},
		{"witness version 0", encodeRaw(t, "bc", v0, false), identity.ErrWitnessVersion},
		{"witness version 2", encodeRaw(t, "bc", v2, true), identity.ErrWitnessVersion},
		{"uppercase", strings.ToUpper(vectorB), identity.ErrCase},
		{"mixed case", "bc1P" + vectorB[4:], identity.ErrCase},
		{"prefix ltc", "lt" + vectorB[2:], identity.ErrPrefix},
		{"prefix empty", "", identity.ErrPrefix},
		{"too short", vectorB[:61], identity.ErrLength},
		{"too long", vectorB + "q", identity.ErrLength},
		{"character b", vectorB[:10] + "b" + vectorB[11:], identity.ErrCharacter},
		{"character 1", vectorB[:10] + "1" + vectorB[11:], identity.ErrCharacter},
		{"non-ASCII", vectorB[:60] + "é", identity.ErrCharacter},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := identity.ParseAddress(c.addr)
			if !errors.Is(err, c.rule) {
				t.Fatalf("ParseAddress(%q) = %v, want %v", c.addr, err, c.rule)
			}
			var ae *identity.AddressError
			if !errors.As(err, &ae) || ae.Address != c.addr {
				t.Errorf("error %v is not an *AddressError naming the address", err)
			}
		})
	}
}

func TestAddressNotOnCurve(t *testing.T) {
	// x = 5 is not the x coordinate of any secp256k1 point (5³+7 = 132 is
	// not a square mod p).
	var q [32]byte
	q[31] = 5
	a, err := identity.ParseAddress(identity.EncodeAddress(identity.Mainnet, q))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.PublicKey(); !errors.Is(err, identity.ErrNotOnCurve) {
		t.Fatalf("PublicKey() = %v, want ErrNotOnCurve", err)
	}
}

func TestKeyFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "key")
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	if err := identity.SaveKeyFile(path, k); err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %04o, want 0600", st.Mode().Perm())
	}
	if err := identity.SaveKeyFile(path, k); err == nil {
		t.Error("SaveKeyFile overwrote an existing key")
	}
	got, err := identity.LoadKeyFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Address(identity.Mainnet) != k.Address(identity.Mainnet) {
		t.Error("loaded key differs from saved key")
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = identity.LoadKeyFile(path)
	if !errors.Is(err, identity.ErrKeyFilePermissions) || !strings.Contains(err.Error(), "chmod 600") {
		t.Errorf("LoadKeyFile of a 0644 file = %v, want ErrKeyFilePermissions with a fix", err)
	}
	bad := filepath.Join(dir, "bad")
	if err := os.WriteFile(bad, []byte("zz\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := identity.LoadKeyFile(bad); !errors.Is(err, identity.ErrInvalidKey) {
		t.Errorf("LoadKeyFile of non-hex = %v, want ErrInvalidKey", err)
	}
}

func TestFromEnv(t *testing.T) {
	t.Setenv(identity.EnvKey, "")
	if k, err := identity.FromEnv(); k != nil || err != nil {
		t.Errorf("empty variable: %v, %v", k, err)
	}
	t.Setenv(identity.EnvKey, strings.Repeat("0a", 32))
	k, err := identity.FromEnv()
	if err != nil {
		t.Fatal(err)
	}
	if got := k.Address(identity.Mainnet); got != "bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397" {
		t.Errorf("address %s", got)
	}
	t.Setenv(identity.EnvKey, strings.Repeat("ff", 32)) // ≥ n
	if _, err := identity.FromEnv(); !errors.Is(err, identity.ErrInvalidKey) {
		t.Errorf("secret ≥ n: %v", err)
	}
}

func TestInvalidSecrets(t *testing.T) {
	for _, s := range []string{"", "00", strings.Repeat("00", 32), strings.Repeat("ff", 32), strings.Repeat("0a", 33)} {
		if _, err := identity.FromHex(s); !errors.Is(err, identity.ErrInvalidKey) {
			t.Errorf("FromHex(%q) = %v, want ErrInvalidKey", s, err)
		}
	}
}

// TestKeygenMnemonicDerivesAsBefore pins what a 24-word mnemonic of
// `snapnode keygen --mnemonic` (BIP-86 index 0, no passphrase) derives,
// on both networks, to the keys the version before the mnemonic's NFKD
// form and its single-space rule derived: a phrase written down then
// restores the same identity.
func TestKeygenMnemonicDerivesAsBefore(t *testing.T) {
	mnemonic := strings.Repeat("abandon ", 23) + "art" // BIP-39's all-zero 256-bit entropy
	for _, tc := range []struct {
		net          identity.Network
		address, key string
	}{
		{identity.Mainnet, "bc1p68a8a3vuv2cxzs7e2gjc5v3qy3zdnfaxwftyqe9k9nquvm6r4w2ssldtzp", "001291984ed14a7efb6a84ce236f654e8d4c4b8794162d6ec9de44f8e4119dd5"},
		{identity.Testnet, "tb1p2m33dxud5nlqlhdq6wx2lu52hl6cd09puc6fdt9q4nnrt4l3rjkq8mcv0l", "662c6fbb7110e0d78e0513ca2127b5c8bd77923b13edc2371c71112929606486"},
	} {
		k, err := identity.FromMnemonic(mnemonic, "", tc.net, 0)
		if err != nil {
			t.Fatal(err)
		}
		if got := k.Address(tc.net); got != tc.address {
			t.Errorf("%v address = %s, want %s", tc.net, got, tc.address)
		}
		if got := k.NostrPublicKey(); got != tc.key {
			t.Errorf("%v key = %s, want %s", tc.net, got, tc.key)
		}
	}
}
