package secp

import (
	"crypto/sha256"
	"sync"
	"testing"
)

// Two users of one Tables that each keep their own count for the same
// key (a relay's author and a Validator's signer, both under P): however
// their verifications interleave, the key's table is built once, holds
// one place, and no reservation is left behind.
func TestTablesTwoUsersOfOneKey(t *testing.T) {
	for _, size := range []int{4, 2} {
		const keys, goroutines, rounds = 3, 8, 4 * PromoteAfter
		tables := NewTables[[32]byte](size)
		tables.every = 1
		pubs := make([]*PublicKey, keys)
		for i := range pubs {
			sk, err := NewSecretKey(sha256.Sum256([]byte{'u', byte(i)}))
			if err != nil {
				t.Fatal(err)
			}
			if pubs[i], err = ParsePublicKey(sk.PublicKey()); err != nil {
				t.Fatal(err)
			}
		}
		uses := make([][2]Uses, keys) // per key: the two users' counts
		var wg sync.WaitGroup
		for g := range goroutines {
			wg.Go(func() {
				for j := range rounds {
					i := (g + j) % keys
					tables.verified(pubs[i].Bytes(), pubs[i], &uses[i][g%2])
				}
			})
		}
		wg.Wait()
		tables.mu.Lock()
		held, building, filling := len(tables.m), len(tables.building), tables.filling
		tables.mu.Unlock()
		if building != 0 || filling != 0 {
			t.Fatalf("size %d: %d keys left building, %d places reserved", size, building, filling)
		}
		if want := min(size, keys); held != want {
			t.Fatalf("size %d: %d keys held, want %d", size, held, want)
		}
		if size >= keys && tables.builds.Load() != keys {
			t.Fatalf("size %d: %d tables built for %d keys, each once", size, tables.builds.Load(), keys)
		}
	}
}
