package embedded

import (
	"fmt"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// A live event tried against many filters indexed under one of its keys
// (each filter under that key alone: the subscriptions of many peers to
// one value) allocates no more for a thousand of them than for ten: only
// a filter indexed under several keys, which the event may name more than
// once, is remembered as tried.
func TestBroadcastSingleKeyFiltersNoAllocationsEach(t *testing.T) {
	lim := fuzzLimits()
	pk := strings.Repeat("ab", 32)
	allocs := func(n int) float64 {
		h := newHub()
		for i := range n {
			f, err := parseFilter([]byte(`{"#p":["`+pk+`"],"#q":["absent"]}`), lim)
			if err != nil {
				t.Fatal(err)
			}
			h.add(&subscription{id: fmt.Sprint(i), filters: []*filter{f}})
		}
		ev := &nostr.Event{ID: strings.Repeat("01", 32), PubKey: strings.Repeat("02", 32), Kind: 1,
			Tags: nostr.Tags{{"p", pk}, {"e", strings.Repeat("03", 32)}}}
		d := liveEvent(ev)
		return testing.AllocsPerRun(50, func() { h.broadcast(d) })
	}
	few, many := allocs(10), allocs(1000)
	if many > few {
		t.Fatalf("an event tried against 1,000 filters under one key made %.0f allocations, against 10 %.0f: each try is remembered", many, few)
	}
}
