package embedded

import (
	"strings"
	"testing"

	"github.com/snapnode/snapnode/internal/nettest"
)

// idleConns is how many idle WebSockets TestIdleWebSocketMemory holds.
const idleConns = 500

// maxIdleHeap bounds the live heap an idle client holds, in bytes, with
// headroom: what it holds was measured at about two thirds of it or less
// (see docs/benchmarks.md), whatever GOMAXPROCS (1 to 128) and under
// -race, and about half as much again before the WebSocket left
// net/http's goroutine. The live heap is asserted, not the spans in use
// (HeapInuse), which each P fills apart: at GOMAXPROCS 128 the spans
// held a third more than the live objects, past the bound.
const maxIdleHeap = 10 << 10

// What an idle client WebSocket holds on the relay: idleConns
// connections opened by hand (the client side holds the sockets only),
// measured with runtime.MemStats once every one answered a ping, then
// again once each opened and closed a subscription and went idle. The
// figures are in docs/benchmarks.md; run with -v to see them.
func TestIdleWebSocketMemory(t *testing.T) {
	r := startRelay(t, Config{MaxConnections: 2 * idleConns})
	addr := strings.TrimPrefix(r.url, "ws://")
	before := nettest.Measure()
	conns := nettest.DialIdle(t, addr, "/", idleConns)
	fresh := nettest.Per(before, nettest.Measure(), idleConns)
	t.Logf("idle, fresh: %v", fresh)
	// About 15 KiB while the connection was served from net/http's
	// goroutine (which keeps the request and a 4 KiB write buffer until
	// its handler returns) and read through the HTTP server's 4 KiB
	// buffer.
	if fresh.Live > maxIdleHeap {
		t.Errorf("an idle client holds %.0f bytes of live heap, want at most %d", fresh.Live, maxIdleHeap)
	}

	for _, c := range conns {
		if err := nettest.WriteFrame(c, 0x1, []byte(`["REQ","s",{"kinds":[1],"limit":1}]`)); err != nil {
			t.Fatal(err)
		}
		if op, p, err := nettest.ReadAnswer(c); err != nil || op != 0x1 || !strings.HasPrefix(string(p), `["EOSE"`) {
			t.Fatalf("answer: op %#x %q %v", op, p, err)
		}
		if err := nettest.WriteFrame(c, 0x1, []byte(`["CLOSE","s"]`)); err != nil {
			t.Fatal(err)
		}
		// The CLOSE is handled before the ping is answered.
		if err := nettest.WriteFrame(c, 0x9, nil); err != nil {
			t.Fatal(err)
		}
		if op, _, err := nettest.ReadAnswer(c); err != nil || op != 0xA {
			t.Fatalf("pong: op %#x %v", op, err)
		}
	}
	used := nettest.Per(before, nettest.Measure(), idleConns)
	t.Logf("idle after one subscription: %v", used)
}
