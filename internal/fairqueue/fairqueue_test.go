package fairqueue_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"

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

// A full queue: a key with at least two fewer items than the busiest
// pushes out the busiest key's newest item; otherwise it is refused, and
// what waits keeps its place.
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
	// f2 g1 and v1 wait; f holds 2, g 1: g pushing out f2 would only
	// swap which key holds 2.
	if _, res := q.Push("g", "g2"); res != fairqueue.Refused {
		t.Errorf("g, one fewer than f: %v, want Refused", res)
	}
	// A newcomer may: f holds two more than it.
	if out, res := q.Push("w", "w1"); res != fairqueue.Displaced || out != "f2" {
		t.Errorf("a newcomer beside f's 2: %v pushing out %q, want f2", res, out)
	}
	// Now every key holds one: a newcomer is refused, nobody pushed out.
	if _, res := q.Push("x", "x1"); res != fairqueue.Refused {
		t.Errorf("a newcomer among equals: %v, want Refused", res)
	}
	if got := popAll(t, q, 4); !slices.Equal(got, []string{"f1", "g1", "v1", "w1"}) {
		t.Errorf("order %v", got)
	}
}

// A flood from a few keys cannot shut another sender out: its item gets
// in at once and is popped within one turn of the keys waiting. A flood
// from more keys than the queue holds leaves what waits in place.
func TestFloodDoesNotStarve(t *testing.T) {
	const size = 64
	for _, keys := range []int{1, 8, size * 4} {
		q := fairqueue.New[string, string](size)
		for i := range 10 * size {
			q.Push(fmt.Sprintf("flood-%d", i%keys), "flood")
		}
		if q.Len() != size {
			t.Fatalf("%d keys: Len %d, want the bound %d", keys, q.Len(), size)
		}
		_, res := q.Push("valid", "valid")
		if keys >= size {
			if res != fairqueue.Refused {
				t.Errorf("%d keys, each with one item: the newcomer %v, want Refused", keys, res)
			}
			continue
		}
		if res == fairqueue.Refused {
			t.Fatalf("%d keys: the valid sender was refused", keys)
		}
		for i := 0; ; i++ {
			if v, _ := q.Pop(); v == "valid" {
				if i > keys {
					t.Errorf("%d keys: valid popped after %d items, want at most one per key", keys, i)
				}
				break
			}
			if i > size {
				t.Fatalf("%d keys: valid not popped", keys)
			}
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

// Wait adds an item once a Pop makes room, pushing nothing out, and gives
// up when its context ends or the queue closes.
func TestWaitAddsOnceThereIsRoom(t *testing.T) {
	q := fairqueue.New[string, int](1)
	q.Push("a", 1)
	added := make(chan bool, 1)
	go func() { added <- q.Wait(context.Background(), "b", 2) }()
	if v, ok := q.Pop(); !ok || v != 1 {
		t.Fatalf("Pop = %d, %v, want 1", v, ok)
	}
	if !<-added {
		t.Fatal("Wait did not add once there was room")
	}
	if v, ok := q.Pop(); !ok || v != 2 {
		t.Fatalf("Pop = %d, %v, want the waiting 2", v, ok)
	}

	q.Push("a", 3)
	ctx, cancel := context.WithCancel(context.Background())
	go func() { added <- q.Wait(ctx, "b", 4) }()
	cancel()
	if <-added {
		t.Fatal("Wait added after its context ended, on a full queue")
	}
	go func() { added <- q.Wait(context.Background(), "b", 5) }()
	q.Close()
	if <-added {
		t.Fatal("Wait added to a closed queue")
	}
	if n := q.Len(); n != 1 {
		t.Fatalf("Len = %d, want 1: Wait pushed something out", n)
	}
}

// Evict removes what Push would push out for a key on a full queue, and
// nothing when that would not make the queue fairer.
func TestEvictAsPushWould(t *testing.T) {
	q := fairqueue.New[string, int](10)
	if _, ok := q.Evict("b"); ok {
		t.Fatal("Evict removed an item from an empty queue")
	}
	q.Push("a", 1)
	q.Push("a", 2)
	q.Push("b", 3)
	if _, ok := q.Evict("b"); ok {
		t.Fatal("Evict for b removed a's newest, leaving b the busiest")
	}
	if v, ok := q.Evict("c"); !ok || v != 2 {
		t.Fatalf("Evict for c = %d, %v, want a's newest, 2", v, ok)
	}
	if n := q.Len(); n != 2 {
		t.Fatalf("Len = %d, want 2", n)
	}
}

// TryPop takes the items in Pop's order, and reports false at once on an
// empty queue rather than waiting.
func TestTryPop(t *testing.T) {
	q := fairqueue.New[string, string](10)
	if _, ok := q.TryPop(); ok {
		t.Fatal("TryPop took an item from an empty queue")
	}
	for _, it := range []string{"a1", "a2", "b1"} {
		q.Push(it[:1], it)
	}
	var got []string
	for v, ok := q.TryPop(); ok; v, ok = q.TryPop() {
		got = append(got, v)
	}
	if want := []string{"a1", "b1", "a2"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
}

// A key held is passed over by Pop and TryPop while the other keys are
// served in turn; its items still count, may be pushed out, and are
// served again, in order, once it is released. Return puts items back at
// the head of their key's turn, past the bound.
func TestHoldReleaseReturn(t *testing.T) {
	q := fairqueue.New[string, string](4)
	for _, it := range []string{"a1", "a2", "b1"} {
		q.Push(it[:1], it)
	}
	a1, _ := q.Pop()
	q.Hold("a")
	if !q.Return("a", a1) {
		t.Fatal("Return refused on an open queue")
	}
	q.Push("a", "a3")
	if v, ok := q.TryPop(); !ok || v != "b1" {
		t.Fatalf("TryPop = %q, %v, want b1: a is held", v, ok)
	}
	if v, ok := q.TryPop(); ok {
		t.Fatalf("TryPop = %q with only a held key's items", v)
	}
	if n := q.Len(); n != 3 {
		t.Fatalf("Len = %d, want the held key's 3", n)
	}
	// The held key is the busiest: a newcomer pushes out its newest.
	q.Push("c", "c1")
	if out, res := q.Push("d", "d1"); res != fairqueue.Displaced || out != "a3" {
		t.Fatalf("a newcomer on a full queue: %v pushing out %q, want a3", res, out)
	}
	popped := make(chan string)
	go func() {
		for range 4 {
			v, _ := q.Pop()
			popped <- v
		}
	}()
	var got []string
	got = append(got, <-popped, <-popped) // c1, d1: a still held
	q.Release("a")
	got = append(got, <-popped, <-popped)
	if want := []string{"c1", "d1", "a1", "a2"}; !slices.Equal(got, want) {
		t.Errorf("order %v, want %v", got, want)
	}
	// Return goes past the bound, and Close releases what is held.
	for _, it := range []string{"e1", "e2", "e3", "e4"} {
		q.Push("e", it)
	}
	q.Hold("f")
	if !q.Return("f", "f1", "f2") || q.Len() != 6 {
		t.Fatalf("Len = %d after returning 2 to a full queue of 4, want 6", q.Len())
	}
	q.Close()
	if q.Return("f", "f3") {
		t.Error("Return added to a closed queue")
	}
	var rest []string
	for v, ok := q.Pop(); ok; v, ok = q.Pop() {
		rest = append(rest, v)
	}
	if want := []string{"e1", "f1", "e2", "f2", "e3", "e4"}; !slices.Equal(rest, want) {
		t.Errorf("after Close: %v, want %v", rest, want)
	}
}

// Release and Return make several items poppable at once, and wake as
// many of the Pops waiting: before, they woke one, and the other Pops
// slept on beside an item waiting for them until something else was
// added.
func TestReleaseAndReturnWakeEveryPopTheyFeed(t *testing.T) {
	for _, how := range []string{"Release", "Return"} {
		t.Run(how, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				q := fairqueue.New[string, string](8)
				popped := make(chan string, 2)
				var wg sync.WaitGroup
				for range 2 {
					wg.Go(func() {
						if v, ok := q.Pop(); ok {
							popped <- v
						}
					})
				}
				synctest.Wait()
				switch how {
				case "Release":
					q.Hold("a")
					q.Push("a", "a1")
					q.Push("a", "a2")
					synctest.Wait()
					q.Release("a")
				case "Return":
					q.Return("a", "a1", "a2")
				}
				synctest.Wait()
				if n := len(popped); n != 2 {
					t.Errorf("%d of the 2 Pops waiting got an item, with 2 items there", n)
				}
				q.Close()
				wg.Wait()
			})
		})
	}
}
