package embedded

import (
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/nettest"
)

// BenchmarkReadMessages measures what the relay allocates to read and
// handle small client messages: each op is a REQ (answered with EOSE)
// and its CLOSE, then a ping whose pong says the CLOSE was handled. The
// client is a bare socket (frames written and read by hand), so that
// nearly all the bytes counted are the relay's.
func BenchmarkReadMessages(b *testing.B) {
	r := startRelay(b, Config{})
	c := nettest.DialIdle(b, strings.TrimPrefix(r.url, "ws://"), "/", 1)[0]
	req := []byte(`["REQ","s",{"kinds":[1],"limit":1}]`)
	closeMsg := []byte(`["CLOSE","s"]`)
	b.ReportAllocs()
	for b.Loop() {
		if err := nettest.WriteFrame(c, 0x1, req); err != nil {
			b.Fatal(err)
		}
		if op, p, err := nettest.ReadFrame(c); err != nil || op != 0x1 || !strings.HasPrefix(string(p), `["EOSE"`) {
			b.Fatalf("answer: op %#x %q %v", op, p, err)
		}
		if err := nettest.WriteFrame(c, 0x1, closeMsg); err != nil {
			b.Fatal(err)
		}
		if err := nettest.WriteFrame(c, 0x9, nil); err != nil {
			b.Fatal(err)
		}
		if op, _, err := nettest.ReadFrame(c); err != nil || op != 0xA {
			b.Fatalf("pong: op %#x %v", op, err)
		}
	}
}
