package embedded

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/testdb"
)

func testLimits() *limits {
	cfg, err := Config{}.withDefaults()
	if err != nil {
		panic(err)
	}
	return &limits{
		maxMessageLength: cfg.MaxMessageLength,
		maxSubscriptions: cfg.MaxSubscriptions,
		maxFilters:       cfg.MaxFilters,
		maxFilterValues:  cfg.MaxFilterValues,
		maxLimit:         cfg.MaxLimit,
		defaultLimit:     cfg.DefaultLimit,
		maxSubIDLength:   cfg.MaxSubIDLength,
		maxEventTags:     cfg.MaxEventTags,
		maxContentLength: cfg.MaxContentLength,
	}
}

func mustFilter(t testing.TB, js string) *filter {
	t.Helper()
	f, err := parseFilter(json.RawMessage(js), testLimits())
	if err != nil {
		t.Fatalf("parseFilter(%s): %v", js, err)
	}
	return f
}

// TestQueryAgreesWithMatch checks, on random events and filters, that the
// SQL query returns exactly the events the in-memory matcher accepts, in
// NIP-01 order, cut at the limit.
func TestQueryAgreesWithMatch(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	keys := []key{newKey(t), newKey(t), newKey(t)}
	kinds := []int{1, 4339, 7, 1000}
	names := []string{"p", "e", "skill", "t", "P"}
	values := []string{"a", "b", "c", "", "bc1p"}
	pick := func(s []string) string { return s[rng.IntN(len(s))] }

	var all []*nostr.Event
	for i := range 200 {
		var tags []nostr.Tag
		for range rng.IntN(4) {
			tags = append(tags, nostr.Tag{pick(names), pick(values), "extra"})
		}
		if rng.IntN(10) == 0 {
			tags = append(tags, nostr.Tag{"lonely"})
		}
		k := keys[rng.IntN(len(keys))]
		all = append(all, k.event(t, kinds[rng.IntN(len(kinds))], nostr.Timestamp(1000+rng.IntN(50)), fmt.Sprint(i), tags...))
	}
	slices.SortFunc(all, func(a, b *nostr.Event) int {
		if c := cmp.Compare(b.CreatedAt, a.CreatedAt); c != 0 {
			return c
		}
		return cmp.Compare(a.ID, b.ID)
	})

	var cases []queryCase
	for range 300 {
		m := map[string]any{}
		if rng.IntN(6) == 0 {
			m["ids"] = []string{all[rng.IntN(len(all))].ID, all[rng.IntN(len(all))].ID}
		}
		if rng.IntN(3) == 0 {
			m["authors"] = []string{keys[rng.IntN(len(keys))].pk}
		}
		if rng.IntN(3) == 0 {
			m["kinds"] = []int{kinds[rng.IntN(len(kinds))], kinds[rng.IntN(len(kinds))]}
		}
		for range rng.IntN(3) {
			m["#"+pick(names)] = []string{pick(values), pick(values)}
		}
		if rng.IntN(3) == 0 {
			m["since"] = 1000 + rng.IntN(50)
		}
		if rng.IntN(3) == 0 {
			m["until"] = 1000 + rng.IntN(50)
		}
		limit := 1000
		if rng.IntN(2) == 0 {
			limit = 1 + rng.IntN(20)
		}
		js, _ := json.Marshal(m)
		cases = append(cases, queryCase{string(js), limit})
	}
	for _, path := range []string{":memory:", filepath.Join(t.TempDir(), "q.db")} {
		t.Run(filepath.Base(path), func(t *testing.T) {
			testQueryAgreesWithMatch(t, path, all, cases)
		})
	}
}

type queryCase struct {
	filter string
	limit  int
}

func testQueryAgreesWithMatch(t *testing.T, path string, all []*nostr.Event, cases []queryCase) {
	ctx := context.Background()
	st, err := openStore(ctx, path, testBound)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	for _, ev := range all {
		raw, err := encodeEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := st.save(ctx, ev, raw, 0, false, 0, ""); err != nil || res != saved {
			t.Fatalf("save: %v %v", res, err)
		}
	}
	for i, c := range cases {
		f, limit := mustFilter(t, c.filter), c.limit
		var want []string
		for _, ev := range all {
			if tags := tagsOf(ev); len(want) < limit && f.matches(ev, &tags) {
				want = append(want, ev.ID)
			}
		}
		res, _, err := st.query(ctx, f, limit, -1, 0)
		if err != nil {
			t.Fatal(err)
		}
		got := make([]string, len(res))
		for j, e := range res {
			got[j] = e.id
		}
		if !slices.Equal(got, want) {
			t.Fatalf("filter %d %s limit %d:\nSQL   %v\nmatch %v", i, c.filter, limit, got, want)
		}
	}
}

func TestParseClientMessageRefusesOversizeCheaply(t *testing.T) {
	lim := testLimits()
	big := []byte(`["EVENT",` + strings.Repeat(`{"a":[`, lim.maxMessageLength) + `]`)
	// Many runs: a buffer pool refilled after a garbage collection costs
	// one run an allocation or two, which the average must not count.
	allocs := testing.AllocsPerRun(200, func() {
		if _, err := parseClientMessage(big, lim); err == nil {
			t.Fatal("oversized message accepted")
		}
	})
	if allocs > 5 {
		t.Fatalf("%v allocations to refuse an oversized message", allocs)
	}
}

func TestEventIDHint(t *testing.T) {
	id := strings.Repeat("ab", 32)
	for in, want := range map[string]string{
		`["EVENT",{"content":"x","id":"` + id + `"}]`:    id,
		`["EVENT",{"id":"` + strings.ToUpper(id) + `"}]`: "",
		`["REQ",{"id":"` + id + `"}]`:                    "",
		`["EVENT",{"content":[1,{"id":"x"}]}]`:           "",
		`not json`:                                       "",
	} {
		if got := eventIDHint([]byte(in)); got != want {
			t.Errorf("eventIDHint(%s) = %q, want %q", in, got, want)
		}
	}
}

func TestKindClass(t *testing.T) {
	for kind, want := range map[int]class{
		0: classReplaceable, 1: classRegular, 3: classReplaceable, 4339: classRegular, 9999: classRegular,
		10000: classReplaceable, 19999: classReplaceable, 20000: classEphemeral, 21339: classEphemeral,
		29999: classEphemeral, 30000: classAddressable, 31337: classAddressable, 39999: classAddressable,
		40000: classRegular, 65535: classRegular,
	} {
		if got := kindClass(kind); got != want {
			t.Errorf("kindClass(%d) = %d, want %d", kind, got, want)
		}
	}
}

// TestQueryPlans guards the indexes REQ relies on: no filter that names
// ids, authors, kinds or tags may scan the events table.
func TestQueryPlans(t *testing.T) {
	st, err := openStore(context.Background(), filepath.Join(t.TempDir(), "p.db"), testBound)
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	for js, want := range map[string]string{
		`{"kinds":[21339,4339],"#p":["x"]}`:    "SEARCH d USING INDEX tags_name_value",
		`{"kinds":[31337],"#skill":["x","y"]}`: "SEARCH d USING INDEX tags_name_value",
		`{"#p":["x"],"#e":["y"],"since":5}`:    "SEARCH d USING INDEX tags_name_value",
		`{"authors":["a"],"kinds":[1]}`:        "SEARCH e USING INDEX events_pubkey_kind",
		`{"kinds":[4339],"since":1}`:           "SEARCH e USING INDEX events_kind",
		`{"ids":["a","b"],"#p":["x"]}`:         "SEARCH e USING INDEX sqlite_autoindex_events_1",
		`{}`:                                   "SCAN e USING INDEX events_created",
	} {
		q, args := planFor(t, st, mustFilter(t, js))
		plan := testdb.QueryPlan(t, st.r, q, args...)
		if len(plan) == 0 || !strings.HasPrefix(plan[0], want) {
			t.Errorf("%s: plan %q, want it to start with %q", js, plan, want)
		}
		for _, step := range plan {
			if strings.HasPrefix(step, "SCAN e") && js != `{}` {
				t.Errorf("%s: full scan in plan %q", js, plan)
			}
		}
	}
}

// A REQ whose since is past every stored event answers from memory, and
// an event stored later is found again.
func TestStoreSinceWatermark(t *testing.T) {
	ctx := context.Background()
	s, err := openStore(ctx, filepath.Join(t.TempDir(), "w.db"), testBound)
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	k := nostr.GeneratePrivateKey()
	ev := nostr.Event{Kind: 1, CreatedAt: 1000, Content: "a"}
	ev.Sign(k)
	raw, _ := json.Marshal(ev)
	if _, err := s.save(ctx, &ev, raw, 0, false, 1000, ""); err != nil {
		t.Fatal(err)
	}
	q := func(since int64) int {
		f := &filter{since: since, hasSince: true}
		f.finish()
		got, _, err := s.query(ctx, f, 10, -1, 2000)
		if err != nil {
			t.Fatal(err)
		}
		return len(got)
	}
	if q(1000) != 1 || q(1001) != 0 {
		t.Fatalf("since 1000: %d, since 1001: %d; want 1 and 0", q(1000), q(1001))
	}
	// Per kind: a newer event of another kind does not make kind 1 match.
	other := nostr.Event{Kind: 2, CreatedAt: 1500, Content: "b"}
	other.Sign(k)
	rawOther, _ := json.Marshal(other)
	if _, err := s.save(ctx, &other, rawOther, 0, false, 1500, ""); err != nil {
		t.Fatal(err)
	}
	f := &filter{since: 1200, hasSince: true, kinds: []int{1}}
	f.finish()
	if s.storedSince(f) {
		t.Error("kind 1 since 1200 would query although its newest is 1000")
	}
	f2 := &filter{since: 1200, hasSince: true, kinds: []int{1, 2}}
	f2.finish()
	if !s.storedSince(f2) {
		t.Error("kinds 1, 2 since 1200 would skip the stored kind-2 event")
	}
	// Reopened, the mark comes from the database.
	path := filepath.Join(t.TempDir(), "w2.db")
	s2, _ := openStore(ctx, path, testBound)
	s2.save(ctx, &ev, raw, 0, false, 1000, "")
	s2.close()
	s3, err := openStore(ctx, path, testBound)
	if err != nil {
		t.Fatal(err)
	}
	defer s3.close()
	if s3.newest.Load() != 1000 {
		t.Errorf("reopened mark %d, want 1000", s3.newest.Load())
	}
}
