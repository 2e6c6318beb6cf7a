package snapnostr

import (
	"strconv"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// The check of a request's NIP-40 expiration, made as it is received and
// again as its turn comes, allocates nothing, whatever its tag holds: a
// peer whose requests carry an expiration that is not a unix time costs
// no garbage. Before, each check of such a tag allocated strconv's error.
func TestExpirationCheckAllocatesNothing(t *testing.T) {
	in := NewInbox(InboxConfig{})
	for _, v := range []string{"", "soon", "1e9", "99999999999999999999", "-5", "4102444800"} {
		ev := &nostr.Event{Tags: nostr.Tags{{"p", "x"}, {"expiration", v}}}
		if n := testing.AllocsPerRun(100, func() { in.dropExpired(t.Context(), ev, "queue") }); n != 0 {
			t.Errorf("expiration %q: %v allocations a check, want none", v, n)
		}
	}
}

// A request is expired once its NIP-40 expiration is at or before the
// inbox's clock, to the second, as the embedded relay counts it (it
// refuses such an event and serves stored ones only while expiration >
// now); its first expiration tag counts, as the relay's does; one whose
// value is not a unix time (negative, past int64, not decimal) is
// ignored, as none.
func TestDropExpiredAtTheBoundary(t *testing.T) {
	now := time.Unix(1_800_000_000, 999_000_000)
	in := NewInbox(InboxConfig{Now: func() time.Time { return now }})
	at := func(d int64) string { return strconv.FormatInt(now.Unix()+d, 10) }
	for _, c := range []struct {
		name string
		tags nostr.Tags
		drop bool
	}{
		{"none", nil, false},
		{"now", nostr.Tags{{"expiration", at(0)}}, true},
		{"a second ago", nostr.Tags{{"expiration", at(-1)}}, true},
		{"next second", nostr.Tags{{"expiration", at(1)}}, false},
		{"zero", nostr.Tags{{"expiration", "0"}}, true},
		{"first passed, second ahead", nostr.Tags{{"expiration", at(-1)}, {"expiration", at(60)}}, true},
		{"first ahead, second passed", nostr.Tags{{"expiration", at(60)}, {"expiration", at(-1)}}, false},
		{"a name alone, then passed", nostr.Tags{{"expiration"}, {"expiration", at(-1)}}, true},
		{"largest", nostr.Tags{{"expiration", "9223372036854775807"}}, false},
		{"past int64", nostr.Tags{{"expiration", "9223372036854775808"}}, false},
		{"negative", nostr.Tags{{"expiration", "-1"}}, false},
		{"not a number", nostr.Tags{{"expiration", "soon"}}, false},
		{"not a time, then passed", nostr.Tags{{"expiration", "soon"}, {"expiration", at(-1)}}, false},
	} {
		ev := &nostr.Event{ID: c.name, Tags: c.tags}
		if got := in.dropExpired(t.Context(), ev, "queue"); got != c.drop {
			t.Errorf("%s: dropped %v, want %v", c.name, got, c.drop)
		}
	}
}

// unixTime reads an expiration as the embedded relay does
// (strconv.ParseInt, base 10, not negative).
func FuzzUnixTime(f *testing.F) {
	for _, s := range []string{"", "0", "+0", "-0", "-1", "+17", "1700000000", "01", "1_000", " 1", "1 ", "0x10", "1e9",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "99999999999999999999", "+", "-", "++1", "٣"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := strconv.ParseInt(s, 10, 64)
		wantOK := err == nil && want >= 0
		if !wantOK {
			want = 0
		}
		got, ok := unixTime(s)
		if got != want || ok != wantOK {
			t.Errorf("unixTime(%q) = %d, %v; ParseInt: %d, %v", s, got, ok, want, wantOK)
		}
	})
}

// BenchmarkDropExpired measures the check of a request's NIP-40
// expiration that the inbox makes as it receives a request and as a
// worker takes it: a request without the tag (as the SDK's and the
// node's own), with one ahead, and with one that is not a unix time.
func BenchmarkDropExpired(b *testing.B) {
	p := nostr.Tag{"p", "8d3f0a9d9b0c4b2e8f0b6f5e4d3c2b1a0f9e8d7c6b5a49382716051423324150"}
	for _, c := range []struct {
		name string
		tags nostr.Tags
	}{
		{"none", nostr.Tags{p}},
		{"ahead", nostr.Tags{p, {"expiration", "4102444800"}}},
		{"not-a-time", nostr.Tags{p, {"expiration", "soon"}}},
	} {
		b.Run(c.name, func(b *testing.B) {
			in := NewInbox(InboxConfig{})
			ev := &nostr.Event{Tags: c.tags}
			b.ReportAllocs()
			for b.Loop() {
				if in.dropExpired(b.Context(), ev, "queue") {
					b.Fatal("dropped")
				}
			}
		})
	}
}
