package snaphttp

import (
	"errors"
	"io"
	"math"
	"runtime"
	"strings"
	"testing"
)

func TestAcceptsEventStream(t *testing.T) {
	cases := []struct {
		values []string
		want   bool
	}{
		{[]string{"text/event-stream"}, true},
		{[]string{"Text/Event-Stream"}, true},
		{[]string{"application/json, text/event-stream;q=0.5"}, true},
		{[]string{"application/json", "text/event-stream"}, true},
		{[]string{"*/*"}, false},
		{[]string{"application/json"}, false},
		{[]string{"text/event-streamx"}, false},
		{[]string{"text/event-stream;q=0"}, false},
		{[]string{"text/event-stream; q=0.000, application/json"}, false},
		{[]string{"text/event-stream;q=0.001"}, true},
		{nil, false},
	}
	for _, tc := range cases {
		if got := acceptsEventStream(tc.values); got != tc.want {
			t.Errorf("%q: %v", tc.values, got)
		}
	}
}

// A body read with room for the largest keeps about its own length of
// memory: BodyMemory counts only that once it is read.
func TestReadAllKeepsItsLength(t *testing.T) {
	for _, n := range []int{0, 1, 1 << 10, 100 << 10, 256 << 10} {
		body := strings.Repeat("x", n)
		b, err := readAll(io.MultiReader(strings.NewReader(body)), 256<<10)
		if err != nil || string(b) != body {
			t.Fatalf("%d bytes: read %d, %v", n, len(b), err)
		}
		if waste := cap(b) - len(b); waste > len(b)/8+64 {
			t.Errorf("%d bytes held in a buffer of %d", n, cap(b))
		}
	}
}

// A WebSocket message is read into a buffer lent for the read, and the
// request keeps a copy of its own: a message read after it, into the
// same lent buffer, changes nothing of it, and what it keeps holds about
// its own length of memory, as readAll's (BodyMemory counts only that
// once it is read).
func TestReadWebSocketKeepsACopy(t *testing.T) {
	s := &Server{cfg: Config{MaxBody: 256 << 10}}
	for _, n := range []int{0, 1, 100, wsMessageBuffer - 1, wsMessageBuffer, wsMessageBuffer + 1, 100 << 10, 256 << 10} {
		first := strings.Repeat("a", n)
		b, err := s.readWebSocket(strings.NewReader(first))
		if err != nil || string(b) != first {
			t.Fatalf("%d bytes: read %d, %v", n, len(b), err)
		}
		// As little as readAll's, within the allocator's size classes.
		if all, _ := readAll(strings.NewReader(first), 256<<10); cap(b) > cap(all) {
			t.Errorf("%d bytes held in a buffer of %d, readAll's %d", n, cap(b), cap(all))
		}
		for range 3 { // the pool may drop a buffer (it does, at random, under -race)
			if _, err := s.readWebSocket(strings.NewReader(strings.Repeat("z", n))); err != nil {
				t.Fatal(err)
			}
		}
		if string(b) != first {
			t.Fatalf("%d bytes: the message changed once the next was read: %.40q…", n, b)
		}
	}
}

// A MaxBody as large as an int64 goes ("no limit" to a caller) reads a
// WebSocket message and a body as any other: room for one byte past it
// does not wrap around to a negative capacity.
func TestReadLargestMaxBody(t *testing.T) {
	s := &Server{cfg: Config{MaxBody: math.MaxInt64}}
	for _, n := range []int{0, 10, wsMessageBuffer, 600 << 10} {
		msg := strings.Repeat("a", n)
		if b, err := s.readWebSocket(strings.NewReader(msg)); err != nil || string(b) != msg {
			t.Fatalf("WebSocket message of %d bytes: read %d, %v", n, len(b), err)
		}
		if b, err := readAll(strings.NewReader(msg), s.cfg.MaxBody); err != nil || string(b) != msg {
			t.Fatalf("body of %d bytes: read %d, %v", n, len(b), err)
		}
	}
}

// A WebSocket message over MaxBody is read into no more memory than one
// within it: the reader stops at MaxBody+1 bytes, and does not grow its
// buffer past that (twice as large again) to learn the message went on.
func TestReadWebSocketOverTheLimitHoldsNoMore(t *testing.T) {
	const limit = 256 << 10
	s := &Server{cfg: Config{MaxBody: limit}}
	alloc := func(n int) uint64 {
		msg := strings.NewReader(strings.Repeat("x", n))
		var least uint64 = math.MaxUint64
		for range 5 { // the least of a few: another goroutine may allocate
			msg.Seek(0, io.SeekStart)
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			_, err := s.readWebSocket(msg)
			runtime.ReadMemStats(&after)
			if n > limit && !errors.Is(err, errTooLarge) {
				t.Fatalf("a message of %d bytes: %v, want errTooLarge", n, err)
			}
			least = min(least, after.TotalAlloc-before.TotalAlloc)
		}
		return least
	}
	within := alloc(limit)
	for _, n := range []int{limit + 1, limit + 10<<10} {
		if over := alloc(n); over > within+within/4 {
			t.Errorf("a message of %d bytes, over the limit of %d: read with %d bytes allocated, one of %d bytes with %d", n, limit, over, limit, within)
		}
	}
}
