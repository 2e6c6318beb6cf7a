package identity_test

import (
	"bytes"
	"crypto/pbkdf2"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2"
	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/btcsuite/btcd/btcutil/hdkeychain"
	"github.com/btcsuite/btcd/chaincfg"
	"github.com/btcsuite/btcd/txscript"
	"github.com/tyler-smith/go-bip39"
	"golang.org/x/text/unicode/norm"

	"github.com/snapnode/snapnode/identity"
)

// referenceKey is btcec's reading of the secret b: ok when it is a
// scalar in 1…n−1, with its x-only P and its BIP-86 output key Q.
func referenceKey(b []byte) (p, q [32]byte, ok bool) {
	if len(b) != 32 {
		return p, q, false
	}
	var s btcec.ModNScalar
	if overflow := s.SetByteSlice(b); overflow || s.IsZero() {
		return p, q, false
	}
	_, pub := btcec.PrivKeyFromBytes(b)
	copy(p[:], schnorr.SerializePubKey(pub))
	copy(q[:], schnorr.SerializePubKey(txscript.ComputeTaprootKeyNoScript(pub)))
	return p, q, true
}

// checkAgainstReference: k, err is FromHex's (or LoadKeyFile's) reading
// of the hex secret s, which btcec reads as it does.
func checkAgainstReference(t *testing.T, s string, k *identity.Key, err error) {
	t.Helper()
	b, herr := hex.DecodeString(s)
	p, q, ok := referenceKey(b)
	if herr != nil {
		ok = false
	}
	if !ok {
		if err == nil {
			t.Fatalf("%q accepted; btcec refuses it", s)
		}
		if !errors.Is(err, identity.ErrInvalidKey) {
			t.Fatalf("%q: %v; want ErrInvalidKey", s, err)
		}
		return
	}
	if err != nil {
		t.Fatalf("%q refused (%v); btcec takes it", s, err)
	}
	if k.InternalKey() != p || k.OutputKey() != q {
		t.Fatalf("%q: P %x Q %x; btcec says %x %x", s, k.InternalKey(), k.OutputKey(), p, q)
	}
	if k.Hex() != strings.ToLower(s) {
		t.Fatalf("%q written again as %q", s, k.Hex())
	}
}

// FuzzFromHex: FromHex takes exactly the secrets btcec takes (32 bytes
// in hex, a scalar in 1…n−1), refusing the others with ErrInvalidKey,
// derives the P and Q btcec and txscript derive, and Hex writes the
// secret back as it came (lowercased).
func FuzzFromHex(f *testing.F) {
	for _, s := range goldenSecrets {
		f.Add(s)
	}
	for _, s := range []string{"", "00", strings.Repeat("0", 64), strings.Repeat("f", 64), strings.Repeat("F", 64),
		"fffffffffffffffffffffffffffffffebaaedce6af48a03bbfd25e8cd0364141", "B7E151628AED2A6ABF7158809CF4F3C762E7160F38B4DA56A784D9045190CFEF",
		" " + strings.Repeat("7f", 32), strings.Repeat("7f", 33), strings.Repeat("7g", 32)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, err := identity.FromHex(s)
		checkAgainstReference(t, s, k, err)
	})
}

// FuzzLoadKeyFile: a key file (written 0600, the mode LoadKeyFile wants)
// is read as FromHex reads its content without the white space around
// it, within the file's bound; and the file SaveKeyFile writes for a key
// read loads the same key.
func FuzzLoadKeyFile(f *testing.F) {
	for _, s := range goldenSecrets {
		f.Add([]byte(s + "\n"))
	}
	f.Add([]byte("\r\n\t " + goldenSecrets[2] + " \v\f\u0085\u00a0"))
	f.Add([]byte(goldenSecrets[2] + "\x00"))
	f.Add(append([]byte(goldenSecrets[2]), bytes.Repeat([]byte{' '}, 300)...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, content []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "key")
		if err := os.WriteFile(path, content, 0o600); err != nil {
			t.Fatal(err)
		}
		k, err := identity.LoadKeyFile(path)
		if len(content) > 256 {
			if err == nil {
				t.Fatalf("a key file of %d bytes accepted", len(content))
			}
			return
		}
		checkAgainstReference(t, strings.TrimSpace(string(content)), k, err)
		if err != nil {
			return
		}
		again := filepath.Join(dir, "saved")
		if err := identity.SaveKeyFile(again, k); err != nil {
			t.Fatal(err)
		}
		k2, err := identity.LoadKeyFile(again)
		if err != nil || k2.Hex() != k.Hex() {
			t.Fatalf("saved and loaded again: %v, %v", k2, err)
		}
	})
}

// referenceMnemonicKey derives the key at m/86'/c'/0'/0/index from a
// mnemonic (index below 2³¹, the last level being unhardened) as BIP-39
// says: its NFKD form valid (go-bip39's word list and checksum) in its
// one form, words parted by single spaces; the seed PBKDF2 of the NFKD
// forms of the mnemonic and "mnemonic" + the passphrase.
func referenceMnemonicKey(t *testing.T, m, passphrase string, n identity.Network, index uint32) (string, bool) {
	t.Helper()
	m = norm.NFKD.String(m)
	if strings.Join(strings.Fields(m), " ") != m || !bip39.IsMnemonicValid(m) {
		return "", false
	}
	if index >= hdkeychain.HardenedKeyStart {
		return "", false // not an index of a BIP-86 path's last, unhardened, level
	}
	seed, err := pbkdf2.Key(sha512.New, m, []byte("mnemonic"+norm.NFKD.String(passphrase)), 2048, 64)
	if err != nil {
		t.Fatal(err)
	}
	params, coin := &chaincfg.MainNetParams, uint32(0)
	if n == identity.Testnet {
		params, coin = &chaincfg.TestNet3Params, 1
	}
	ek, err := hdkeychain.NewMaster(seed, params)
	if err != nil {
		t.Fatal(err)
	}
	const h = hdkeychain.HardenedKeyStart
	for _, step := range []uint32{h + 86, h + coin, h, 0, index} {
		if ek, err = ek.Derive(step); err != nil {
			return "", false // an invalid child: FromMnemonic refuses it too
		}
	}
	priv, err := ek.ECPrivKey()
	if err != nil {
		t.Fatal(err)
	}
	b := priv.Key.Bytes()
	return hex.EncodeToString(b[:]), true
}

const abandonAbout = "abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon abandon about"

// FuzzFromMnemonic: FromMnemonic takes the mnemonics BIP-39 takes and
// derives the key BIP-39 and BIP-86 derive from them, and refuses the
// others.
func FuzzFromMnemonic(f *testing.F) {
	f.Add(abandonAbout, "", false, uint32(0))
	f.Add(abandonAbout, "TREZOR", true, uint32(7))
	f.Add(strings.ReplaceAll(abandonAbout, " ", "\n"), "", false, uint32(0))
	f.Add(abandonAbout+"\n", "", false, uint32(0))
	f.Add(strings.ReplaceAll(abandonAbout, "about", "\uff41bout"), "", false, uint32(0))
	f.Add(abandonAbout, "cafe\u0301", false, uint32(1))
	f.Add(abandonAbout, "caf\u00e9", false, uint32(1))
	f.Add("zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo zoo wrong", "", false, uint32(0))
	f.Add("legal winner thank year wave sausage worth useful legal winner thank yellow", "", false, uint32(1<<31))
	f.Fuzz(func(t *testing.T, m, passphrase string, testnet bool, index uint32) {
		n := identity.Mainnet
		if testnet {
			n = identity.Testnet
		}
		k, err := identity.FromMnemonic(m, passphrase, n, index)
		want, ok := referenceMnemonicKey(t, m, passphrase, n, index)
		switch {
		case !ok && err == nil:
			t.Fatalf("FromMnemonic(%q) accepted, BIP-39 (or BIP-86: index %d) refuses it", m, index)
		case ok && err != nil:
			t.Fatalf("FromMnemonic(%q, %q): %v", m, passphrase, err)
		case ok && k.Hex() != want:
			t.Fatalf("FromMnemonic(%q, %q, %v, %d) = %s, BIP-39 and BIP-86 give %s", m, passphrase, n, index, k.Hex(), want)
		}
	})
}
