package relay

import (
	"testing"
	"time"
)

type dedupeTestClock struct{ t time.Time }

func (c *dedupeTestClock) now() time.Time          { return c.t }
func (c *dedupeTestClock) advance(d time.Duration) { c.t = c.t.Add(d) }

func dkey(sub uint64, b byte) dedupeKey { return dedupeKey{sub: sub, id: [32]byte{b}} }

func TestDedupeOncePerSubscription(t *testing.T) {
	clk := &dedupeTestClock{t: time.Unix(1_700_000_000, 0)}
	d := newDedupeSet(10, time.Minute, clk.now)
	if !d.add(dkey(1, 1)) {
		t.Fatal("first sighting reported as a duplicate")
	}
	if d.add(dkey(1, 1)) || !d.contains(dkey(1, 1)) {
		t.Fatal("second sighting not reported as a duplicate")
	}
	if !d.add(dkey(2, 1)) {
		t.Fatal("the same event for another subscription is not a duplicate")
	}
}

func TestDedupeBounded(t *testing.T) {
	clk := &dedupeTestClock{t: time.Unix(1_700_000_000, 0)}
	const size = 100
	d := newDedupeSet(size, time.Hour, clk.now)
	for i := range 10 * size {
		d.add(dedupeKey{sub: 1, id: [32]byte{byte(i), byte(i >> 8)}})
		if n := d.len(); n > size {
			t.Fatalf("after %d adds: %d keys, bound %d", i+1, n, size)
		}
	}
	// The oldest were forgotten first, the newest are kept.
	if d.contains(dedupeKey{sub: 1, id: [32]byte{0, 0}}) {
		t.Fatal("oldest key still remembered")
	}
	last := 10*size - 1
	if !d.contains(dedupeKey{sub: 1, id: [32]byte{byte(last), byte(last >> 8)}}) {
		t.Fatal("newest key forgotten")
	}
}

func TestDedupeTTL(t *testing.T) {
	clk := &dedupeTestClock{t: time.Unix(1_700_000_000, 0)}
	d := newDedupeSet(10, 10*time.Minute, clk.now)
	d.add(dkey(1, 1))
	clk.advance(5 * time.Minute)
	d.add(dkey(1, 2))
	clk.advance(5*time.Minute - time.Nanosecond)
	if !d.contains(dkey(1, 1)) {
		t.Fatal("forgotten before its ttl")
	}
	// A repeat does not extend the ttl: it runs from the first sighting.
	if d.add(dkey(1, 1)) {
		t.Fatal("repeat within ttl accepted")
	}
	clk.advance(time.Nanosecond)
	if d.contains(dkey(1, 1)) {
		t.Fatal("remembered after its ttl")
	}
	if !d.contains(dkey(1, 2)) {
		t.Fatal("younger key expired with the older one")
	}
	if d.len() != 1 {
		t.Fatalf("len %d, want 1", d.len())
	}
	if !d.add(dkey(1, 1)) {
		t.Fatal("expired key not accepted as new")
	}
}
