package secp_test

import (
	"crypto/sha256"
	"fmt"
	"sync"
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

// signer is a key that signs distinct digests, for Tables.Verify.
type signer struct {
	sk  *secp.SecretKey
	pub *secp.PublicKey
	n   int
}

func newSigners(t *testing.T, n int) []*signer {
	t.Helper()
	s := make([]*signer, n)
	for i := range s {
		k, err := secp.NewSecretKey(sha256.Sum256([]byte{'t', byte(i)}))
		if err != nil {
			t.Fatal(err)
		}
		p, err := secp.ParsePublicKey(k.PublicKey())
		if err != nil {
			t.Fatal(err)
		}
		s[i] = &signer{sk: k, pub: p}
	}
	return s
}

func (s *signer) sign(t *testing.T) ([32]byte, [64]byte) {
	t.Helper()
	s.n++
	d := sha256.Sum256([]byte{byte(s.n), byte(s.n >> 8)})
	sig, err := s.sk.Sign(d, [32]byte{})
	if err != nil {
		t.Fatal(err)
	}
	return d, sig
}

// A full Tables keeps the tables its keys are using: a key that earns one
// then evicts only a key idle for longer than Tables' idle span, so that
// more busy keys than the bound do not take turns rebuilding tables (each
// build costing about four verifications).
func TestTablesKeepBusyKeys(t *testing.T) {
	const size = 3
	tables := secp.NewTables[int](size)
	keys := newSigners(t, size+1)
	uses := make([]secp.Uses, len(keys))
	verify := func(i int) {
		t.Helper()
		d, sig := keys[i].sign(t)
		if !tables.Verify(i, keys[i].pub, &uses[i], d, sig) {
			t.Fatalf("key %d: a good signature failed", i)
		}
	}
	// Keys 0…2 earn tables; then all four take turns, 0…2 through their
	// tables, key 3 through its plain key.
	for i := range size {
		for range secp.PromoteAfter {
			verify(i)
		}
	}
	for range 4 * secp.PromoteAfter {
		for i := range size {
			if _, ok := tables.Get(i); !ok {
				t.Fatalf("busy key %d lost its table to key %d", i, size)
			}
			verify(i)
		}
		verify(size)
	}
	if _, ok := tables.Get(size); ok {
		t.Fatal("a key earned a table by evicting a busy one")
	}
	// Keys 0…2 fall idle: key 3 takes the place of one of them.
	for range 2 * secp.IdleVerifications(size) {
		tables.Verified(size, keys[size].pub, &uses[size])
	}
	if _, ok := tables.Get(size); !ok {
		t.Fatal("a key did not take the table of an idle one")
	}
	if n := tables.Len(); n != size {
		t.Fatalf("%d keys held, want %d", n, size)
	}
}

// Verify answers through a key's table as through the key, and counts
// only signatures that verified: forgeries neither earn a table, nor keep
// one, nor age the others.
func TestTablesVerifyCountsOnlyValid(t *testing.T) {
	const size = 1
	tables := secp.NewTables[int](size)
	keys := newSigners(t, 2)
	uses := make([]secp.Uses, len(keys))
	forge := func(i int) {
		t.Helper()
		d, sig := keys[i].sign(t)
		sig[63] ^= 1
		if tables.Verify(i, keys[i].pub, &uses[i], d, sig) {
			t.Fatalf("key %d: a forged signature verified", i)
		}
	}
	for range 4 * secp.PromoteAfter {
		forge(0)
	}
	if tables.Len() != 0 {
		t.Fatal("forgeries earned a table")
	}
	for range secp.PromoteAfter {
		d, sig := keys[0].sign(t)
		if !tables.Verify(0, keys[0].pub, &uses[0], d, sig) {
			t.Fatal("a good signature failed")
		}
	}
	if _, ok := tables.Get(0); !ok {
		t.Fatal("no table after PromoteAfter good signatures")
	}
	forge(0) // through the table
	// Forgeries under key 0 do not keep its table once it is idle, and
	// forgeries under key 1 do not make it idle sooner.
	for range 4 * secp.IdleVerifications(size) {
		forge(0)
		forge(1)
	}
	for range secp.PromoteAfter {
		d, sig := keys[1].sign(t)
		if !tables.Verify(1, keys[1].pub, &uses[1], d, sig) {
			t.Fatal("a good signature failed")
		}
	}
	if _, ok := tables.Get(1); ok {
		t.Fatal("key 1 took the table of key 0, idle for only PromoteAfter good signatures")
	}
	for range secp.IdleVerifications(size) {
		d, sig := keys[1].sign(t)
		if !tables.Verify(1, keys[1].pub, &uses[1], d, sig) {
			t.Fatal("a good signature failed")
		}
	}
	if _, ok := tables.Get(1); !ok {
		t.Fatal("key 1 did not take the table of key 0, idle for longer than IdleVerifications")
	}
}

// Many goroutines verifying, forging and earning tables under a few keys,
// some of them shared, evictions on the way: the answers stay right and
// the bound holds (run with -race).
func TestTablesConcurrent(t *testing.T) {
	const (
		size       = 2
		goroutines = 8
		rounds     = 36
	)
	tables := secp.NewTables[int](size)
	keys := newSigners(t, 4)
	uses := make([]secp.Uses, len(keys))
	type signed struct {
		d   [32]byte
		sig [64]byte
	}
	key := func(g, j int) int { return (g + j/12) % len(keys) } // each goroutine moves on to another key, leaving one idle
	var sigs [goroutines][rounds]signed
	for g := range goroutines {
		for j := range rounds {
			d, sig := keys[key(g, j)].sign(t)
			sigs[g][j] = signed{d, sig}
		}
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for j := range rounds {
				i, s := key(g, j), sigs[g][j]
				forged := j%5 == 4
				if forged {
					s.sig[10] ^= 1
				}
				if got := tables.Verify(i, keys[i].pub, &uses[i], s.d, s.sig); got == forged {
					t.Errorf("goroutine %d, key %d: Verify = %v for a forged=%v signature", g, i, got, forged)
					return
				}
				if n := tables.Len(); n > size {
					t.Errorf("%d keys held, bound %d", n, size)
					return
				}
			}
		})
	}
	wg.Wait()
}

// A flood of valid signatures from fresh keys, each signing PromoteAfter
// messages (the cheapest way to earn a table), once the old keys' tables
// are idle: Tables builds one table per free place, then one at once to
// replace a key, then at most one per ReplaceEvery verifications, not one
// per PromoteAfter (or per IdleVerifications(size)/size, the pace at which
// its tables fall idle). A busy peer signing among the flood keeps its
// table, and a new peer signing about one in ten of the verifications
// earns one by its 3·PromoteAfter-th signature: at its 2·PromoteAfter-th
// it outranks every flood key, which has PromoteAfter.
//
// The flood keys sign one after another, or in waves of 16 signing
// round-robin, so that in each wave's last round every verification is
// some key's PromoteAfter-th, the one that asks for a table. They are
// distinct keys to Tables (distinct k and Uses) sharing a few signers'
// public keys.
func TestTablesBuildBudgetUnderFlood(t *testing.T) {
	for _, wave := range []int{1, 16} {
		t.Run(fmt.Sprintf("wave=%d", wave), func(t *testing.T) { testBuildBudget(t, wave) })
	}
}

func testBuildBudget(t *testing.T, wave int) {
	const (
		size     = 8
		busy     = 0
		newcomer = 1_000_000
	)
	flood := 1024 // flood keys' signatures
	if secp.RaceEnabled {
		flood = 384
	}
	tables := secp.NewTables[int](size)
	s := newSigners(t, 2+4)
	peer, next, pool := s[0], s[1], s[2:]
	type signed struct {
		d   [32]byte
		sig [64]byte
	}
	poolSigs := make([]signed, len(pool))
	for i, p := range pool {
		d, sig := p.sign(t)
		poolSigs[i] = signed{d, sig}
	}
	var ticks uint64 // signatures verified
	uses := map[int]*secp.Uses{}
	verify := func(k int, s *signer, d [32]byte, sig [64]byte) {
		t.Helper()
		u := uses[k]
		if u == nil {
			u = new(secp.Uses)
			uses[k] = u
		}
		if !tables.Verify(k, s.pub, u, d, sig) {
			t.Fatalf("key %d: a good signature failed", k)
		}
		ticks++
		if b, bound := tables.Builds(), size+1+ticks/secp.ReplaceEvery; b > bound {
			t.Fatalf("%d tables built in %d verifications, bound %d places + 1 + %d/%d = %d",
				b, ticks, size, ticks, secp.ReplaceEvery, bound)
		}
	}
	fresh := func(k int) { // a flood key's signature
		t.Helper()
		s := poolSigs[k%len(pool)]
		verify(k, pool[k%len(pool)], s.d, s.sig)
	}
	// The busy peer and size-1 old keys fill the places.
	for range secp.PromoteAfter {
		d, sig := peer.sign(t)
		verify(busy, peer, d, sig)
		for k := 1; k < size; k++ {
			fresh(k)
		}
	}
	if n, b := tables.Len(), tables.Builds(); n != size || b != size {
		t.Fatalf("%d keys hold a table, %d built; want %d", n, b, size)
	}
	// The flood: after every eight of its signatures the busy peer signs
	// one, and after the first wave the newcomer signs one.
	flooded, signedNew, earnedAt := 0, 0, 0
	for key := size; flooded < flood; key += wave {
		for range secp.PromoteAfter {
			for i := range wave {
				fresh(key + i)
				if flooded++; flooded%8 != 0 {
					continue
				}
				if _, ok := tables.Get(busy); !ok {
					t.Fatalf("the busy peer lost its table after %d flood signatures", flooded)
				}
				d, sig := peer.sign(t)
				verify(busy, peer, d, sig)
				if flooded <= wave*secp.PromoteAfter || earnedAt != 0 {
					continue
				}
				d, sig = next.sign(t)
				verify(newcomer, next, d, sig)
				signedNew++
				if _, ok := tables.Get(newcomer); ok {
					earnedAt = signedNew
				}
			}
		}
	}
	if earnedAt == 0 {
		t.Fatalf("the newcomer earned no table in %d signatures", signedNew)
	}
	if earnedAt > 3*secp.PromoteAfter {
		t.Errorf("the newcomer earned its table at its signature %d, want by %d", earnedAt, 3*secp.PromoteAfter)
	}
	t.Logf("%d verifications, %d tables built; the newcomer's at its signature %d", ticks, tables.Builds(), earnedAt)
}

// TestTablesWaitingKeyKeepsItsPlace: when a replacement builds the table
// of the key waiting in line, because it verified more than the key that
// asked, the key that asked takes its place in line and gets the next
// replacement ahead of a key that verified less. Before, the swap left
// the line holding the key just built, so the asking key was dropped.
func TestTablesWaitingKeyKeepsItsPlace(t *testing.T) {
	tables := secp.NewTables[int](1)
	keys := tableKeys(t, 6)
	uses := make([]secp.Uses, len(keys))
	verify := func(k, n int) {
		for range n {
			tables.Verified(k, keys[k], &uses[k])
		}
	}
	idle := secp.IdleVerifications(1) + 1
	verify(0, secp.PromoteAfter) // the free place
	tables.Advance(idle)
	verify(1, secp.PromoteAfter) // replaces the idle 0: the budget is spent
	tables.Advance(idle)
	verify(2, 2*secp.PromoteAfter) // 1 is idle, but no budget: 2 waits
	if _, ok := tables.Get(2); ok {
		t.Fatal("key 2 got a table with the budget spent")
	}
	tables.Advance(secp.ReplaceEvery)
	// Key 4 asks with 8 verifications (9 in all), key 2 waits with 16:
	// 2 is built, 4 waits.
	verify(4, secp.PromoteAfter+1)
	if _, ok := tables.Get(2); !ok {
		t.Fatal("key 2, first in line, got no table at the next replacement")
	}
	tables.Advance(secp.ReplaceEvery + idle)
	verify(5, secp.PromoteAfter) // key 5 asks with 8; key 4 waits with 9
	if _, ok := tables.Get(4); !ok {
		_, five := tables.Get(5)
		t.Fatalf("key 4, in line with 9 verifications, got no table at the next replacement (key 5, with 8, got one: %v)", five)
	}
}

// A request that carries two signatures by one key, checked through its
// table (Verify for a Nostr event's by P, then VerifyOutputAgain for its
// message's by P's output key), moves the clock of idleness once: a key
// is idle after IdleVerifications(size) such requests by others, not half
// as many. VerifyOutputAgain still counts toward a table, and a signature
// that fails through it is refused.
func TestTablesVerifyOutputAgainTicksOnce(t *testing.T) {
	const size = 1
	idle := int(secp.IdleVerifications(size))
	tables := secp.NewTables[int](size)
	type agent struct {
		d      *secp.SecretKey // signs for p
		p      *secp.PublicKey
		o      *secp.OutputKey
		q      *secp.SecretKey // signs for o
		events secp.Uses       // the relay's count
		msgs   secp.Uses       // the Validator's
		n      int
	}
	agents := make([]*agent, 2)
	for i := range agents {
		secret := sha256.Sum256([]byte{'a', byte(i)})
		p, o, q, ok := outputKeys(t, secret)
		if !ok {
			t.Fatal("no key")
		}
		d, err := secp.NewSecretKey(secret)
		if err != nil {
			t.Fatal(err)
		}
		agents[i] = &agent{d: d, p: p, o: o, q: q}
	}
	request := func(i int) {
		t.Helper()
		a := agents[i]
		a.n++
		d := sha256.Sum256([]byte{'r', byte(i), byte(a.n), byte(a.n >> 8)})
		sig, err := a.d.Sign(d, [32]byte{})
		if err != nil {
			t.Fatal(err)
		}
		if !tables.Verify(i, a.p, &a.events, d, sig) {
			t.Fatalf("agent %d: an event's good signature failed", i)
		}
		if sig, err = a.q.Sign(d, [32]byte{}); err != nil {
			t.Fatal(err)
		}
		if !tables.VerifyOutputAgain(i, a.p, &a.msgs, a.o, d, sig) {
			t.Fatalf("agent %d: a message's good signature failed", i)
		}
		sig[0] ^= 1
		if tables.VerifyOutputAgain(i, a.p, &a.msgs, a.o, d, sig) {
			t.Fatalf("agent %d: a forged message's signature verified", i)
		}
	}
	for range secp.PromoteAfter {
		request(0)
	}
	if _, ok := tables.Get(0); !ok {
		t.Fatalf("agent 0 holds no table after %d requests", secp.PromoteAfter)
	}
	request(0)
	for range idle { // agent 1 asks for a table at each PromoteAfter-th
		request(1)
	}
	if _, ok := tables.Get(0); !ok {
		t.Fatalf("agent 0 lost its table after %d requests by another, idle after %d", idle, idle)
	}
	for range secp.PromoteAfter {
		request(1)
	}
	if _, ok := tables.Get(1); !ok {
		t.Fatalf("after %d requests by agent 1, agent 0 still holds the table", idle+secp.PromoteAfter)
	}
}
