package snaphttp_test

import (
	"strings"
	"testing"

	"golang.org/x/time/rate"

	"github.com/snapnode/snapnode/internal/nettest"
	"github.com/snapnode/snapnode/snaphttp"
)

// idleConns is how many idle WebSockets TestIdleWebSocketMemory holds.
const idleConns = 500

// maxIdleHeap bounds the live heap an idle WebSocket holds, in bytes, with
// headroom: what it holds was measured at about two thirds of it or less
// (see docs/benchmarks.md), whatever GOMAXPROCS (1 to 128) and under
// -race, and about half as much again before the WebSocket left
// net/http's goroutine. The live heap is asserted, not the spans in use
// (HeapInuse), which each P fills apart: at GOMAXPROCS 128 the spans
// held a third more than the live objects, past the bound.
const maxIdleHeap = 12 << 10

// What an idle WebSocket holds on the server: idleConns connections
// opened by hand (the client side holds the sockets only), measured with
// runtime.MemStats once every one answered a ping, then again once each
// carried one request and went idle. The figures are in
// docs/benchmarks.md; run with -v to see them.
func TestIdleWebSocketMemory(t *testing.T) {
	e := start(t, nil, func(c *snaphttp.Config) {
		c.Rate = rate.Inf
		c.MaxConns, c.MaxConnsPerPeer = 2*idleConns, 2*idleConns
	})
	addr := strings.TrimPrefix(e.base, "http://")
	before := nettest.Measure()
	conns := nettest.DialIdle(t, addr, "/snap", idleConns)
	fresh := nettest.Per(before, nettest.Measure(), idleConns)
	t.Logf("idle, fresh: %v", fresh)
	// About 18.5 KiB while the connection was served from net/http's
	// goroutine (which keeps the request and a 4 KiB write buffer until
	// its handler returns) and read through the HTTP server's 4 KiB
	// buffer.
	if fresh.Live > maxIdleHeap {
		t.Errorf("an idle WebSocket holds %.0f bytes of live heap, want at most %d", fresh.Live, maxIdleHeap)
	}

	for _, c := range conns {
		if err := nettest.WriteFrame(c, 0x1, raw(t, request(t, "message/send", sendPayload))); err != nil {
			t.Fatal(err)
		}
		if op, p, err := nettest.ReadAnswer(c); err != nil || op != 0x1 {
			t.Fatalf("answer: op %#x %v", op, err)
		} else {
			verify(t, p)
		}
	}
	used := nettest.Per(before, nettest.Measure(), idleConns)
	t.Logf("idle after one request: %v", used)
}
