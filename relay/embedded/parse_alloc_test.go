package embedded

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// The REQ an SDK peer sends with each request (its reply's subscription)
// is parsed in one pass, each filter decoded as the message is read: a bounded number of allocations, most of them the
// filter's own values and lookup sets.
func TestParseReqAllocations(t *testing.T) {
	pk := strings.Repeat("ab", 32)
	id := strings.Repeat("cd", 32)
	req := []byte(`["REQ","sub-1",{"kinds":[21339,4339],"since":1700000000,"#p":["` + pk + `"],"#e":["` + id + `"]}]`)
	lim := fuzzLimits()
	if _, err := parseClientMessage(req, lim); err != nil {
		t.Fatal(err)
	}
	bound := 23 // 27 when each filter was read twice, 45 with a fresh jsontext decoder per message and filter, 70 when each filter was decoded with encoding/json
	if raceEnabled {
		bound += 20 // the race detector allocates a few of its own, and empties pools at random
	}
	if n := testing.AllocsPerRun(200, func() { parseClientMessage(req, lim) }); n > float64(bound) {
		t.Fatalf("parsing the REQ made %.0f allocations, want at most %d", n, bound)
	}
}

// A filter read on its own refuses a repeated member, however many tag
// names it has (a message's own pass refuses them before).
func TestParseFilterRefusesRepeatedNames(t *testing.T) {
	lim := fuzzLimits()
	var many strings.Builder
	many.WriteString("{")
	for i := range 40 {
		fmt.Fprintf(&many, `"#t%d":[],`, i)
	}
	many.WriteString(`"#t7":[]}`)
	for _, js := range []string{`{"kinds":[1],"kinds":[2]}`, `{"#p":["a"],"#p":["b"]}`, many.String()} {
		if _, err := parseFilter([]byte(js), lim); err == nil || !strings.Contains(err.Error(), "must not repeat") {
			t.Errorf("parseFilter(%.40s…) = %v, want a repeated member refused", js, err)
		}
	}
	if _, err := parseFilter([]byte(strings.Replace(many.String(), `"#t7":[]}`, `"#u":[]}`, 1)), lim); err != nil {
		t.Errorf("40 distinct tag names refused: %v", err)
	}
}

// A filter's numbers in any JSON form (1e3, 1000.0) are read without
// allocating.
func TestJSONIntAllocations(t *testing.T) {
	for _, s := range []string{"1700000000", "1.7e9", "17000000000e-1", "1.5", "1e999999999"} {
		if n := testing.AllocsPerRun(100, func() { jsonInt(s) }); n != 0 {
			t.Errorf("jsonInt(%q) made %.0f allocations", s, n)
		}
	}
}

// The EVENT a SNAP request arrives in (kind 21339, a p tag, NIP-44
// content) is parsed with reused decoders: the allocations left are the
// event's own strings and tags, not the decoders' lists of names for the
// duplicate check (43 when each message and event made a fresh decoder).
func TestParseEventAllocations(t *testing.T) {
	k := newKey(t)
	ev := k.event(t, 21339, 1700000000, strings.Repeat("QUJD", 200), nostr.Tag{"p", strings.Repeat("ab", 32)})
	msg, err := json.Marshal([]any{"EVENT", ev})
	if err != nil {
		t.Fatal(err)
	}
	lim := fuzzLimits()
	if _, err := parseClientMessage(msg, lim); err != nil {
		t.Fatal(err)
	}
	bound := 13 // 15 when the event was read twice
	if raceEnabled {
		bound += 20 // the race detector allocates a few of its own, and empties pools at random
	}
	if n := testing.AllocsPerRun(200, func() { parseClientMessage(msg, lim) }); n > float64(bound) {
		t.Fatalf("parsing the EVENT made %.0f allocations, want at most %d", n, bound)
	}
}
