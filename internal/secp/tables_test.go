package secp_test

import (
	"crypto/sha256"
	"testing"

	"github.com/snapnode/snapnode/internal/secp"
)

// A key earns its table at its PromoteAfter-th verification, not before;
// the table verifies as the key does; and Tables holds no more keys than
// its size however many earn one.
func TestTablesPromoteAfter(t *testing.T) {
	const size = 3
	tables := secp.NewTables[int](size)
	keys := make([]*secp.PublicKey, size+2)
	uses := make([]secp.Uses, len(keys))
	for i := range keys {
		k, err := secp.NewSecretKey(sha256.Sum256([]byte{byte(i)}))
		if err != nil {
			t.Fatal(err)
		}
		if keys[i], err = secp.ParsePublicKey(k.PublicKey()); err != nil {
			t.Fatal(err)
		}
	}
	for n := 1; n < secp.PromoteAfter; n++ {
		tables.Verified(0, keys[0], &uses[0])
		if _, ok := tables.Get(0); ok {
			t.Fatalf("a key has a table after %d verifications, want %d", n, secp.PromoteAfter)
		}
	}
	tables.Verified(0, keys[0], &uses[0])
	pre, ok := tables.Get(0)
	if !ok {
		t.Fatalf("no table after %d verifications", secp.PromoteAfter)
	}
	if pre.Bytes() != keys[0].Bytes() {
		t.Fatalf("the table's key is %x, want %x", pre.Bytes(), keys[0].Bytes())
	}
	k, _ := secp.NewSecretKey(sha256.Sum256([]byte{0}))
	d := sha256.Sum256([]byte("digest"))
	sig, err := k.Sign(d, [32]byte{})
	if err != nil {
		t.Fatal(err)
	}
	if !pre.Verify(d, sig) || pre.Verify(sha256.Sum256(d[:]), sig) {
		t.Fatal("the precomputed key does not answer as the key does")
	}
	for i := range keys {
		for range secp.PromoteAfter {
			tables.Verified(i, keys[i], &uses[i])
		}
		if n := tables.Len(); n > size {
			t.Fatalf("%d keys held, bound %d", n, size)
		}
	}
	if n := tables.Len(); n != size {
		t.Fatalf("%d keys held after %d earned a table, want %d", n, len(keys), size)
	}
}
