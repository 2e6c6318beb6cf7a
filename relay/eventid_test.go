package relay

import (
	"bytes"
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
)

// An event's id is what go-nostr computes, whatever its strings hold.
func FuzzEventID(f *testing.F) {
	f.Add(strings.Repeat("ab", 32), int64(1700000000), 21339, "hello", "p", "x")
	f.Add("", int64(-1), 0, "\x00\x01\x08\t\n\x0b\x0c\r\x0e\x1a\x1f \"\\\x7f é 🙂", "\"", "\\\n")
	f.Add("not hex", int64(1)<<40, -5, strings.Repeat("\x19", 40), "", "\u2028")
	f.Fuzz(func(t *testing.T, pub string, created int64, kind int, content, tag0, tag1 string) {
		ev := &nostr.Event{PubKey: pub, CreatedAt: nostr.Timestamp(created), Kind: kind, Content: content,
			Tags: nostr.Tags{{tag0, tag1}, {}, {tag1}}}
		want := ev.Serialize()
		if got := appendSerialized(nil, ev); !bytes.Equal(got, want) {
			t.Fatalf("serialization\n got %q\nwant %q", got, want)
		}
		if EventID(ev) != sha256.Sum256(want) {
			t.Fatal("EventID differs from go-nostr's id")
		}
	})
}

// Checking an event's id (at each place in the process that receives it)
// serializes it into a reused buffer: no allocation per check.
func TestCheckIDAllocations(t *testing.T) {
	k, _ := identity.Generate()
	ev := &nostr.Event{CreatedAt: 1700000000, Kind: KindEphemeral, Content: strings.Repeat("sealed+/=", 150),
		Tags: nostr.Tags{{"p", strings.Repeat("ab", 32)}, {"e", strings.Repeat("cd", 32)}}}
	if err := SignEvent(k, ev); err != nil {
		t.Fatal(err)
	}
	if _, err := CheckID(ev); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(200, func() { CheckID(ev) }); n > 1 {
		t.Fatalf("checking the id made %.1f allocations, want at most 1", n)
	}
}
