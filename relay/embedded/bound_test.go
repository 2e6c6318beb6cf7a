package embedded

import (
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// Past StoreMaxEvents the oldest stored events are deleted to make room,
// except the keep authors' replaceable and addressable events: the
// node's card stays however many events others publish.
func TestStoreBoundEvictsOldest(t *testing.T) {
	keeper, other := newKey(t), newKey(t)
	tr := startRelay(t, Config{StoreMaxEvents: 3, KeepAuthors: []string{keeper.pk}})
	c := dial(t, tr.url)
	ts := tr.clock.Unix()
	card := keeper.event(t, 31337, ts-100, "card", nostr.Tag{"d", "me"})
	c.mustPublish(card)
	own := keeper.event(t, 1, ts-99, "the keeper's note") // regular: not kept
	c.mustPublish(own)
	var notes []string
	for i := range 5 {
		ev := other.event(t, 1, ts-50+nostr.Timestamp(i), strings.Repeat("x", i+1))
		c.mustPublish(ev)
		notes = append(notes, ev.ID)
	}
	if n, _ := tr.store.count(context.Background()); n != 3 {
		t.Fatalf("%d events stored, want the bound, 3", n)
	}
	if got := c.req("card", map[string]any{"kinds": []int{31337}}); !slices.Equal(got, []string{card.ID}) {
		t.Fatalf("the kept author's card: %v, want it kept", got)
	}
	if got := c.req("notes", map[string]any{"kinds": []int{1}}); !slices.Equal(got, []string{notes[4], notes[3]}) {
		t.Fatalf("notes %v, want the two newest %v", got, notes[3:])
	}
	if n := tr.store.takeEvicted(); n != 4 {
		t.Fatalf("%d evicted, want 4", n)
	}
}

// StoreMaxBytes bounds the JSON stored, whatever the number of events.
func TestStoreBoundBytes(t *testing.T) {
	const bound = 6000
	tr := startRelay(t, Config{MaxMessageLength: 4096, MaxContentLength: 2048, StoreMaxBytes: bound})
	c := dial(t, tr.url)
	k := newKey(t)
	var ids []string
	for i := range 8 {
		ev := k.event(t, 1, tr.clock.Unix()+nostr.Timestamp(i), strings.Repeat("b", 1500))
		c.mustPublish(ev)
		ids = append(ids, ev.ID)
		if total := storedBytes(t, tr.store); total > bound {
			t.Fatalf("after %d events: %d bytes stored, over the bound %d", i+1, total, bound)
		}
	}
	got := c.req("all", map[string]any{"kinds": []int{1}})
	if len(got) != 3 || got[0] != ids[7] {
		t.Fatalf("stored %v, want the three newest of %v", got, ids)
	}
	if tr.store.bytes != storedBytes(t, tr.store) || tr.store.events != 3 {
		t.Fatalf("totals %d events, %d bytes; the database holds 3 and %d", tr.store.events, tr.store.bytes, storedBytes(t, tr.store))
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
	if n := tr.store.takeEvicted(); n != 0 {
		t.Fatalf("%d evicted with three events stored", n)
	}
	tr.clock.Advance(60)
	if _, err := tr.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	c.mustPublish(k.event(t, 1, tr.clock.Unix(), "fits in the expired one's room"))
	if n := tr.store.takeEvicted(); n != 0 {
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
		if _, err := s.save(ctx, &ev, raw, 0, false, 2000); err != nil {
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
	got, err := s.query(ctx, f, 100, -1, 2000)
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
	if err := s.r.QueryRow("SELECT coalesce(sum(length(raw)), 0) FROM events").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}
