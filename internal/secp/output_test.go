package secp_test

import (
	"crypto/rand"
	"crypto/sha256"
	"testing"

	"github.com/btcsuite/btcd/btcec/v2/schnorr"
	"github.com/btcsuite/btcd/txscript"

	"github.com/snapnode/snapnode/internal/secp"
)

// outputKeys returns a secret, its internal key P lifted, P's output key
// and the tweaked secret that signs for it.
func outputKeys(t testing.TB, secret [32]byte) (*secp.PublicKey, *secp.OutputKey, *secp.SecretKey, bool) {
	t.Helper()
	sk, err := secp.NewSecretKey(secret)
	if err != nil {
		return nil, nil, nil, false
	}
	p, err := secp.ParsePublicKey(sk.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	o, err := p.TaprootOutput()
	if err != nil {
		t.Fatal(err)
	}
	tweaked, err := sk.TaprootTweak()
	if err != nil {
		t.Fatal(err)
	}
	return p, o, tweaked, true
}

// checkOutput holds VerifyOutput, through P, through P's table and
// through the P the output key keeps (Internal), to Verify's answer by
// the output key Q parsed on its own.
func checkOutput(t *testing.T, what string, p, pre *secp.PublicKey, o *secp.OutputKey, digest [32]byte, sig [64]byte) bool {
	t.Helper()
	q, err := secp.ParsePublicKey(o.Bytes())
	if err != nil {
		t.Fatalf("%s: the output key %x does not parse: %v", what, o.Bytes(), err)
	}
	want := q.Verify(digest, sig)
	if got := p.VerifyOutput(o, digest, sig); got != want {
		t.Fatalf("%s: VerifyOutput = %v, Verify by Q %v (P %x, digest %x, sig %x)", what, got, want, p.Bytes(), digest, sig)
	}
	if got := pre.VerifyOutput(o, digest, sig); got != want {
		t.Fatalf("%s: Precomputed().VerifyOutput = %v, Verify by Q %v (P %x, digest %x, sig %x)", what, got, want, p.Bytes(), digest, sig)
	}
	in := o.Internal()
	if got := in.VerifyOutput(o, digest, sig); in.Bytes() != p.Bytes() || got != want {
		t.Fatalf("%s: Internal() is %x, its VerifyOutput = %v; want P %x and %v", what, in.Bytes(), got, p.Bytes(), want)
	}
	return want
}

// TestVerifyOutput: an internal key P verifies its output key Q's
// signatures as Q itself does, through P and through P's table, for keys
// whose Q has an even y and keys whose Q has an odd one (BIP-340 then
// verifies against −Q), and for each one-bit change of the signature and
// of the digest; TaprootOutput's Q is TaprootOutputKey's; another key's
// output key verifies nothing.
func TestVerifyOutput(t *testing.T) {
	step := 1
	if testing.Short() || secp.RaceEnabled {
		step = 16
	}
	parity := map[bool]int{}
	for i := 0; i < 64 && (parity[false] < 2 || parity[true] < 2); i++ {
		p, o, tweaked, ok := outputKeys(t, sha256.Sum256([]byte{'o', byte(i)}))
		if !ok {
			continue
		}
		want, err := p.TaprootOutputKey()
		if err != nil {
			t.Fatal(err)
		}
		if o.Bytes() != want {
			t.Fatalf("TaprootOutput().Bytes() = %x, TaprootOutputKey %x", o.Bytes(), want)
		}
		if tweaked.PublicKey() != o.Bytes() {
			t.Fatalf("the tweaked secret's key %x is not Q %x", tweaked.PublicKey(), o.Bytes())
		}
		parity[yOdd(t, p)]++
		pre := p.Precomputed()
		var digest [32]byte
		rand.Read(digest[:])
		sig, err := tweaked.Sign(digest, [32]byte{})
		if err != nil {
			t.Fatal(err)
		}
		if !checkOutput(t, "valid", p, pre, o, digest, sig) {
			t.Fatal("a valid signature by Q does not verify")
		}
		if p.Verify(digest, sig) {
			t.Fatal("P's own Verify accepts Q's signature")
		}
		for bit := 0; bit < 512; bit += step {
			bad := sig
			flip(bad[:], bit)
			checkOutput(t, "sig bit", p, pre, o, digest, bad)
		}
		for bit := 0; bit < 256; bit += step {
			bad := digest
			flip(bad[:], bit)
			checkOutput(t, "digest bit", p, pre, o, bad, sig)
		}
		other, otherOut, _, _ := outputKeys(t, sha256.Sum256([]byte{'x', byte(i)}))
		if p.VerifyOutput(otherOut, digest, sig) || other.VerifyOutput(o, digest, sig) {
			t.Fatal("a key verified with the output key of another")
		}
	}
	if parity[false] < 2 || parity[true] < 2 {
		t.Fatalf("output keys by parity of y: %v; want both kinds tested", parity)
	}
}

// yOdd tells whether P's output key Q = P + τ·G has an odd y (BIP-340
// then verifies against −Q), computed by btcec.
func yOdd(t *testing.T, p *secp.PublicKey) bool {
	t.Helper()
	x := p.Bytes()
	pub, err := schnorr.ParsePubKey(x[:])
	if err != nil {
		t.Fatal(err)
	}
	return txscript.ComputeTaprootKeyNoScript(pub).Y().Bit(0) == 1
}

// FuzzVerifyOutput: for a fuzzed secret and digest, a signature by the
// output key (one bit flipped when bit < 512) verifies through P, and
// through P's table, exactly when it verifies by Q.
func FuzzVerifyOutput(f *testing.F) {
	f.Add([]byte{1}, make([]byte, 32), uint16(512))
	f.Add([]byte{2}, make([]byte, 32), uint16(7))
	f.Fuzz(func(t *testing.T, secret, digest []byte, bit uint16) {
		if len(secret) > 32 || len(digest) != 32 {
			return
		}
		var s [32]byte
		copy(s[32-len(secret):], secret)
		p, o, tweaked, ok := outputKeys(t, s)
		if !ok {
			return
		}
		sig, err := tweaked.Sign([32]byte(digest), [32]byte{})
		if err != nil {
			t.Fatal(err)
		}
		if bit < 512 {
			flip(sig[:], int(bit))
		}
		checkOutput(t, "signed", p, p.Precomputed(), o, [32]byte(digest), sig)
	})
}

// VerifyOutput through Tables counts toward the internal key's table:
// after PromoteAfter signatures by the output key, the key under which P
// is held has a table, used by the next verification.
func TestTablesVerifyOutput(t *testing.T) {
	p, o, tweaked, _ := outputKeys(t, sha256.Sum256([]byte("tables")))
	tables := secp.NewTables[[32]byte](2)
	var u secp.Uses
	for i := range secp.PromoteAfter {
		d := sha256.Sum256([]byte{byte(i)})
		sig, err := tweaked.Sign(d, [32]byte{})
		if err != nil {
			t.Fatal(err)
		}
		if !tables.VerifyOutput(p.Bytes(), p, &u, o, d, sig) {
			t.Fatalf("signature %d by the output key does not verify", i)
		}
		bad := sig
		flip(bad[:], 3)
		if tables.VerifyOutput(p.Bytes(), p, &u, o, d, bad) {
			t.Fatal("a changed signature verifies")
		}
	}
	if _, ok := tables.Get(p.Bytes()); !ok && secp.PrecomputedBytes > 0 {
		t.Fatalf("no table for P after %d signatures by its output key", secp.PromoteAfter)
	}
	if tables.Len() != 1 {
		t.Fatalf("%d keys held, want 1", tables.Len())
	}
}
