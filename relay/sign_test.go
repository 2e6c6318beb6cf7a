package relay

import (
	"encoding/hex"
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
	// A changed event is checked again, and fails.
	forged := ev
	forged.Content = "y"
	if err := v.Verify(&forged); err == nil {
		t.Fatal("an edited event passed the Verifier that had seen the original")
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
	if _, ok := v.tables.Get(k.NostrPublicKey()); ok {
		t.Fatalf("a table after %d good and as many bad signatures", secp.PromoteAfter-1)
	}
	if err := v.Verify(event(k, secp.PromoteAfter)); err != nil {
		t.Fatal(err)
	}
	if _, ok := v.tables.Get(k.NostrPublicKey()); !ok {
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
