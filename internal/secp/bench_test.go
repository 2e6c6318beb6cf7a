package secp_test

import (
	"crypto/sha256"
	"testing"

	"github.com/snapnode/snapnode/internal/secp"
)

// The benchmarks of each primitive, for the build's implementation:
//
//	go test ./internal/secp -run '^$' -bench . -benchmem
//	go test -tags libsecp256k1 ./internal/secp -run '^$' -bench . -benchmem

func benchKeys(b testing.TB) (*secp.SecretKey, *secp.PublicKey, [32]byte, [64]byte) {
	k, err := secp.NewSecretKey(sha256.Sum256([]byte("bench")))
	if err != nil {
		b.Fatal(err)
	}
	p, err := secp.ParsePublicKey(k.PublicKey())
	if err != nil {
		b.Fatal(err)
	}
	d := sha256.Sum256([]byte("digest"))
	sig, err := k.Sign(d, [32]byte{1})
	if err != nil {
		b.Fatal(err)
	}
	return k, p, d, sig
}

func BenchmarkSign(b *testing.B) {
	k, _, d, _ := benchKeys(b)
	for b.Loop() {
		k.Sign(d, d)
	}
}

func BenchmarkVerify(b *testing.B) {
	_, p, d, sig := benchKeys(b)
	for b.Loop() {
		if !p.Verify(d, sig) {
			b.Fatal("does not verify")
		}
	}
}

// BenchmarkVerifyPrecomputed is BenchmarkVerify through the key's
// table (Precomputed); BenchmarkPrecompute is the table's build.
func BenchmarkVerifyPrecomputed(b *testing.B) {
	_, p, d, sig := benchKeys(b)
	p = p.Precomputed()
	for b.Loop() {
		if !p.Verify(d, sig) {
			b.Fatal("does not verify")
		}
	}
}

func BenchmarkPrecompute(b *testing.B) {
	_, p, _, _ := benchKeys(b)
	b.ReportMetric(float64(secp.PrecomputedBytes), "table-bytes")
	for b.Loop() {
		p.Precomputed()
	}
}

func BenchmarkParsePublicKey(b *testing.B) {
	k, _, _, _ := benchKeys(b)
	x := k.PublicKey()
	for b.Loop() {
		secp.ParsePublicKey(x)
	}
}

func BenchmarkECDH(b *testing.B) {
	k, p, _, _ := benchKeys(b)
	for b.Loop() {
		k.ECDH(p)
	}
}

func BenchmarkTaprootOutputKey(b *testing.B) {
	_, p, _, _ := benchKeys(b)
	for b.Loop() {
		p.TaprootOutputKey()
	}
}

// BenchmarkVerifyOutputPrecomputed verifies a signature by the output
// key through the internal key's table (PublicKey.VerifyOutput): the
// cost of sharing one table between an agent's Nostr key and its SNAP
// address, against BenchmarkVerifyPrecomputed.
func BenchmarkVerifyOutputPrecomputed(b *testing.B) {
	p, o, tweaked, _ := outputKeys(b, sha256.Sum256([]byte("bench")))
	d := sha256.Sum256([]byte("digest"))
	sig, err := tweaked.Sign(d, [32]byte{1})
	if err != nil {
		b.Fatal(err)
	}
	p = p.Precomputed()
	for b.Loop() {
		if !p.VerifyOutput(o, d, sig) {
			b.Fatal("does not verify")
		}
	}
}
