package embedded

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// Past StoreMaxEvents the oldest stored events are deleted to make room:
// regular events first, then replaceable and addressable ones (agent
// cards), never the keep authors' replaceable and addressable events: the
// node's card stays however many events others publish.
func TestStoreBoundEvictsOldest(t *testing.T) {
	keeper, other := newKey(t), newKey(t)
	tr := startRelay(t, Config{StoreMaxEvents: 4, KeepAuthors: []string{keeper.pk}})
	c := dial(t, tr.url)
	ts := tr.clock.Unix()
	card := keeper.event(t, 31337, ts-100, "card", nostr.Tag{"d", "me"})
	c.mustPublish(card)
	peerCard := other.event(t, 31337, ts-100, "a peer's card", nostr.Tag{"d", "peer"})
	c.mustPublish(peerCard)
	c.mustPublish(keeper.event(t, 1, ts-99, "the keeper's note")) // regular: not kept
	var notes []string
	for i := range 5 {
		ev := other.event(t, 1, ts-50+nostr.Timestamp(i), strings.Repeat("x", i+1))
		c.mustPublish(ev)
		notes = append(notes, ev.ID)
	}
	if n, _ := tr.store.count(context.Background()); n != 4 {
		t.Fatalf("%d events stored, want the bound, 4", n)
	}
	if got := c.req("cards", map[string]any{"kinds": []int{31337}}); !sameIDs(got, card.ID, peerCard.ID) {
		t.Fatalf("cards %v, want both kept while regular events go first", got)
	}
	if got := c.req("notes", map[string]any{"kinds": []int{1}}); !slices.Equal(got, []string{notes[4], notes[3]}) {
		t.Fatalf("notes %v, want the two newest %v", got, notes[3:])
	}
	if n, _ := tr.store.takeEvicted(); n != 4 {
		t.Fatalf("%d evicted, want 4", n)
	}
	// Once no regular event is left, the oldest others go, but never the
	// keeper's card.
	var fresh []string
	pub := dial(t, tr.url) // c's subscriptions are open
	for i := range 3 {
		ev := other.event(t, 31337, ts+nostr.Timestamp(i), "another card", nostr.Tag{"d", fmt.Sprint("x", i)})
		pub.mustPublish(ev)
		fresh = append(fresh, ev.ID)
	}
	if got := pub.req("notes", map[string]any{"kinds": []int{1}}); len(got) != 0 {
		t.Fatalf("notes %v, want none left", got)
	}
	if got := pub.req("cards", map[string]any{"kinds": []int{31337}}); !sameIDs(got, append([]string{card.ID}, fresh...)...) {
		t.Fatalf("cards %v, want the keeper's and the three new ones %v", got, fresh)
	}
}

func sameIDs(got []string, want ...string) bool {
	return len(got) == len(want) && !slices.ContainsFunc(want, func(id string) bool { return !slices.Contains(got, id) })
}

// StoreMaxBytes bounds the JSON stored and its indexed tags, whatever the
// number of events.
func TestStoreBoundBytes(t *testing.T) {
	const bound = 8192 // the least it may be: four messages
	tr := startRelay(t, Config{MaxMessageLength: 2048, MaxContentLength: 1600, StoreMaxBytes: bound})
	c := dial(t, tr.url)
	k := newKey(t)
	var ids []string
	for i := range 8 {
		ev := k.event(t, 1, tr.clock.Unix()+nostr.Timestamp(i), strings.Repeat("b", 1500))
		if i%2 == 1 { // tags count twice more: their rows and index entries
			ev = k.event(t, 1, tr.clock.Unix()+nostr.Timestamp(i), strings.Repeat("b", 1000), nostr.Tag{"t", strings.Repeat("v", 200)})
		}
		c.mustPublish(ev)
		ids = append(ids, ev.ID)
		if total := storedBytes(t, tr.store); total > bound {
			t.Fatalf("after %d events: %d bytes counted, over the bound %d", i+1, total, bound)
		}
		if tr.store.bytes != storedBytes(t, tr.store) {
			t.Fatalf("after %d events: totals say %d bytes, the database %d", i+1, tr.store.bytes, storedBytes(t, tr.store))
		}
	}
	var raw, counted int64
	if err := tr.store.r.QueryRow("SELECT sum(length(raw)), sum(size) FROM events WHERE seq = (SELECT max(seq) FROM events)").Scan(&raw, &counted); err != nil {
		t.Fatal(err)
	}
	if counted != raw+2*(1+200) {
		t.Fatalf("the tagged event counts %d, want its JSON %d and its tag twice", counted, raw)
	}
	got := c.req("all", map[string]any{"kinds": []int{1}})
	if len(got) < 3 || got[0] != ids[7] || int64(len(got)) != tr.store.events {
		t.Fatalf("stored %v (totals %d), want the newest of %v", got, tr.store.events, ids)
	}
}

// Regular events are found for deletion through their own index.
func TestStoreBoundPlan(t *testing.T) {
	st, err := openStore(context.Background(), filepath.Join(t.TempDir(), "p.db"), storeBound{events: 10, bytes: 1 << 20, keep: []string{"k"}})
	if err != nil {
		t.Fatal(err)
	}
	defer st.close()
	var id, parent, unused int
	var detail string
	if err := st.r.QueryRow("EXPLAIN QUERY PLAN "+st.evictions[0].query, 0, 0, 8).Scan(&id, &parent, &unused, &detail); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(detail, "events_regular") {
		t.Fatalf("plan %q, want the events_regular index", detail)
	}
}

// A replacement and an expiry free their room: the totals follow what
// the database holds, so nothing is deleted that fits.
func TestStoreBoundCountsReplacementsAndExpiry(t *testing.T) {
	tr := startRelay(t, Config{StoreMaxEvents: 3})
	c := dial(t, tr.url)
	k := newKey(t)
	ts := tr.clock.Unix()
	first := k.event(t, 1, ts, "stays")
	c.mustPublish(first)
	for i := range 4 { // one replaceable event, replaced three times
		c.mustPublish(k.event(t, 10002, ts+nostr.Timestamp(i), "relays"))
	}
	c.mustPublish(k.event(t, 1, ts, "expires soon", nostr.Tag{"expiration", "1700000010"}))
	if n, _ := tr.store.takeEvicted(); n != 0 {
		t.Fatalf("%d evicted with three events stored", n)
	}
	tr.clock.Advance(60)
	if _, err := tr.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.mustPublish(k.event(t, 1, tr.clock.Unix(), "fits in the expired one's room"))
	if n, _ := tr.store.takeEvicted(); n != 0 {
		t.Fatalf("%d evicted although the expired event's room was free", n)
	}
	if got := c.req("first", map[string]any{"ids": []string{first.ID}}); len(got) != 1 {
		t.Fatal("the first event was deleted")
	}
}

// A database past a lowered bound is trimmed when it is opened, oldest
// first, and the bound holds for what is stored next.
func TestStoreBoundTrimsOnOpen(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "r.db")
	s, err := openStore(ctx, path, testBound)
	if err != nil {
		t.Fatal(err)
	}
	sk := nostr.GeneratePrivateKey()
	var ids []string
	save := func(s *store, i int) {
		ev := nostr.Event{Kind: 1, CreatedAt: nostr.Timestamp(1000 + i), Content: "n"}
		ev.Sign(sk)
		raw, _ := json.Marshal(ev)
		if _, err := s.save(ctx, &ev, raw, 0, false, 2000, ""); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, ev.ID)
	}
	for i := range 10 {
		save(s, i)
	}
	s.close()
	s, err = openStore(ctx, path, storeBound{events: 4, bytes: DefaultStoreMaxBytes})
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	if n, _ := s.count(ctx); n != 4 || s.events != 4 {
		t.Fatalf("reopened with a bound of 4: %d stored, totals say %d", n, s.events)
	}
	save(s, 10)
	f := &filter{}
	f.finish()
	got, _, err := s.query(ctx, f, 100, -1, 2000)
	if err != nil {
		t.Fatal(err)
	}
	var gotIDs []string
	for _, e := range got {
		gotIDs = append(gotIDs, e.id)
	}
	want := slices.Clone(ids[7:])
	slices.Reverse(want)
	if !slices.Equal(gotIDs, want) {
		t.Fatalf("stored %v, want the four newest %v", gotIDs, want)
	}
}

func storedBytes(t *testing.T, s *store) int64 {
	t.Helper()
	var n int64
	if err := s.r.QueryRow("SELECT coalesce(sum(coalesce(size, length(raw))), 0) FROM events").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
