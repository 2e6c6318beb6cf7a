package snap

import (
	"crypto/sha256"
	"encoding/binary"
	"testing"

	"github.com/snapnode/snapnode/internal/secp"
	"github.com/snapnode/snapnode/internal/testutil"
)

// signerCacheBytes fills a signer cache of the default bound with fresh
// keys, as a flood of Nostr events from as many keys would, and returns
// the live heap it holds per key.
func signerCacheBytes(tb testing.TB) float64 {
	tb.Helper()
	const n = 4096 // Config.KeyCacheSize's default
	keys := make([][32]byte, 0, n)
	for i := uint64(0); len(keys) < n; i++ {
		var b [8]byte
		binary.BigEndian.PutUint64(b[:], i)
		x := sha256.Sum256(b[:])
		if _, err := secp.ParsePublicKey(x); err == nil { // about one x in two is a key
			keys = append(keys, x)
		}
	}
	before := testutil.LiveHeap()
	c := newSignerCache(n)
	for _, p := range keys {
		if _, err := c.of(p); err != nil {
			tb.Fatal(err)
		}
	}
	after := testutil.LiveHeap()
	if l := c.c.Len(); l != n {
		tb.Fatalf("the cache holds %d keys, want %d", l, n)
	}
	return float64(after-before) / n
}

// A signer's entry holds its lifted key P once, affine, in its output
// key Q: 272 bytes a key in the default build, 288 with libsecp256k1,
// where it took 456 when P was held twice (btcec's copy and a Jacobian
// point) beside Q.
func TestSignerCacheSize(t *testing.T) {
	if per := signerCacheBytes(t); per > 300 {
		t.Errorf("the signer cache holds %.1f bytes a key, want at most 300", per)
	}
}

// BenchmarkSignerCache fills a signer cache to its default bound;
// cache-B/key is the live heap it holds a key.
func BenchmarkSignerCache(b *testing.B) {
	var per float64
	for b.Loop() {
		per = signerCacheBytes(b)
	}
	b.ReportMetric(per, "cache-B/key")
}
