package embedded

import (
	"context"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/testdb"
)

// peerHoldings returns what each peer holds by its stored events, and
// checks that peer_usage, which the triggers keep, says the same.
func peerHoldings(t *testing.T, s *store) map[string][2]int64 {
	t.Helper()
	read := func(q string) map[string][2]int64 {
		t.Helper()
		rows, err := s.r.QueryContext(context.Background(), q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		m := map[string][2]int64{}
		for rows.Next() {
			var p string
			var n, b int64
			if err := rows.Scan(&p, &n, &b); err != nil {
				t.Fatal(err)
			}
			m[p] = [2]int64{n, b}
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return m
	}
	counted := read("SELECT peer, count(*), sum(coalesce(size, length(raw))) FROM events WHERE peer <> '' GROUP BY peer")
	kept := read("SELECT peer, events, bytes FROM peer_usage")
	if !maps.Equal(counted, kept) {
		t.Fatalf("peer_usage %v, but the events say %v", kept, counted)
	}
	return counted
}

// One peer past its share of the store loses its own oldest events,
// regular ones first, never the keep authors' card it passed on; other
// peers, loopback clients and the node keep theirs. Without a share
// (StorePeerShare 0, as before) the same flood makes the relay forget
// the other peer's events.
func TestStorePeerShare(t *testing.T) {
	keeper, flooder, other := newKey(t), newKey(t), newKey(t)
	for _, c := range []struct {
		name  string
		share float64
	}{{"share", 0.3}, {"no share", 0}} {
		t.Run(c.name, func(t *testing.T) {
			tr := startRelay(t, Config{StoreMaxEvents: 10, StorePeerShare: c.share, KeepAuthors: []string{keeper.pk}})
			url := frontRelay(t, tr.Relay)
			a, b, local := mustDialFrom(t, url, "203.0.113.7"), mustDialFrom(t, url, "198.51.100.1"), mustDialFrom(t, url, "")
			ts := tr.clock.Unix()
			card := keeper.event(t, 31337, ts-200, "the node's card", nostr.Tag{"d", "me"})
			a.mustPublish(card) // passed on by the flooder: counts against its share
			own := flooder.event(t, 31337, ts-199, "the flooder's card", nostr.Tag{"d", "f"})
			a.mustPublish(own)
			var others, locals []string
			for i := range 2 {
				ev := other.event(t, 1, ts-150+nostr.Timestamp(i), fmt.Sprint("b ", i))
				b.mustPublish(ev)
				others = append(others, ev.ID)
				ev = other.event(t, 1, ts-140+nostr.Timestamp(i), fmt.Sprint("local ", i))
				local.mustPublish(ev)
				locals = append(locals, ev.ID)
			}
			var flood []string
			for i := range 20 {
				ev := flooder.event(t, 1, ts-100+nostr.Timestamp(i), fmt.Sprint("flood ", i))
				a.mustPublish(ev)
				flood = append(flood, ev.ID)
			}
			// A fresh client for each query: a req's subscription stays open.
			query := func(f map[string]any) []string { t.Helper(); return dial(t, tr.url).req("q", f) }
			notes := func(author key) []string {
				t.Helper()
				return query(map[string]any{"kinds": []int{1}, "authors": []string{author.pk}})
			}
			held := peerHoldings(t, tr.store)
			bound, share := tr.store.takeEvicted()
			if c.share == 0 {
				// The bound alone: the oldest go, the other peer's first.
				if got := notes(other); len(got) != 0 {
					t.Fatalf("without a share the other peer's notes %v stayed; the test no longer shows what the share is for", got)
				}
				if share != 0 || bound == 0 {
					t.Fatalf("evicted %d by the bound, %d by shares; want some by the bound only", bound, share)
				}
				return
			}
			// A holds 3 (0.3 of 10): the node's card it passed on, its own
			// card (regular events go first) and its newest note.
			if got := held["203.0.113.7"]; got[0] != 3 {
				t.Fatalf("the flooder holds %v, want 3 events", got)
			}
			if got := notes(flooder); !slices.Equal(got, flood[19:]) {
				t.Fatalf("the flooder's notes %v, want its newest %v", got, flood[19:])
			}
			if got := query(map[string]any{"kinds": []int{31337}}); !sameIDs(got, card.ID, own.ID) {
				t.Fatalf("cards %v, want both kept while the flooder's notes go first", got)
			}
			if got := notes(other); !sameIDs(got, append(others, locals...)...) {
				t.Fatalf("the other notes %v, want the peer's %v and the loopback client's %v", got, others, locals)
			}
			if share != 19 || bound != 0 {
				t.Fatalf("evicted %d by the bound, %d by shares; want 19 by the share only", bound, share)
			}
			if _, ok := held[""]; ok {
				t.Fatal("loopback clients hold a share")
			}
			// Once the flooder's notes are gone, its other events go
			// (oldest first), never the node's card.
			for i := range 3 {
				a.mustPublish(flooder.event(t, 31337, ts+nostr.Timestamp(i), "another card", nostr.Tag{"d", fmt.Sprint("x", i)}))
			}
			if got := notes(flooder); len(got) != 0 {
				t.Fatalf("the flooder's notes %v, want none left", got)
			}
			got := query(map[string]any{"kinds": []int{31337}})
			if !slices.Contains(got, card.ID) || slices.Contains(got, own.ID) || len(got) != 3 {
				t.Fatalf("cards %v, want the node's and the flooder's two newest", got)
			}
			peerHoldings(t, tr.store)
		})
	}
}

// A peer's share holds its bytes as well as its events: large events
// push its own older ones out once their sizes pass the share.
func TestStorePeerShareBytes(t *testing.T) {
	const maxMsg = 2048 // the share's floor, 4 × 2,048, is below 0.1 of 100,000
	tr := startRelay(t, Config{MaxMessageLength: maxMsg, StoreMaxBytes: 100_000, StorePeerShare: 0.1})
	if got := tr.store.peerBytes; got != 10_000 {
		t.Fatalf("share of bytes %d, want 10,000 (0.1 of 100,000)", got)
	}
	url := frontRelay(t, tr.Relay)
	a := mustDialFrom(t, url, "2001:db8::1")
	k := newKey(t)
	var ids []string
	for i := range 8 { // about 1,850 bytes each
		ev := k.event(t, 1, tr.clock.Unix()+nostr.Timestamp(i), strings.Repeat(fmt.Sprint(i), 1500))
		a.mustPublish(ev)
		ids = append(ids, ev.ID)
	}
	held := peerHoldings(t, tr.store)["2001:db8::"]
	size := held[1] / max(held[0], 1)
	// Within the share, and no more deleted than it takes: one event
	// more would pass it.
	if held[1] > 10_000 || held[1]+size <= 10_000 || held[0] >= 8 {
		t.Fatalf("the peer holds %v (events, bytes), want its share of 10,000 bytes used up to one event", held)
	}
	if got := dial(t, tr.url).req("notes", map[string]any{"kinds": []int{1}}); !sameIDs(got, ids[8-held[0]:]...) {
		t.Fatalf("notes %v, want the %d newest %v", got, held[0], ids[8-held[0]:])
	}
}

// What a peer holds is counted whatever deletes its events: replacing
// its replaceable event and the sweep of expired ones keep peer_usage
// right; a share lowered since the events were stored is applied when
// the store opens.
func TestStorePeerShareKeptAndTrimmed(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "relay.db")
	open := func(b storeBound) *store {
		t.Helper()
		b.events, b.bytes = 1000, 1<<30
		s, err := openStore(ctx, path, b)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := open(storeBound{})
	k := newKey(t)
	save := func(ev *nostr.Event, exp int64, peer string) {
		t.Helper()
		raw, err := liveEvent(ev).json()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.save(ctx, ev, raw, exp, exp != 0, 1000, peer); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 8 {
		save(k.event(t, 1, nostr.Timestamp(1000+i), fmt.Sprint("note ", i)), 0, "p")
	}
	save(k.event(t, 0, 1000, "profile"), 0, "p")
	save(k.event(t, 0, 1001, "newer profile"), 0, "q") // replaces p's
	save(k.event(t, 1, 1002, "expires"), 1500, "q")
	if n, err := s.deleteExpired(ctx, 2000); err != nil || n != 1 {
		t.Fatalf("swept %d, %v; want 1", n, err)
	}
	if got := peerHoldings(t, s); got["p"][0] != 8 || got["q"][0] != 1 {
		t.Fatalf("holdings %v, want p 8 events, q 1", got)
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	s = open(storeBound{peerEvents: 5, peerBytes: 1 << 30})
	defer s.close()
	if got := peerHoldings(t, s); got["p"][0] != 5 || got["q"][0] != 1 {
		t.Fatalf("holdings after opening with a share of 5 %v, want p 5 events, q 1", got)
	}
	var oldest int64
	if err := s.r.QueryRowContext(ctx, "SELECT min(created_at) FROM events WHERE peer = 'p'").Scan(&oldest); err != nil || oldest != 1003 {
		t.Fatalf("p's oldest left is from %d (%v), want 1003: the oldest three went", oldest, err)
	}
}

func TestStorePeerShareConfig(t *testing.T) {
	for _, share := range []float64{-0.1, 1.5} {
		if _, err := New(Config{StorePeerShare: share}); err == nil || !strings.Contains(err.Error(), "StorePeerShare") {
			t.Errorf("StorePeerShare %g: %v, want an error naming it", share, err)
		}
	}
}

// The search for a peer's oldest events goes through its own indexes,
// not through every event stored before them: a partial index serves a
// query only if the query repeats its condition.
func TestStorePeerShareUsesItsIndex(t *testing.T) {
	ctx := context.Background()
	s, err := openStore(ctx, filepath.Join(t.TempDir(), "relay.db"), storeBound{events: 1000, bytes: 1 << 30, peerEvents: 5, peerBytes: 1 << 30, keep: []string{strings.Repeat("a", 64)}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.close()
	for i, want := range []string{"events_peer_regular (peer=? AND seq>?)", "events_peer (peer=? AND seq>?)"} {
		tier := s.peerEvictions[i]
		args := append(append([]any{"203.0.113.7", int64(-1), int64(-1)}, tier.args...), 8)
		plan := testdb.QueryPlan(t, s.w, tier.query, args...)
		if len(plan) != 1 || !strings.Contains(plan[0], "USING") || !strings.HasSuffix(plan[0], want) {
			t.Errorf("tier %d: plan %q, want a search of %s", i, plan, want)
		}
	}
}
