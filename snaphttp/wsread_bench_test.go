package snaphttp_test

import (
	"strings"
	"testing"

	"golang.org/x/time/rate"

	"github.com/snapnode/snapnode/internal/nettest"
	"github.com/snapnode/snapnode/snaphttp"
)

// BenchmarkWebSocketSend measures a message/send over GET /snap's
// WebSocket: the request written as one frame by a bare socket (no
// client library allocating in the process), its answer read. Requests
// are signed before the timer starts.
func BenchmarkWebSocketSend(b *testing.B) {
	e := start(b, nil, func(c *snaphttp.Config) { c.Rate = rate.Inf })
	c := nettest.DialIdle(b, strings.TrimPrefix(e.base, "http://"), "/snap", 1)[0]
	reqs := signedRequests(b, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if err := nettest.WriteFrame(c, 0x1, reqs[i]); err != nil {
			b.Fatal(err)
		}
		if op, p, err := nettest.ReadFrame(c); err != nil || op != 0x1 || len(p) == 0 {
			b.Fatalf("answer: op %#x %v", op, err)
		}
	}
}
