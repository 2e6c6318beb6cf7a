package relay

import (
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/testutil"
)

// verifierCacheBytes fills a Verifier's cache of events verified or
// signed to its bound and returns the live heap it holds, per event (the
// least of three measures: see testutil.HeapHeld).
func verifierCacheBytes(tb testing.TB) float64 {
	tb.Helper()
	k, err := identity.Generate()
	if err != nil {
		tb.Fatal(err)
	}
	held := testutil.HeapHeld(3, func() func() {
		v := NewVerifier()
		for i := range VerifiedEvents {
			ev := nostr.Event{CreatedAt: nostr.Timestamp(1_770_000_000 + i), Kind: KindEphemeral, Content: "x"}
			if err := signEvent(k, &ev, v); err != nil {
				tb.Fatal(err)
			}
		}
		if n := v.seen.Len(); n != VerifiedEvents {
			tb.Fatalf("the cache holds %d events, want %d", n, VerifiedEvents)
		}
		return func() { v.seen = nil }
	})
	return float64(held) / VerifiedEvents
}

// The Verifier's cache of events verified or signed keeps a 32-byte
// digest an event, not its id and its 64-byte signature: about 82 bytes
// an event at its bound (210 with both).
func TestVerifierCacheSize(t *testing.T) {
	if per := verifierCacheBytes(t); per > 100 {
		t.Errorf("the Verifier's cache holds %.1f bytes an event, want at most 100", per)
	}
}

// BenchmarkVerifierCache fills a Verifier's cache to VerifiedEvents;
// cache-B/event is the live heap it holds an event.
func BenchmarkVerifierCache(b *testing.B) {
	var per float64
	for b.Loop() {
		per = verifierCacheBytes(b)
	}
	b.ReportMetric(per, "cache-B/event")
}

// A cached event vouches only for its own signature: the same event with
// another signature is checked, and fails.
func TestVerifierCacheVouchesForTheSignature(t *testing.T) {
	k, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	v := NewVerifier()
	ev := nostr.Event{CreatedAt: 1_770_000_000, Kind: KindEphemeral, Content: "x"}
	if err := signEvent(k, &ev, v); err != nil {
		t.Fatal(err)
	}
	other := nostr.Event{CreatedAt: 1_770_000_001, Kind: KindEphemeral, Content: "x"}
	if err := signEvent(k, &other, v); err != nil {
		t.Fatal(err)
	}
	forged := ev
	forged.Sig = other.Sig // a signature the cache vouches for, of another event
	if err := v.Verify(&forged); err == nil {
		t.Fatal("an event passed with another event's cached signature")
	}
	if err := v.Verify(&ev); err != nil {
		t.Fatalf("the signed event: %v", err)
	}
}

// BenchmarkVerifyCached is the check of an event the Verifier has
// verified: its id hashed again and its signature looked up.
func BenchmarkVerifyCached(b *testing.B) {
	k, err := identity.Generate()
	if err != nil {
		b.Fatal(err)
	}
	v := NewVerifier()
	ev := nostr.Event{CreatedAt: 1_770_000_000, Kind: KindEphemeral, Tags: nostr.Tags{{"p", k.NostrPublicKey()}}, Content: "a message of a few dozen characters"}
	if err := signEvent(k, &ev, v); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := v.Verify(&ev); err != nil {
			b.Fatal(err)
		}
	}
}
