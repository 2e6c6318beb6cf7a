package relay

import (
	"fmt"
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
