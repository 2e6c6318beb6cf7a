package embedded

import (
	"strings"
	"testing"
)

// The REQ an SDK peer sends with each request (its reply's subscription)
// is parsed in one pass: a bounded number of allocations, most of them the
// filter's own values and lookup sets.
func TestParseReqAllocations(t *testing.T) {
	pk := strings.Repeat("ab", 32)
	id := strings.Repeat("cd", 32)
	req := []byte(`["REQ","sub-1",{"kinds":[21339,4339],"since":1700000000,"#p":["` + pk + `"],"#e":["` + id + `"]}]`)
	lim := fuzzLimits()
	if _, err := parseClientMessage(req, lim); err != nil {
		t.Fatal(err)
	}
	bound := 45 // 70 when each filter was decoded with encoding/json
	if raceEnabled {
		bound += 5 // the race detector allocates a few of its own
	}
	if n := testing.AllocsPerRun(200, func() { parseClientMessage(req, lim) }); n > float64(bound) {
		t.Fatalf("parsing the REQ made %.0f allocations, want at most %d", n, bound)
	}
}
