package snap

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/secp"
)

// A sender earns a table of its key after secp.PromoteAfter signatures
// that verified, not before, and signatures that fail do not count; its
// signatures are then checked through the table, forgeries still
// refused; at most precomputedKeys senders hold one.
func TestKeyCachePromotesRepeatedSenders(t *testing.T) {
	c := newKeyCache(100)
	sign := func(k *identity.Key, i int) ([32]byte, string) {
		t.Helper()
		d := sha256.Sum256([]byte{byte(i), byte(i >> 8)})
		sig, err := k.Sign(d)
		if err != nil {
			t.Fatal(err)
		}
		return d, hex.EncodeToString(sig[:])
	}
	sender := func(k *identity.Key) *cachedKey {
		t.Helper()
		ck, e := c.lookup("from", k.Address(identity.Mainnet))
		if e != nil {
			t.Fatal(e)
		}
		return ck
	}
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	for i := range secp.PromoteAfter - 1 {
		if d, sig := sign(k, i); !c.verify(sender(k), d, sig) {
			t.Fatal("a good signature failed")
		}
		if d, sig := sign(k, 1000+i); c.verify(sender(k), sha256.Sum256(d[:]), sig) {
			t.Fatal("a signature of another digest verified")
		}
	}
	if _, ok := c.tables.Get(k.OutputKey()); ok {
		t.Fatalf("a table after %d good and as many bad signatures", secp.PromoteAfter-1)
	}
	if d, sig := sign(k, secp.PromoteAfter); !c.verify(sender(k), d, sig) {
		t.Fatal("a good signature failed")
	}
	if _, ok := c.tables.Get(k.OutputKey()); !ok {
		t.Fatalf("no table after %d good signatures", secp.PromoteAfter)
	}
	d, sig := sign(k, 2000)
	if !c.verify(sender(k), d, sig) {
		t.Fatal("through the table, a good signature failed")
	}
	if c.verify(sender(k), sha256.Sum256(d[:]), sig) {
		t.Fatal("through the table, a signature of another digest verified")
	}

	for range precomputedKeys + 2 {
		k, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		for i := range secp.PromoteAfter {
			if d, sig := sign(k, i); !c.verify(sender(k), d, sig) {
				t.Fatal("a good signature failed")
			}
		}
	}
	if n := c.tables.Len(); n != precomputedKeys {
		t.Errorf("%d senders hold a table, want the bound %d", n, precomputedKeys)
	}

	// A nil keyCache verifies and keeps nothing.
	var none *keyCache
	d, sig = sign(k, 3000)
	if !none.verify(sender(k), d, sig) || none.verify(sender(k), sha256.Sum256(d[:]), sig) {
		t.Fatal("a nil keyCache answers wrong")
	}
}
