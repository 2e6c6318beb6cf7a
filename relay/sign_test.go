package relay

import (
	"encoding/hex"
	"strings"
	"sync"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/secp"
)

// Events signed with the identity key verify as NIP-01 says, by go-nostr
// and by a Verifier, which then knows them without checking again.
func TestSignEvent(t *testing.T) {
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier()
	ev := nostr.Event{CreatedAt: 1_770_000_000, Kind: KindEphemeral, Tags: nostr.Tags{{"p", k.NostrPublicKey()}}, Content: "x"}
	if err := signEvent(k, &ev, v); err != nil {
		t.Fatal(err)
	}
	if ev.PubKey != k.NostrPublicKey() || !ev.CheckID() {
		t.Fatalf("pubkey or id wrong: %+v", ev)
	}
	if ok, err := ev.CheckSignature(); !ok || err != nil {
		t.Fatalf("go-nostr rejects the signature: %v", err)
	}
	if err := NewVerifier().Verify(&ev); err != nil {
		t.Fatalf("a fresh Verifier rejects it: %v", err)
	}
	if err := v.Verify(&ev); err != nil {
		t.Fatal(err)
	}
	if n := v.SignatureChecks(); n != 0 {
		t.Errorf("the Verifier checked %d signatures of an event signed through it, want 0", n)
	}
	// A changed event is checked again, and fails.
	forged := ev
	forged.Content = "y"
	if err := v.Verify(&forged); err == nil {
		t.Fatal("an edited event passed the Verifier that had seen the original")
	}
	// Its id made to match: refused on its signature, which is counted.
	forged.ID = forged.GetID()
	if err := v.Verify(&forged); err == nil {
		t.Fatal("an edited event with its id recomputed passed")
	}
	if n := v.SignatureChecks(); n != 1 {
		t.Errorf("the Verifier counts %d signatures checked, want 1: the re-identified edit's", n)
	}
}

// The Verifier's cache of events verified or signed keeps at most
// VerifiedEvents of them however many pass through it.
func TestVerifierCacheBounded(t *testing.T) {
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier()
	for i := range VerifiedEvents + 100 {
		ev := nostr.Event{CreatedAt: nostr.Timestamp(1_770_000_000 + i), Kind: KindEphemeral, Content: "x"}
		if err := signEvent(k, &ev, v); err != nil {
			t.Fatal(err)
		}
	}
	if n := v.seen.Len(); n != VerifiedEvents {
		t.Errorf("the Verifier remembers %d events, want its bound %d", n, VerifiedEvents)
	}
}

// An author earns a table of its key after secp.PromoteAfter events that
// verified, not before, and events whose signature fails do not count;
// events are then checked through the table, forgeries still refused; at
// most PrecomputedKeys authors hold one.
func TestVerifierPromotesRepeatedAuthors(t *testing.T) {
	v := NewVerifier()
	event := func(k *identity.Key, i int) *nostr.Event {
		t.Helper()
		ev := &nostr.Event{CreatedAt: nostr.Timestamp(1_770_000_000 + i), Kind: KindEphemeral, Content: "x"}
		if err := signEvent(k, ev, nil); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	badSig := func(ev *nostr.Event) *nostr.Event {
		bad := *ev
		sig, err := hex.DecodeString(bad.Sig)
		if err != nil {
			t.Fatal(err)
		}
		sig[63] ^= 1
		bad.Sig = hex.EncodeToString(sig)
		return &bad
	}
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	for i := range secp.PromoteAfter - 1 {
		if err := v.Verify(event(k, i)); err != nil {
			t.Fatal(err)
		}
		if err := v.Verify(badSig(event(k, 1000+i))); err == nil {
			t.Fatal("a bad signature verified")
		}
	}
	if _, ok := v.tables.Get(k.InternalKey()); ok {
		t.Fatalf("a table after %d good and as many bad signatures", secp.PromoteAfter-1)
	}
	if err := v.Verify(event(k, secp.PromoteAfter)); err != nil {
		t.Fatal(err)
	}
	if _, ok := v.tables.Get(k.InternalKey()); !ok {
		t.Fatalf("no table after %d good signatures", secp.PromoteAfter)
	}
	if err := v.Verify(event(k, 2000)); err != nil {
		t.Fatalf("through the table: %v", err)
	}
	if err := v.Verify(badSig(event(k, 2001))); err == nil {
		t.Fatal("through the table, a bad signature verified")
	}

	for range PrecomputedKeys + 2 {
		k, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		for i := range secp.PromoteAfter {
			if err := v.Verify(event(k, i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := v.tables.Len(); n != PrecomputedKeys {
		t.Errorf("%d authors hold a table, want the bound %d", n, PrecomputedKeys)
	}
}

// Only signatures that verify move a Verifier's clock of idleness: events
// with forged signatures under an author holding a table (which cost a
// forger nothing to make) neither keep that author's table nor make the
// busy authors' tables look idle, so that a forger cannot have them
// evicted by its own keys' eight valid events.
func TestVerifierForgeriesDoNotEvict(t *testing.T) {
	const size = 2
	v := NewVerifier()
	v.tables = secp.NewTables[[32]byte](size)
	keys := make([]*identity.Key, 3) // busy, forger's, forger's next
	for i := range keys {
		k, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
	}
	n := 0
	event := func(k *identity.Key) *nostr.Event {
		t.Helper()
		n++
		ev := &nostr.Event{CreatedAt: nostr.Timestamp(1_770_000_000 + n), Kind: KindEphemeral, Content: "x"}
		if err := signEvent(k, ev, nil); err != nil {
			t.Fatal(err)
		}
		return ev
	}
	for _, k := range keys[:2] {
		for range secp.PromoteAfter {
			if err := v.Verify(event(k)); err != nil {
				t.Fatal(err)
			}
		}
	}
	busy := keys[0].InternalKey()
	if _, ok := v.tables.Get(busy); !ok || v.tables.Len() != size {
		t.Fatalf("the busy author has a table: %v, %d held; want true, %d", ok, v.tables.Len(), size)
	}
	// The busy author verifies once; then the forger sends more forged
	// events under its table's key than the idle span, then eight valid
	// ones under a new key.
	if err := v.Verify(event(keys[0])); err != nil {
		t.Fatal(err)
	}
	for range 2 * secp.IdleVerifications(size) {
		ev := event(keys[1])
		sig, err := hex.DecodeString(ev.Sig)
		if err != nil {
			t.Fatal(err)
		}
		sig[63] ^= 1
		ev.Sig = hex.EncodeToString(sig)
		if err := v.Verify(ev); err == nil {
			t.Fatal("a forged signature verified")
		}
	}
	for range secp.PromoteAfter {
		if err := v.Verify(event(keys[2])); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := v.tables.Get(busy); !ok {
		t.Fatal("forged events made the busy author's table look idle: evicted")
	}
}

// Goroutines verifying the same authors' events, some forged, while their
// tables are earned and evicted: every answer right (run with -race).
func TestVerifierConcurrent(t *testing.T) {
	const goroutines, rounds = 8, 24
	v := NewVerifier()
	v.tables = secp.NewTables[[32]byte](2)
	keys := make([]*identity.Key, 4)
	for i := range keys {
		k, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		keys[i] = k
	}
	var events [goroutines][rounds]*nostr.Event
	for g := range goroutines {
		for j := range rounds {
			ev := &nostr.Event{CreatedAt: nostr.Timestamp(1_770_000_000 + g*rounds + j), Kind: KindEphemeral, Content: "x"}
			if err := signEvent(keys[(g+j/8)%len(keys)], ev, nil); err != nil {
				t.Fatal(err)
			}
			if j%5 == 4 {
				sig, err := hex.DecodeString(ev.Sig)
				if err != nil {
					t.Fatal(err)
				}
				sig[0] ^= 1
				ev.Sig = hex.EncodeToString(sig)
			}
			events[g][j] = ev
		}
	}
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Go(func() {
			for j, ev := range events[g] {
				if err := v.Verify(ev); (err == nil) != (j%5 != 4) {
					t.Errorf("goroutine %d, event %d (forged: %v): %v", g, j, j%5 == 4, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := v.tables.Len(); n > 2 {
		t.Errorf("%d tables held, bound 2", n)
	}
}

// NIP-01 spells an event's id, pubkey and sig in lower-case hex: an event
// that spells them otherwise is refused, though its bytes are those of an
// event that verifies, as the embedded relay refuses it.
func TestVerifierRefusesUpperCaseHex(t *testing.T) {
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	ev := nostr.Event{CreatedAt: 1_770_000_000, Kind: KindEphemeral, Content: "x"}
	if err := signEvent(k, &ev, nil); err != nil {
		t.Fatal(err)
	}
	upper := func(s string) string { return strings.ToUpper(s) }
	for name, mutate := range map[string]func(*nostr.Event){
		"id":  func(e *nostr.Event) { e.ID = upper(e.ID) },
		"sig": func(e *nostr.Event) { e.Sig = upper(e.Sig) },
	} {
		bad := ev
		mutate(&bad)
		if err := NewVerifier().Verify(&bad); err == nil {
			t.Errorf("an event with its %s in upper case verified", name)
		}
	}
	if err := NewVerifier().Verify(&ev); err != nil {
		t.Fatalf("the event itself: %v", err)
	}
}
