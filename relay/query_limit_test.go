package relay

import (
	"fmt"
	"slices"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// storedRelay answers each REQ with evs, whatever its filter's limit,
// then EOSE.
func storedRelay(t *testing.T, evs []*nostr.Event) *hostileRelay {
	t.Helper()
	return newHostileRelay(t, func(frame []byte, write func([]byte) error) {
		req, ok := nostr.ParseMessage(frame).(*nostr.ReqEnvelope)
		if !ok {
			return
		}
		for _, ev := range evs {
			b, _ := nostr.EventEnvelope{SubscriptionID: &req.SubscriptionID, Event: *ev}.MarshalJSON()
			if write(b) != nil {
				return
			}
		}
		b, _ := nostr.EOSEEnvelope(req.SubscriptionID).MarshalJSON()
		_ = write(b)
	})
}

// A relay that ignores a query's limit and answers with more events than
// the query may hold (distinct, signed, matching the filter: anyone can
// make them) no longer fails the query for every relay: past the limit,
// a relay's events are dropped unchecked. It made every Query with a
// limit, card discovery's among them, fail with ErrQueryTruncated
// however small its limit, so one hostile relay kept every agent from
// being discovered through the others.
func TestQueryHoldsARelayToTheLimit(t *testing.T) {
	const limit, flood = 5, 60
	var evs []*nostr.Event
	for i := range flood {
		evs = append(evs, ptEvent(t, ptNow()-nostr.Timestamp(i), fmt.Sprintf("flood %d", i)))
	}
	honest := ptEvent(t, ptNow()-1000, "honest")
	bad, good := storedRelay(t, evs), storedRelay(t, []*nostr.Event{honest})
	p := NewPool(PoolConfig{URLs: []string{bad.url, good.url}, Logger: ptLogger(), QueryMaxEvents: 20})
	p.Start(t.Context())
	defer p.Close()
	f := ptFilter()
	f.Limit = limit
	got, err := p.Query(t.Context(), f)
	if err != nil {
		t.Fatalf("query with limit %d, one relay sending %d events: %v", limit, flood, err)
	}
	found := false
	for _, ev := range got {
		found = found || ev.ID == honest.ID
	}
	if !found || len(got) > limit+1 {
		t.Fatalf("got %d events (honest one among them: %v), want at most %d of the flood and the honest one", len(got), found, limit)
	}
	if st := p.Health()[0]; st.EventsInvalid != 0 {
		t.Fatalf("%d events past the limit counted invalid", st.EventsInvalid)
	}
}

// QuerySources names every relay that brought each event, the ones whose
// copy came after another relay's included.
func TestQuerySourcesNamesEveryRelayThatBroughtAnEvent(t *testing.T) {
	both := ptEvent(t, ptNow()-10, "on both")
	onlyA := ptEvent(t, ptNow()-20, "on a")
	a, b := storedRelay(t, []*nostr.Event{both, onlyA}), storedRelay(t, []*nostr.Event{both})
	p := NewPool(PoolConfig{URLs: []string{a.url, b.url}, Logger: ptLogger()})
	p.Start(t.Context())
	defer p.Close()
	got, err := p.QuerySources(t.Context(), ptFilter(), QueryOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{both.ID: {a.url, b.url}, onlyA.ID: {a.url}}
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d", len(got), len(want))
	}
	for _, s := range got {
		w, ok := want[s.Event.ID]
		if !ok {
			t.Fatalf("unexpected event %s", s.Event.ID)
		}
		slices.Sort(s.Relays)
		slices.Sort(w)
		if !slices.Equal(s.Relays, w) {
			t.Errorf("event %q: relays %v, want %v", s.Event.Content, s.Relays, w)
		}
	}
}

// QueryOptions.Until ends the query on each relay named there at its own
// point: an event a relay brings past its point is dropped, one another
// relay brings up to the filter's Until is kept, and past it dropped.
func TestQuerySourcesUntilEachRelay(t *testing.T) {
	now := ptNow()
	newA, oldA := ptEvent(t, now-10, "new on a"), ptEvent(t, now-20, "old on a")
	newB, newest := ptEvent(t, now-10, "new on b"), ptEvent(t, now-3, "past the filter on b")
	a, b := storedRelay(t, []*nostr.Event{newA, oldA}), storedRelay(t, []*nostr.Event{newest, newB})
	p := NewPool(PoolConfig{URLs: []string{a.url, b.url}, Logger: ptLogger()})
	p.Start(t.Context())
	defer p.Close()
	f := ptFilter()
	f.Until = new(now - 5)
	got, err := p.QuerySources(t.Context(), f, QueryOptions{Until: map[string]nostr.Timestamp{a.url + "/": now - 15}})
	if err != nil {
		t.Fatal(err)
	}
	var contents []string
	for _, s := range got {
		contents = append(contents, s.Event.Content)
	}
	slices.Sort(contents)
	if want := []string{"new on b", "old on a"}; !slices.Equal(contents, want) {
		t.Fatalf("got %q, want %q", contents, want)
	}
}
