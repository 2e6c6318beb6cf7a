package embedded

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/testdb"
)

// commonTagStore returns a file store holding n events of one author,
// each tagged "p" common and "e" with a value of its own, and the key
// and the common value.
func commonTagStore(tb testing.TB, n int) (*store, key, string) {
	tb.Helper()
	ctx := context.Background()
	s, err := openStore(ctx, filepath.Join(tb.TempDir(), "common.db"), storeBound{events: 1 << 40, bytes: 1 << 60})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { s.close() })
	k := newKey(tb)
	common := strings.Repeat("c", 64)
	for i := range n {
		ev := k.event(tb, 1, nostr.Timestamp(testNow-i), fmt.Sprint("event ", i), nostr.Tag{"p", common}, nostr.Tag{"e", fmt.Sprint("own ", i)})
		raw, err := encodeEvent(ev)
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := s.save(ctx, ev, raw, 0, false, 0, ""); err != nil {
			tb.Fatal(err)
		}
	}
	return s, k, common
}

// TestQueryPlanCommonTag: a filter pairing a tag that many events share
// with a condition that matches few (an author, a kind, another tag) is
// driven by the few, not by every row of the common tag.
func TestQueryPlanCommonTag(t *testing.T) {
	s, k, common := commonTagStore(t, 2000)
	nobody := strings.Repeat("0", 64)
	for _, tc := range []struct {
		js    string
		drive string // the driving tag's name; "": the events table
		plan  string // how the plan starts
	}{
		{`{"authors":["` + nobody + `"],"#p":["` + common + `"]}`, "", "SEARCH e USING INDEX events_pubkey_kind"},
		{`{"authors":["` + nobody + `"],"kinds":[1],"#p":["` + common + `"]}`, "", "SEARCH e USING INDEX events_pubkey_kind"},
		{`{"kinds":[7],"#p":["` + common + `"]}`, "", "SEARCH e USING INDEX events_kind"},
		{`{"#e":["own 5"],"#p":["` + common + `"]}`, "e", "SEARCH d USING INDEX tags_name_value"},
		{`{"#p":["` + common + `"],"#t":["none"]}`, "t", "SEARCH d USING INDEX tags_name_value"},
		// A requester's subscription for its reply.
		{`{"kinds":[1],"#p":["` + common + `"],"#e":["own 5"],"since":` + fmt.Sprint(testNow-100) + `}`, "e", "SEARCH d USING INDEX tags_name_value"},
		// The common tag still drives when it is the narrower.
		{`{"authors":["` + k.pk + `"],"#e":["own 5"]}`, "e", "SEARCH d USING INDEX tags_name_value"},
		{`{"kinds":[1],"#e":["own 5"]}`, "e", "SEARCH d USING INDEX tags_name_value"},
		{`{"kinds":[1],"#p":["` + common + `"]}`, "p", "SEARCH d USING INDEX tags_name_value"},
	} {
		f := mustFilter(t, tc.js)
		drive, _, err := s.choose(t.Context(), f)
		if err != nil {
			t.Fatal(err)
		}
		if got := driveName(f, drive); got != tc.drive {
			t.Errorf("%s: driven by %q, want %q", tc.js, got, tc.drive)
		}
		q, args := buildQuery(f, drive, 500, 0)
		plan := testdb.QueryPlan(t, s.r, q, args...)
		if len(plan) == 0 || !strings.HasPrefix(plan[0], tc.plan) {
			t.Errorf("%s: plan %q, want it to start with %q", tc.js, plan, tc.plan)
		}
		for _, step := range plan {
			// A list of every row of the common tag, built to look up in.
			if strings.Contains(step, "LIST SUBQUERY") || strings.HasPrefix(step, "SCAN") {
				t.Errorf("%s: plan %q", tc.js, plan)
			}
		}
	}
}

func driveName(f *filter, drive int) string {
	if drive == driveEvents {
		return ""
	}
	return f.tags[drive].name
}

// planFor returns the SQL that s.query runs for f.
func planFor(t *testing.T, s *store, f *filter) (string, []any) {
	t.Helper()
	drive, _, err := s.choose(t.Context(), f)
	if err != nil {
		t.Fatal(err)
	}
	return buildQuery(f, drive, 500, 0)
}

// BenchmarkQueryCommonTag measures one filter over 50,000 events that
// share a "p" tag, paired with an author, a kind or a tag that matches
// nothing, and with the events' own author (the filter's limit of 500
// applies).
func BenchmarkQueryCommonTag(b *testing.B) {
	s, k, common := commonTagStore(b, 50_000)
	nobody := strings.Repeat("0", 64)
	for _, tc := range []struct{ name, js string }{
		{"author-none", `{"authors":["` + nobody + `"],"#p":["` + common + `"]}`},
		{"kind-none", `{"kinds":[7],"#p":["` + common + `"]}`},
		{"tag-none", `{"#p":["` + common + `"],"#t":["none"]}`},
		{"author-all-limit-500", `{"authors":["` + k.pk + `"],"#p":["` + common + `"]}`},
		{"tag-one", `{"kinds":[1],"#e":["own 7"]}`},
		// A SNAP requester's subscription for its reply: kinds, itself
		// (#p, common), its request's id (#e, unique) and since; before
		// the reply is stored and after.
		{"reply-pending", `{"kinds":[1],"#p":["` + common + `"],"#e":["own none"],"since":` + fmt.Sprint(testNow-100) + `}`},
		{"reply", `{"kinds":[1],"#p":["` + common + `"],"#e":["own 7"],"since":` + fmt.Sprint(testNow-100) + `}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			f := mustFilter(b, tc.js)
			for b.Loop() {
				if _, _, err := s.query(b.Context(), f, 500, -1, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
