package bounded_test

import (
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/bounded"
)

var t0 = time.Unix(1_700_000_000, 0)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

func TestExpiringRefusesWhenFull(t *testing.T) {
	e := bounded.NewExpiring[string, int](2, false)
	for i, k := range []string{"a", "b"} {
		if _, added, err := e.Add(k, i, at(10+i), at(0)); !added || err != nil {
			t.Fatalf("Add(%s) = %v, %v", k, added, err)
		}
	}
	if _, _, err := e.Add("c", 2, at(20), at(1)); !errors.Is(err, bounded.ErrFull) {
		t.Fatalf("Add to a full set: %v, want ErrFull", err)
	}
	// A repeat is answered with the prior value, full or not.
	if prior, added, err := e.Add("a", 9, at(30), at(1)); added || err != nil || prior != 0 {
		t.Fatalf("repeat: prior %d, added %v, %v", prior, added, err)
	}
	if next, ok := e.NextExpiry(); !ok || !next.Equal(at(10)) {
		t.Fatalf("NextExpiry = %v %v, want %v", next, ok, at(10))
	}
	// Once the oldest expires there is room.
	if _, added, err := e.Add("c", 2, at(20), at(10)); !added || err != nil {
		t.Fatalf("Add after expiry = %v, %v", added, err)
	}
	if _, ok := e.Get("a", at(10)); ok {
		t.Fatal("expired entry returned")
	}
	if v, ok := e.Get("b", at(10)); !ok || v != 1 {
		t.Fatalf("Get(b) = %d %v", v, ok)
	}
}

func TestExpiringEvictsOldest(t *testing.T) {
	const size = 100
	e := bounded.NewExpiring[int, struct{}](size, true)
	for i := range 10 * size {
		if _, added, err := e.Add(i, struct{}{}, at(3600), at(0)); !added || err != nil {
			t.Fatalf("Add(%d) = %v, %v", i, added, err)
		}
		if e.Len() > size {
			t.Fatalf("after %d adds: %d entries, bound %d", i+1, e.Len(), size)
		}
	}
	if _, ok := e.Get(0, at(1)); ok {
		t.Fatal("oldest entry still held")
	}
	if _, ok := e.Get(10*size-1, at(1)); !ok {
		t.Fatal("newest entry forgotten")
	}
}

// An entry that expired out of order and was added again is the new one:
// the old entry's place in the order does not take it away.
func TestExpiringReAddAfterEarlyExpiry(t *testing.T) {
	e := bounded.NewExpiring[string, int](10, false)
	e.Add("long", 0, at(100), at(0))
	e.Add("short", 1, at(5), at(0)) // behind "long" in the order
	if _, added, _ := e.Add("short", 2, at(200), at(6)); !added {
		t.Fatal("expired entry not replaced")
	}
	// The sweep at 150 passes "long" and the first "short".
	if v, ok := e.Get("short", at(150)); !ok || v != 2 {
		t.Fatalf("Get(short) = %d %v, want 2 true", v, ok)
	}
	if e.Len() != 1 {
		t.Fatalf("Len = %d, want 1", e.Len())
	}
}

// An entry whose expiry lies beyond Unix nanoseconds' range (after 2262,
// as a replay record of a window of a century or more does) is held
// until the end of that range, not taken as long expired; and a time
// before 1678 is long past, not in the future.
func TestExpiringBeyondNanoseconds(t *testing.T) {
	e := bounded.NewExpiring[string, int](10, false)
	far := time.Date(2400, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, added, err := e.Add("far", 1, far, at(0)); !added || err != nil {
		t.Fatalf("Add = %v, %v", added, err)
	}
	for _, now := range []time.Time{at(0), at(1e9), time.Date(2262, 1, 1, 0, 0, 0, 0, time.UTC)} {
		if _, ok := e.Get("far", now); !ok {
			t.Fatalf("an entry until %v forgotten at %v", far, now)
		}
	}
	if _, added, _ := e.Add("far", 2, far, at(60)); added {
		t.Fatal("an entry until 2400 replaced at once")
	}
	if _, added, _ := e.Add("past", 3, time.Date(1600, 1, 1, 0, 0, 0, 0, time.UTC), at(0)); !added {
		t.Fatal("Add(past) refused")
	}
	if _, ok := e.Get("past", at(0)); ok {
		t.Fatal("an entry that expired in 1600 is held")
	}
}

// An entry costs its key and value and little more: the relay pool's
// dedupe set (a 40-byte key, no value) holds 100,000 of them, so every
// byte of overhead is 100 kB. With 16 bytes of expiry and order in the map
// and 8 in the queue, and the map's and the queue's slack, an entry takes
// about 140 bytes (a time.Time in both places made it about 190).
func TestExpiringEntrySize(t *testing.T) {
	type key struct {
		sub uint64
		id  [32]byte
	}
	const n = 100_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	e := bounded.NewExpiring[key, struct{}](n, true)
	for i := range n {
		e.Add(key{sub: uint64(i)}, struct{}{}, at(3600), at(0))
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	if per := float64(after.HeapAlloc-before.HeapAlloc) / n; per > 150 {
		t.Errorf("%.0f bytes an entry, want at most 150", per)
	}
	runtime.KeepAlive(e)
}
