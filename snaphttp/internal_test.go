package snaphttp

import (
	"io"
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
