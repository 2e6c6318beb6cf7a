package fairqueue_test

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/snapnode/snapnode/internal/fairqueue"
)

// popAll pops n items.
func popAll[V any](t *testing.T, q *fairqueue.Queue[string, V], n int) []V {
	t.Helper()
	var out []V
	for range n {
		v, ok := q.Pop()
		if !ok {
			t.Fatalf("Pop ended after %d items, want %d", len(out), n)
		}
		out = append(out, v)
	}
	return out
}

// Keys are served in turn, each key's items in order.
func TestRoundRobin(t *testing.T) {
	q := fairqueue.New[string, string](100)
	for _, it := range []string{"a1", "a2", "a3", "a4", "b1", "c1", "c2"} {
		if _, res := q.Push(it[:1], it); res != fairqueue.Queued {
			t.Fatalf("Push %s: %v", it, res)
		}
	}
	got := popAll(t, q, 7)
	if want := []string{"a1", "b1", "c1", "a2", "c2", "a3", "a4"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	if q.Len() != 0 {
		t.Errorf("Len %d after draining", q.Len())
	}
}

// A full queue: a key with fewer items than the busiest pushes out the
// busiest key's newest item; the busiest key itself is refused.
func TestFullQueue(t *testing.T) {
	q := fairqueue.New[string, string](4)
	for _, it := range []string{"f1", "f2", "f3", "g1"} {
		q.Push(it[:1], it)
	}
	if _, res := q.Push("f", "f4"); res != fairqueue.Refused {
		t.Errorf("the busiest key's item: %v, want Refused", res)
	}
	out, res := q.Push("v", "v1")
	if res != fairqueue.Displaced || out != "f3" {
		t.Errorf("a new key: %v pushing out %q, want Displaced pushing out f3", res, out)
	}
	// f and g hold 2 and 1: g may still push out f's newest.
	out, res = q.Push("g", "g2")
	if res != fairqueue.Displaced || out != "f2" {
		t.Errorf("g: %v pushing out %q, want f2", res, out)
	}
	// Now f1, g1, g2, v1: g, with 2, is the busiest and is refused.
	if _, res := q.Push("g", "g3"); res != fairqueue.Refused {
		t.Errorf("g, now the busiest: %v", res)
	}
	if got := popAll(t, q, 4); !slices.Equal(got, []string{"f1", "g1", "v1", "g2"}) {
		t.Errorf("order %v", got)
	}
}

// However many keys flood the queue and however fast, one more sender's
// item gets in at once and is popped within one turn of the keys waiting.
func TestFloodDoesNotStarve(t *testing.T) {
	const size = 64
	q := fairqueue.New[string, string](size)
	for i := range 10 * size {
		q.Push(fmt.Sprintf("flood-%d", i%200), "flood")
	}
	if q.Len() != size {
		t.Fatalf("Len %d, want the bound %d", q.Len(), size)
	}
	if _, res := q.Push("valid", "valid"); res == fairqueue.Refused {
		t.Fatal("the valid sender was refused")
	}
	for i := 0; ; i++ {
		v, _ := q.Pop()
		if v == "valid" {
			break
		}
		if i > size {
			t.Fatalf("valid not popped after %d items", i)
		}
	}
}

// Close lets Pop drain what is queued, then report false, and wakes a
// Pop that waits; Push is refused after Close.
func TestClose(t *testing.T) {
	q := fairqueue.New[string, int](8)
	q.Push("a", 1)
	var wg sync.WaitGroup
	results := make(chan bool, 3)
	q.Close()
	for range 3 {
		wg.Go(func() { _, ok := q.Pop(); results <- ok })
	}
	wg.Wait()
	close(results)
	var oks int
	for ok := range results {
		if ok {
			oks++
		}
	}
	if oks != 1 {
		t.Errorf("%d Pops got an item after Close, want the 1 queued", oks)
	}
	if _, res := q.Push("a", 2); res != fairqueue.Refused {
		t.Errorf("Push after Close: %v", res)
	}
}

// Concurrent pushers and poppers lose nothing: every item is popped or
// reported (refused or displaced) exactly once.
func TestConcurrentAccounting(t *testing.T) {
	q := fairqueue.New[string, int](16)
	const pushers, each = 8, 500
	var mu sync.Mutex
	seen := map[int]int{}
	note := func(v int) { mu.Lock(); seen[v]++; mu.Unlock() }
	var poppers sync.WaitGroup
	for range 3 {
		poppers.Go(func() {
			for v, ok := q.Pop(); ok; v, ok = q.Pop() {
				note(v)
			}
		})
	}
	var wg sync.WaitGroup
	for p := range pushers {
		wg.Go(func() {
			for i := range each {
				v := p*each + i
				out, res := q.Push(fmt.Sprint(p%3), v)
				switch res {
				case fairqueue.Refused:
					note(v)
				case fairqueue.Displaced:
					note(out)
				}
			}
		})
	}
	wg.Wait()
	q.Close()
	poppers.Wait()
	if len(seen) != pushers*each {
		t.Fatalf("%d items accounted for, want %d", len(seen), pushers*each)
	}
	for v, n := range seen {
		if n != 1 {
			t.Fatalf("item %d accounted for %d times", v, n)
		}
	}
}

func BenchmarkPushPop(b *testing.B) {
	q := fairqueue.New[string, int](256)
	keys := make([]string, 64)
	for i := range keys {
		keys[i] = fmt.Sprint("k", i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		q.Push(keys[i%len(keys)], i)
		q.Pop()
	}
}

// The baseline: a buffered channel, what the inbox used before.
func BenchmarkChannelBaseline(b *testing.B) {
	ch := make(chan int, 256)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		ch <- i
		<-ch
	}
}
