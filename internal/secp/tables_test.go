package secp_test

import (
	"crypto/sha256"
	"testing"

	"github.com/snapnode/snapnode/internal/secp"
)

// tableKeys returns n distinct public keys, the i-th of the secret
// SHA-256(i).
func tableKeys(t *testing.T, n int) []*secp.PublicKey {
	t.Helper()
	keys := make([]*secp.PublicKey, n)
	for i := range keys {
		k, err := secp.NewSecretKey(sha256.Sum256([]byte{byte(i)}))
		if err != nil {
			t.Fatal(err)
		}
		if keys[i], err = secp.ParsePublicKey(k.PublicKey()); err != nil {
			t.Fatal(err)
		}
	}
	return keys
}

// A key earns its table at its PromoteAfter-th verification, not before;
// the table verifies as the key does; and Tables holds no more keys than
// its size however many earn one.
func TestTablesPromoteAfter(t *testing.T) {
	const size = 3
	tables := secp.NewTables[int](size)
	keys := tableKeys(t, size+2)
	uses := make([]secp.Uses, len(keys))
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

// A full Tables keeps the tables its keys are using: a key that earns one
// then evicts only a key idle for longer than Tables' idle span, so that
// more busy keys than the bound do not take turns rebuilding tables (each
// build costing about four verifications).
func TestTablesKeepBusyKeys(t *testing.T) {
	const size = 3
	tables := secp.NewTables[int](size)
	keys := tableKeys(t, size+1)
	uses := make([]secp.Uses, len(keys))
	// Keys 0…2 earn tables; then all four take turns, 0…2 through their
	// tables, key 3 through its plain key.
	for i := range size {
		for range secp.PromoteAfter {
			tables.Verified(i, keys[i], &uses[i])
		}
	}
	for range 4 * secp.PromoteAfter {
		for i := range size {
			if _, ok := tables.Get(i); !ok {
				t.Fatalf("busy key %d lost its table to key %d", i, size)
			}
		}
		tables.Verified(size, keys[size], &uses[size])
	}
	if _, ok := tables.Get(size); ok {
		t.Fatal("a key earned a table by evicting a busy one")
	}
	// Keys 0…2 fall idle: key 3 takes the place of one of them.
	for range 2 * secp.IdleVerifications(size) {
		tables.Verified(size, keys[size], &uses[size])
	}
	if _, ok := tables.Get(size); !ok {
		t.Fatal("a key did not take the table of an idle one")
	}
	if n := tables.Len(); n != size {
		t.Fatalf("%d keys held, want %d", n, size)
	}
}
