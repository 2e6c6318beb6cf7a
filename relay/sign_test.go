package relay

import (
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
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
