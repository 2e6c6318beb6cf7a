package relay

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/testutil"
)

// tailBytes fills a subscription's tail with n event ids and returns the
// live heap it holds, per id: what the heap holds with the tail less what
// it holds once the tail is let go (the least of three measures: see
// testutil.HeapHeld).
func tailBytes(tb testing.TB, n int) float64 {
	tb.Helper()
	held := testutil.HeapHeld(3, func() func() {
		p := NewPool(PoolConfig{URLs: []string{"ws://a"}, DedupeSize: n, DedupeTTL: time.Hour, Logger: ptLogger()})
		tb.Cleanup(func() { p.Close() })
		s, err := p.Subscribe(tb.Context(), ptFilter())
		if err != nil {
			tb.Fatal(err)
		}
		at := ptNow()
		for i := range n {
			var id [32]byte
			binary.LittleEndian.PutUint64(id[:], uint64(i))
			if !s.firstSight(0, id, at) {
				tb.Fatalf("id %d taken as seen", i)
			}
		}
		s.mu.Lock()
		held := len(s.tail)
		s.mu.Unlock()
		if held != n {
			tb.Fatalf("tail holds %d ids, want %d", held, n)
		}
		return func() {
			s.mu.Lock()
			s.tail = nil
			s.mu.Unlock()
		}
	})
	return float64(held) / float64(n)
}

// A subscription's tail holds up to DedupeSize (100,000) ids for as long
// as a relay may resend them: it keeps a 64-bit hash of each, not the
// 32-byte id: about 24 bytes an id in the map at 100,000 (33 under the
// race detector; 63 with the ids).
func TestSubscriptionTailSize(t *testing.T) {
	if per := tailBytes(t, DefaultDedupeSize); per > 40 {
		t.Errorf("the tail holds %.1f bytes an id, want at most 40", per)
	}
}

// BenchmarkSubscriptionTail fills a subscription's tail with
// DefaultDedupeSize ids; tail-B/id is the live heap it holds an id.
func BenchmarkSubscriptionTail(b *testing.B) {
	var per float64
	for b.Loop() {
		per = tailBytes(b, DefaultDedupeSize)
	}
	b.ReportMetric(per, "tail-B/id")
}
