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
	c := newKeyCache(100, nil)
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

// Only signatures that verify move the clock of idleness of a Validator's
// tables: forgeries under a sender holding a table do not make a busy
// sender's table look idle, to be evicted by the forger's next key.
func TestKeyCacheForgeriesDoNotEvict(t *testing.T) {
	const size = 2
	c := newKeyCache(100, nil)
	c.tables = secp.NewTables[[32]byte](size)
	keys := make([]*cachedKey, 3) // busy, forger's, forger's next
	ids := make([]*identity.Key, len(keys))
	for i := range keys {
		k, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		ck, e := c.lookup("from", k.Address(identity.Mainnet))
		if e != nil {
			t.Fatal(e)
		}
		ids[i], keys[i] = k, ck
	}
	n := 0
	sign := func(i int) ([32]byte, string) {
		t.Helper()
		n++
		d := sha256.Sum256([]byte{byte(n), byte(n >> 8)})
		sig, err := ids[i].Sign(d)
		if err != nil {
			t.Fatal(err)
		}
		return d, hex.EncodeToString(sig[:])
	}
	for i := range 2 {
		for range secp.PromoteAfter {
			if d, sig := sign(i); !c.verify(keys[i], d, sig) {
				t.Fatal("a good signature failed")
			}
		}
	}
	if d, sig := sign(0); !c.verify(keys[0], d, sig) {
		t.Fatal("a good signature failed")
	}
	for range 2 * secp.IdleVerifications(size) {
		if d, sig := sign(1); c.verify(keys[1], sha256.Sum256(d[:]), sig) {
			t.Fatal("a forged signature verified")
		}
	}
	for range secp.PromoteAfter {
		if d, sig := sign(2); !c.verify(keys[2], d, sig) {
			t.Fatal("a good signature failed")
		}
	}
	if _, ok := c.tables.Get(ids[0].OutputKey()); !ok {
		t.Fatal("forgeries made the busy sender's table look idle: evicted")
	}
}
