package embedded

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/peercap"
)

func TestPublishOK(t *testing.T) {
	tr := startRelay(t, Config{})
	c := dial(t, tr.url)
	k := newKey(t)
	now := tr.clock.Unix()

	ev := k.event(t, 1, now, "hello")
	if ok, why := c.publish(ev); !ok || why != "" {
		t.Fatalf("valid event: ok=%v %q", ok, why)
	}
	if ok, why := c.publish(ev); !ok || !strings.HasPrefix(why, "duplicate:") {
		t.Fatalf("duplicate: ok=%v %q, want true duplicate:", ok, why)
	}

	badID := k.event(t, 1, now, "bad id")
	badID.Content = "changed after signing"
	if ok, why := c.publish(badID); ok || !strings.HasPrefix(why, "invalid:") {
		t.Fatalf("bad id: ok=%v %q", ok, why)
	}

	badSig := k.event(t, 1, now, "bad sig")
	other := k.event(t, 1, now, "other")
	badSig.Sig = other.Sig
	if ok, why := c.publish(badSig); ok || !strings.HasPrefix(why, "invalid:") {
		t.Fatalf("bad sig: ok=%v %q", ok, why)
	}

	// Upper-case hex, a missing field, a null tag element: invalid, and the
	// OK carries the id.
	upper := k.event(t, 1, now, "upper")
	upper.ID = strings.ToUpper(upper.ID)
	if ok, why := c.publish(upper); ok || !strings.HasPrefix(why, "invalid:") {
		t.Fatalf("upper-case id: ok=%v %q", ok, why)
	}
	noSig := k.event(t, 1, now, "no sig")
	c.sendRaw([]byte(fmt.Sprintf(`["EVENT",{"id":%q,"pubkey":%q,"created_at":%d,"kind":1,"tags":[],"content":"no sig"}]`, noSig.ID, noSig.PubKey, now)))
	if m := c.expect("OK"); m.str(0) != noSig.ID || !strings.HasPrefix(m.str(2), "invalid:") {
		t.Fatalf("missing sig: %s", joinRaw(m.args))
	}
	c.sendRaw([]byte(fmt.Sprintf(`["EVENT",{"id":%q,"pubkey":%q,"created_at":%d,"kind":1,"tags":[["p",null]],"content":"","sig":%q}]`, noSig.ID, noSig.PubKey, now, noSig.Sig)))
	if m := c.expect("OK"); !strings.HasPrefix(m.str(2), "invalid:") {
		t.Fatalf("null in tag: %s", joinRaw(m.args))
	}

	// Only the valid event is stored.
	if got := c.req("all", map[string]any{}); !slices.Equal(got, ids(ev)) {
		t.Fatalf("stored %v, want %v", got, ids(ev))
	}
}

func TestReqFilters(t *testing.T) {
	tr := startRelay(t, Config{})
	c := dial(t, tr.url)
	alice, bob := newKey(t), newKey(t)
	now := tr.clock.Unix()

	e1 := alice.event(t, 1, now-50, "one", nostr.Tag{"p", bob.pk})
	e2 := alice.event(t, 4339, now-40, "two", nostr.Tag{"p", bob.pk}, nostr.Tag{"e", e1.ID})
	e3 := bob.event(t, 4339, now-30, "three", nostr.Tag{"p", alice.pk}, nostr.Tag{"e", e1.ID})
	card := bob.event(t, 31337, now-20, "{}", nostr.Tag{"d", "bc1pbob"}, nostr.Tag{"skill", "translate", "Translate"}, nostr.Tag{"skill", "summarize", "Summarize"})
	card2 := alice.event(t, 31337, now-10, "{}", nostr.Tag{"d", "bc1palice"}, nostr.Tag{"skill", "summarize", "Summarize"})
	for _, ev := range []*nostr.Event{e1, e2, e3, card, card2} {
		c.mustPublish(ev)
	}

	for _, tc := range []struct {
		name   string
		filter map[string]any
		want   []*nostr.Event
	}{
		{"all newest first", map[string]any{}, []*nostr.Event{card2, card, e3, e2, e1}},
		{"ids", map[string]any{"ids": []string{e1.ID, e3.ID}}, []*nostr.Event{e3, e1}},
		{"authors", map[string]any{"authors": []string{alice.pk}}, []*nostr.Event{card2, e2, e1}},
		{"kinds", map[string]any{"kinds": []int{4339}}, []*nostr.Event{e3, e2}},
		{"#p", map[string]any{"#p": []string{bob.pk}}, []*nostr.Event{e2, e1}},
		{"#e", map[string]any{"#e": []string{e1.ID}}, []*nostr.Event{e3, e2}},
		{"#p and #e", map[string]any{"#p": []string{bob.pk}, "#e": []string{e1.ID}}, []*nostr.Event{e2}},
		{"#d", map[string]any{"kinds": []int{31337}, "#d": []string{"bc1pbob"}}, []*nostr.Event{card}},
		{"#skill", map[string]any{"kinds": []int{31337}, "#skill": []string{"summarize"}}, []*nostr.Event{card2, card}},
		{"#skill one", map[string]any{"#skill": []string{"translate", "nothing"}}, []*nostr.Event{card}},
		{"#skill matches the first value only", map[string]any{"#skill": []string{"Translate"}}, nil},
		{"since", map[string]any{"since": int64(now - 30)}, []*nostr.Event{card2, card, e3}},
		{"until", map[string]any{"until": int64(now - 40)}, []*nostr.Event{e2, e1}},
		{"since and until", map[string]any{"since": int64(now - 40), "until": int64(now - 20)}, []*nostr.Event{card, e3, e2}},
		{"limit", map[string]any{"limit": 2}, []*nostr.Event{card2, card}},
		{"limit 0", map[string]any{"limit": 0}, nil},
		{"kinds and authors", map[string]any{"kinds": []int{4339}, "authors": []string{bob.pk}}, []*nostr.Event{e3}},
		{"empty ids", map[string]any{"ids": []string{}}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := c.req("s", tc.filter)
			if want := ids(tc.want...); !slices.Equal(got, want) {
				t.Fatalf("got %v\nwant %v", got, want)
			}
		})
	}

	// Several filters: union, newest first, each event once, each filter
	// with its own limit.
	got := c.req("multi", map[string]any{"#p": []string{bob.pk}}, map[string]any{"kinds": []int{4339}}, map[string]any{"kinds": []int{31337}, "limit": 1})
	if want := ids(card2, e3, e2, e1); !slices.Equal(got, want) {
		t.Fatalf("multi-filter: got %v\nwant %v", got, want)
	}
}

func TestLiveDeliveryAndClose(t *testing.T) {
	tr := startRelay(t, Config{})
	sub, pub := dial(t, tr.url), dial(t, tr.url)
	k, target := newKey(t), newKey(t)
	now := tr.clock.Unix()

	old := k.event(t, 4339, now-5, "stored", nostr.Tag{"p", target.pk})
	pub.mustPublish(old)
	if got := sub.req("live", map[string]any{"kinds": []int{21339, 4339}, "#p": []string{target.pk}}); !slices.Equal(got, ids(old)) {
		t.Fatalf("stored: %v", got)
	}
	// After EOSE, matching events arrive live; others do not.
	pub.mustPublish(k.event(t, 4339, now, "not for target", nostr.Tag{"p", k.pk}))
	live := k.event(t, 21339, now, "live", nostr.Tag{"p", target.pk})
	pub.mustPublish(live)
	m := sub.expect("EVENT")
	if m.str(0) != "live" || m.event(1).ID != live.ID {
		t.Fatalf("live: %s", joinRaw(m.args))
	}
	if !m.event(1).CheckID() {
		t.Fatal("delivered event has a wrong id")
	}

	// CLOSE stops delivery. A connection's messages are handled in
	// order, so the EOSE of a REQ sent after CLOSE says CLOSE is done;
	// only then is the next event published (from another connection,
	// which the relay may otherwise serve first). A REQ on another id
	// afterwards acts as a barrier: its EOSE comes after anything still
	// queued.
	sub.send("CLOSE", "live")
	if got := sub.req("sync", map[string]any{"kinds": []int{7}, "authors": []string{target.pk}, "limit": 0}); len(got) != 0 {
		t.Fatalf("sync: %v", got) // a filter nothing here matches
	}
	pub.mustPublish(k.event(t, 21339, now, "after close", nostr.Tag{"p", target.pk}))
	if got := sub.req("barrier", map[string]any{"limit": 0}); len(got) != 0 {
		t.Fatalf("barrier: %v", got)
	}
	pub.mustPublish(k.event(t, 1, now, "kind 1"))
	m = sub.expect("EVENT")
	if m.str(0) != "barrier" {
		t.Fatalf("event for closed subscription: %s", joinRaw(m.args))
	}
	if tr.hub.size() == 0 {
		t.Fatal("hub lost the open subscription")
	}
}

func TestReqReplacesSubscription(t *testing.T) {
	tr := startRelay(t, Config{})
	c, pub := dial(t, tr.url), dial(t, tr.url)
	k := newKey(t)
	now := tr.clock.Unix()
	c.req("s", map[string]any{"kinds": []int{1}})
	c.req("s", map[string]any{"kinds": []int{2}})
	pub.mustPublish(k.event(t, 1, now, "kind 1"))
	two := k.event(t, 2, now, "kind 2")
	pub.mustPublish(two)
	m := c.expect("EVENT")
	if m.event(1).ID != two.ID {
		t.Fatalf("replaced subscription still delivers: %s", joinRaw(m.args))
	}
}

func TestEventDeliveredOncePerSubscription(t *testing.T) {
	tr := startRelay(t, Config{})
	c := dial(t, tr.url)
	k := newKey(t)
	c.req("s", map[string]any{"kinds": []int{1}}, map[string]any{"authors": []string{k.pk}}, map[string]any{"#t": []string{"a", "b"}})
	ev := k.event(t, 1, tr.clock.Unix(), "x", nostr.Tag{"t", "a"}, nostr.Tag{"t", "b"})
	c.send("EVENT", ev)
	var events, oks int
	for range 2 {
		switch m := c.read(); m.typ {
		case "EVENT":
			events++
		case "OK":
			oks++
		}
	}
	if events != 1 || oks != 1 {
		t.Fatalf("got %d EVENT and %d OK, want one each", events, oks)
	}
	if got := c.req("barrier", map[string]any{"limit": 0}); len(got) != 0 {
		t.Fatal(got)
	}
}

func TestEphemeralNotStored(t *testing.T) {
	tr := startRelay(t, Config{})
	sub, pub := dial(t, tr.url), dial(t, tr.url)
	k := newKey(t)
	sub.req("eph", map[string]any{"kinds": []int{21339}})
	ev := k.event(t, 21339, tr.clock.Unix(), "ephemeral", nostr.Tag{"p", k.pk})
	pub.mustPublish(ev)
	if m := sub.expect("EVENT"); m.event(1).ID != ev.ID {
		t.Fatal("wrong event")
	}
	if got := pub.req("after", map[string]any{"kinds": []int{21339}}); len(got) != 0 {
		t.Fatalf("ephemeral event was stored: %v", got)
	}
	if n, _ := tr.store.count(context.Background()); n != 0 {
		t.Fatalf("%d rows stored", n)
	}
}

func TestReplaceable(t *testing.T) {
	tr := startRelay(t, Config{})
	c := dial(t, tr.url)
	k := newKey(t)
	now := tr.clock.Unix()

	v1 := k.event(t, 0, now-10, `{"name":"v1"}`)
	v2 := k.event(t, 0, now-5, `{"name":"v2"}`)
	c.mustPublish(v1)
	c.mustPublish(v2)
	if got := c.req("r", map[string]any{"kinds": []int{0}}); !slices.Equal(got, ids(v2)) {
		t.Fatalf("after replacement: %v, want %v", got, ids(v2))
	}
	// An older version is not stored, and answered as a duplicate.
	if ok, why := c.publish(v1); !ok || !strings.HasPrefix(why, "duplicate:") || !strings.Contains(why, "newer version") {
		t.Fatalf("older version: ok=%v %q", ok, why)
	}
	// Kind 10000-19999 and 3 are replaceable too.
	for _, kind := range []int{3, 10002} {
		a := k.event(t, kind, now-3, "a")
		b := k.event(t, kind, now-2, "b")
		c.mustPublish(a)
		c.mustPublish(b)
		if got := c.req("r", map[string]any{"kinds": []int{kind}}); !slices.Equal(got, ids(b)) {
			t.Fatalf("kind %d: %v", kind, got)
		}
	}
}

// tiePair signs two events of kind with the same created_at and returns
// them as (lower id, higher id).
func tiePair(t *testing.T, k key, kind int, at nostr.Timestamp, tags ...nostr.Tag) (lo, hi *nostr.Event) {
	a := k.event(t, kind, at, "first", tags...)
	b := k.event(t, kind, at, "second", tags...)
	if a.ID < b.ID {
		return a, b
	}
	return b, a
}

func TestReplaceableTieLowestIDWins(t *testing.T) {
	for _, order := range []string{"low first", "high first"} {
		t.Run(order, func(t *testing.T) {
			tr := startRelay(t, Config{})
			c := dial(t, tr.url)
			k := newKey(t)
			lo, hi := tiePair(t, k, 0, tr.clock.Unix())
			if order == "low first" {
				c.mustPublish(lo)
				if ok, why := c.publish(hi); !ok || !strings.HasPrefix(why, "duplicate:") {
					t.Fatalf("higher id: OK %v %q, want true duplicate: …", ok, why)
				}
			} else {
				c.mustPublish(hi)
				c.mustPublish(lo)
			}
			if got := c.req("r", map[string]any{"kinds": []int{0}}); !slices.Equal(got, ids(lo)) {
				t.Fatalf("kept %v, want the lowest id %s", got, lo.ID)
			}
		})
	}
}

func TestAddressable(t *testing.T) {
	tr := startRelay(t, Config{})
	c := dial(t, tr.url)
	k, other := newKey(t), newKey(t)
	now := tr.clock.Unix()

	a1 := k.event(t, 31337, now-10, "a1", nostr.Tag{"d", "a"})
	a2 := k.event(t, 31337, now-5, "a2", nostr.Tag{"d", "a"})
	b1 := k.event(t, 31337, now-8, "b1", nostr.Tag{"d", "b"})
	noD := k.event(t, 31337, now-7, "no d") // the d tag defaults to ""
	emptyD := k.event(t, 31337, now-6, "empty d", nostr.Tag{"d", ""})
	o1 := other.event(t, 31337, now-9, "other a", nostr.Tag{"d", "a"})
	for _, ev := range []*nostr.Event{a1, a2, b1, noD, emptyD, o1} {
		c.mustPublish(ev)
	}
	got := c.req("r", map[string]any{"kinds": []int{31337}})
	if want := ids(a2, emptyD, b1, o1); !slices.Equal(got, want) {
		t.Fatalf("got %v\nwant %v", got, want)
	}
	// Tie on one address: the lowest id stays, whatever the order.
	lo, hi := tiePair(t, k, 30000, now, nostr.Tag{"d", "x"})
	c.mustPublish(hi)
	c.mustPublish(lo)
	if ok, why := c.publish(hi); !ok || !strings.HasPrefix(why, "duplicate:") {
		t.Fatalf("replaced version published again: OK %v %q, want true duplicate: …", ok, why)
	}
	if got := c.req("r", map[string]any{"kinds": []int{30000}, "#d": []string{"x"}}); !slices.Equal(got, ids(lo)) {
		t.Fatalf("tie: %v, want %s", got, lo.ID)
	}
	// The tags of replaced versions are gone from the index.
	if got := c.req("r", map[string]any{"#d": []string{"a"}, "authors": []string{k.pk}}); !slices.Equal(got, ids(a2)) {
		t.Fatalf("tag index: %v", got)
	}
}

func TestExpiration(t *testing.T) {
	tr := startRelay(t, Config{})
	c := dial(t, tr.url)
	k := newKey(t)
	now := tr.clock.Unix()
	exp := func(s nostr.Timestamp) nostr.Tag { return nostr.Tag{"expiration", fmt.Sprint(s)} }

	// Already expired: refused, ephemeral or not.
	for _, kind := range []int{4339, 21339} {
		if ok, why := c.publish(k.event(t, kind, now-10, "late", exp(now))); ok || !strings.HasPrefix(why, "invalid:") {
			t.Fatalf("kind %d expired: ok=%v %q", kind, ok, why)
		}
	}
	if ok, why := c.publish(k.event(t, 4339, now, "bad", nostr.Tag{"expiration", "soon"})); ok || !strings.HasPrefix(why, "invalid:") {
		t.Fatalf("malformed expiration: ok=%v %q", ok, why)
	}

	short := k.event(t, 4339, now, "short", exp(now+10))
	long := k.event(t, 4339, now, "long", exp(now+1000))
	c.mustPublish(short)
	c.mustPublish(long)
	if got := c.req("x", map[string]any{"kinds": []int{4339}}); len(got) != 2 {
		t.Fatalf("before expiry: %v", got)
	}

	// Hidden as soon as the clock passes it, before any sweep.
	tr.clock.Advance(10)
	if got := c.req("x", map[string]any{"kinds": []int{4339}}); !slices.Equal(got, ids(long)) {
		t.Fatalf("after expiry: %v, want only %s", got, long.ID)
	}
	if n, _ := tr.store.count(context.Background()); n != 2 {
		t.Fatalf("%d rows before sweep, want 2", n)
	}
	n, err := tr.Sweep(context.Background())
	if err != nil || n != 1 {
		t.Fatalf("Sweep = %d, %v; want 1", n, err)
	}
	if n, _ := tr.store.count(context.Background()); n != 1 {
		t.Fatalf("%d rows after sweep, want 1", n)
	}
	var tags int
	if err := tr.store.r.QueryRow("SELECT count(*) FROM tags t JOIN events e ON e.seq = t.event_seq WHERE e.id = ?", short.ID).Scan(&tags); err != nil || tags != 0 {
		t.Fatalf("tags of swept event: %d, %v", tags, err)
	}
	// An expired replaceable version does not block a new one with an older
	// created_at.
	r1 := k.event(t, 10000, now, "r1", exp(now+11))
	c.mustPublish(r1)
	tr.clock.Advance(5)
	r0 := k.event(t, 10000, now-1, "r0")
	c.mustPublish(r0)
	if got := c.req("x", map[string]any{"kinds": []int{10000}}); !slices.Equal(got, ids(r0)) {
		t.Fatalf("replaceable after expiry: %v", got)
	}
}

func TestPeriodicSweep(t *testing.T) {
	tr := startRelay(t, Config{SweepInterval: 10 * time.Millisecond})
	c := dial(t, tr.url)
	k := newKey(t)
	now := tr.clock.Unix()
	c.mustPublish(k.event(t, 1, now, "x", nostr.Tag{"expiration", fmt.Sprint(now + 5)}))
	c.mustPublish(k.event(t, 1, now, "y"))
	tr.clock.Advance(5)
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := tr.store.count(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		if n == 1 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("expired event not swept: %d rows", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestCreatedAtUpperLimit(t *testing.T) {
	tr := startRelay(t, Config{CreatedAtUpperLimit: time.Minute})
	c := dial(t, tr.url)
	k := newKey(t)
	now := tr.clock.Unix()
	if ok, why := c.publish(k.event(t, 1, now+61, "future")); ok || !strings.HasPrefix(why, "invalid:") {
		t.Fatalf("future event: ok=%v %q", ok, why)
	}
	c.mustPublish(k.event(t, 1, now+60, "near future"))
}

func TestNIP11(t *testing.T) {
	tr := startRelay(t, Config{Name: "test relay", MaxFilters: 3})
	httpURL := "http" + strings.TrimPrefix(tr.url, "ws")
	if tr.URL() != tr.url {
		t.Fatalf("URL() = %q, want %q", tr.URL(), tr.url)
	}
	req, _ := http.NewRequest(http.MethodGet, httpURL, nil)
	req.Header.Set("Accept", "application/nostr+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if ct := resp.Header.Get("Content-Type"); ct != "application/nostr+json" {
		t.Fatalf("Content-Type %q", ct)
	}
	if resp.Header.Get("Access-Control-Allow-Origin") != "*" {
		t.Fatal("no CORS header")
	}
	var doc map[string]any
	if err := json.Unmarshal(body, &doc); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if doc["name"] != "test relay" || doc["software"] != Software || doc["version"] == "" || doc["description"] == "" {
		t.Fatalf("document: %s", body)
	}
	nips, _ := doc["supported_nips"].([]any)
	for _, want := range []float64{1, 11, 40} {
		if !slices.Contains(nips, any(want)) {
			t.Fatalf("supported_nips %v lacks %v", nips, want)
		}
	}
	lim, _ := doc["limitation"].(map[string]any)
	for _, f := range []string{"max_message_length", "max_subscriptions", "max_filters", "max_limit", "max_subid_length", "max_event_tags", "max_content_length", "default_limit"} {
		if v, ok := lim[f].(float64); !ok || v <= 0 {
			t.Fatalf("limitation.%s = %v", f, lim[f])
		}
	}
	if lim["max_filters"] != 3.0 {
		t.Fatalf("max_filters %v", lim["max_filters"])
	}

	// A plain GET is not the document.
	resp2, err := http.Get(httpURL)
	if err != nil {
		t.Fatal(err)
	}
	resp2.Body.Close()
	if resp2.StatusCode != http.StatusOK || resp2.Header.Get("Content-Type") == "application/nostr+json" {
		t.Fatalf("plain GET: %d %s", resp2.StatusCode, resp2.Header.Get("Content-Type"))
	}
}

// TestNIP11NoLowerLimit: the relay takes events however old, so its
// NIP-11 document has no created_at_lower_limit; before, it said 0,
// which a client may read as "nothing older than now".
func TestNIP11NoLowerLimit(t *testing.T) {
	tr := startRelay(t, Config{})
	b, err := json.Marshal(tr.Info())
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), "created_at_lower_limit") {
		t.Fatalf("document announces a lower limit: %s", b)
	}
}

func TestSlowReaderDisconnected(t *testing.T) {
	tr := startRelay(t, Config{SendQueue: 4, WriteTimeout: 2 * time.Second})
	fast, pub := dial(t, tr.url), dial(t, tr.url)
	slow := dialSmallBuffer(t, tr.url)
	k := newKey(t)
	filter := map[string]any{"kinds": []int{21339}}
	slow.req("s", filter)
	fast.req("f", filter)

	// The slow client stops reading. Large ephemeral events fill the
	// socket buffers and then its queue of 4; it is cut off, while the
	// publisher gets every OK and the fast client every event. The fast
	// client reads each event before the next is published, so that its
	// own queue never holds more than one, however the goroutines are
	// scheduled.
	const n = 200
	content := strings.Repeat("x", 16<<10)
	now := tr.clock.Unix()
	for i := range n {
		ev := k.event(t, 21339, now, fmt.Sprint(i, content))
		pub.mustPublish(ev)
		m, err := fast.readErr(20 * time.Second)
		if err != nil {
			t.Fatalf("fast subscriber, event %d of %d: %v", i+1, n, err)
		}
		if m.typ != "EVENT" || m.event(1).ID != ev.ID {
			t.Fatalf("fast subscriber, event %d: got %s", i+1, m.typ)
		}
	}
	if tr.slowCuts.Load() == 0 {
		t.Fatal("slow client was not disconnected")
	}
	// The slow client sees the end of its connection after what was
	// already on the wire.
	var events int
	for {
		m, err := slow.readErr(10 * time.Second)
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatal("slow client's connection is still open")
			}
			break
		}
		if m.typ == "EVENT" {
			events++
		}
	}
	if events >= n {
		t.Fatalf("slow client got all %d events", events)
	}
}

func TestPersistenceAcrossRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "relay.db")
	k := newKey(t)
	var stored []*nostr.Event
	{
		tr := startRelay(t, Config{DBPath: path})
		c := dial(t, tr.url)
		now := tr.clock.Unix()
		stored = []*nostr.Event{
			k.event(t, 4339, now-2, "persisted", nostr.Tag{"p", k.pk}),
			k.event(t, 31337, now-1, "card", nostr.Tag{"d", "addr"}, nostr.Tag{"skill", "echo"}),
		}
		for _, ev := range stored {
			c.mustPublish(ev)
		}
		tr.stop()
		if err := tr.Close(); err != nil {
			t.Fatal(err)
		}
	}
	tr := startRelay(t, Config{DBPath: path})
	c := dial(t, tr.url)
	if got := c.req("p", map[string]any{"#p": []string{k.pk}}); !slices.Equal(got, ids(stored[0])) {
		t.Fatalf("after restart #p: %v", got)
	}
	if got := c.req("s", map[string]any{"#skill": []string{"echo"}}); !slices.Equal(got, ids(stored[1])) {
		t.Fatalf("after restart #skill: %v", got)
	}
	if ok, why := c.publish(stored[0]); !ok || !strings.HasPrefix(why, "duplicate:") {
		t.Fatalf("republish after restart: %v %q", ok, why)
	}
}

func TestLimits(t *testing.T) {
	tr := startRelay(t, Config{
		MaxMessageLength: 4096,
		MaxSubscriptions: 2,
		MaxFilters:       2,
		MaxSubIDLength:   8,
		MaxLimit:         3,
		MaxEventTags:     5,
		MaxContentLength: 100,
		MaxFilterValues:  4,
	})
	c := dial(t, tr.url)
	k := newKey(t)
	now := tr.clock.Unix()

	closedWith := func(subID, prefix string) {
		t.Helper()
		m := c.expect("CLOSED")
		if m.str(0) != subID || !strings.HasPrefix(m.str(1), prefix) {
			t.Fatalf("CLOSED %s, want %q %s…", joinRaw(m.args), subID, prefix)
		}
	}
	noticeWith := func(prefix string) {
		t.Helper()
		if m := c.expect("NOTICE"); !strings.HasPrefix(m.str(0), prefix) {
			t.Fatalf("NOTICE %s, want %s…", joinRaw(m.args), prefix)
		}
	}

	c.sendRaw([]byte("not json"))
	noticeWith("invalid:")
	c.sendRaw([]byte(`{"EVENT":1}`))
	noticeWith("invalid:")
	c.sendRaw([]byte(`[]`))
	noticeWith("invalid:")
	c.send("AUTH", "x")
	noticeWith("unsupported:")
	c.send("COUNT", "c", map[string]any{})
	closedWith("c", "unsupported:")
	c.send("REQ", "toolongid", map[string]any{})
	closedWith("toolongid", "invalid:")
	c.send("REQ", "", map[string]any{})
	closedWith("", "invalid:")
	c.send("REQ", "f", map[string]any{}, map[string]any{}, map[string]any{})
	closedWith("f", "invalid:")
	c.send("REQ", "v", map[string]any{"authors": []string{"a", "b", "c"}, "#p": []string{"d", "e"}})
	closedWith("v", "invalid:")
	c.send("REQ", "n")
	closedWith("n", "invalid:")
	c.send("REQ", "q", map[string]any{"search": "x"})
	closedWith("q", "unsupported:")
	c.send("REQ", "u", map[string]any{"foo": 1})
	closedWith("u", "unsupported:")
	c.send("REQ", "t", map[string]any{"kinds": []any{"1"}})
	closedWith("t", "invalid:")
	c.send("REQ", "l", map[string]any{"limit": -1})
	closedWith("l", "invalid:")
	c.sendRaw([]byte(`["REQ","x",{"limit":1.5}]`))
	closedWith("x", "invalid:")

	// Too many tags, too much content: OK false.
	tags := make([]nostr.Tag, 6)
	for i := range tags {
		tags[i] = nostr.Tag{"t", fmt.Sprint(i)}
	}
	if ok, why := c.publish(k.event(t, 1, now, "", tags...)); ok || !strings.HasPrefix(why, "invalid:") {
		t.Fatalf("too many tags: %v %q", ok, why)
	}
	if ok, why := c.publish(k.event(t, 1, now, strings.Repeat("x", 101))); ok || !strings.HasPrefix(why, "invalid:") {
		t.Fatalf("content too long: %v %q", ok, why)
	}
	// An oversized EVENT gets an OK false with its id.
	big := k.event(t, 1, now, "big", nostr.Tag{"x", strings.Repeat("y", 5000)})
	if ok, why := c.publish(big); ok || !strings.HasPrefix(why, "invalid:") || !strings.Contains(why, "too large") {
		t.Fatalf("oversized event: %v %q", ok, why)
	}
	// An oversized REQ gets a CLOSED with its subscription id.
	c.send("REQ", "big", map[string]any{"#x": []string{strings.Repeat("y", 5000)}})
	closedWith("big", "invalid:")

	// limit is capped at MaxLimit.
	for i := range 5 {
		c.mustPublish(k.event(t, 1, now-nostr.Timestamp(i), fmt.Sprint(i)))
	}
	if got := c.req("lim", map[string]any{"limit": 100}); len(got) != 3 {
		t.Fatalf("limit 100 capped to 3: got %d", len(got))
	}
	if got := c.req("def", map[string]any{}); len(got) != 3 {
		t.Fatalf("default limit: got %d", len(got))
	}

	// Two subscriptions are open (lim, def); a third is refused, a
	// replacement is not.
	c.send("REQ", "third", map[string]any{})
	closedWith("third", "rate-limited:")
	c.req("lim", map[string]any{"limit": 1})
	c.send("CLOSE", "lim")
	c.req("third", map[string]any{"limit": 0})

	// Beyond twice the limit the WebSocket is closed with 1009.
	c.sendRaw([]byte(`["EVENT",` + strings.Repeat(" ", 9000) + `{}]`))
	_, err := c.readErr(5 * time.Second)
	if !websocket.IsCloseError(err, websocket.CloseMessageTooBig) {
		t.Fatalf("huge message: %v, want close 1009", err)
	}
}

func TestRateLimitAndBlocked(t *testing.T) {
	blocked := newKey(t)
	tr := startRelay(t, Config{
		EventsPerSecond: 1,
		EventBurst:      2,
		AcceptEvent: func(ev *nostr.Event) error {
			if ev.PubKey == blocked.pk {
				return fmt.Errorf("pubkey not allowed")
			}
			return nil
		},
	})
	c := mustDialFrom(t, frontRelay(t, tr.Relay), "203.0.113.9")
	k := newKey(t)
	now := tr.clock.Unix()
	if ok, why := c.publish(blocked.event(t, 1, now, "x")); ok || why != "blocked: pubkey not allowed" {
		t.Fatalf("blocked: %v %q", ok, why)
	}
	c.mustPublish(k.event(t, 1, now, "1"))
	if ok, why := c.publish(k.event(t, 1, now, "2")); ok || !strings.HasPrefix(why, "rate-limited:") {
		t.Fatalf("over the burst: %v %q", ok, why)
	}
	tr.clock.Advance(1)
	c.mustPublish(k.event(t, 1, now, "3"))
	if !tr.Info().Limitation.RestrictedWrites {
		t.Fatal("restricted_writes not announced")
	}
}

// TestRateLimitPerPeer: a peer's connections draw on one EVENT bucket,
// so that opening more connections buys no more events; another peer
// has its own; loopback clients and the node's in-process connection are
// not limited.
func TestRateLimitPerPeer(t *testing.T) {
	clock := newClock()
	r, err := New(Config{EventsPerSecond: 1, EventBurst: 2, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	url := frontRelay(t, r)
	from := func(ip string) *client { t.Helper(); return mustDialFrom(t, url, ip) }
	k := newKey(t)
	n := 0
	event := func() *nostr.Event {
		n++
		return k.event(t, 1, clock.Unix(), fmt.Sprint("event ", n))
	}
	limited := func(c *client, who string) {
		t.Helper()
		if ok, why := c.publish(event()); ok || why != "rate-limited: more than 1 events a second from your address" {
			t.Fatalf("%s: %v %q, want rate-limited", who, ok, why)
		}
	}

	a1, a2, a3 := from("203.0.113.7"), from("203.0.113.7"), from("::ffff:203.0.113.7")
	a1.mustPublish(event())
	a2.mustPublish(event()) // the burst of 2, spent over two connections
	limited(a3, "a third connection of the peer")
	limited(a1, "the peer's first connection")
	// Another peer, and each loopback client, have buckets of their own.
	b := from("198.51.100.1")
	b.mustPublish(event())
	b.mustPublish(event())
	limited(b, "the other peer past its burst")
	// Clients on the machine itself are not limited.
	l := from("")
	for range 5 {
		l.mustPublish(event())
	}
	// The node itself is not limited.
	local, err := r.LocalConn()
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	for range 5 {
		if ok, why, err := local.Publish(context.Background(), *event()); err != nil || !ok {
			t.Fatalf("in-process publish: %v %q %v", ok, why, err)
		}
	}
	// The peer's bucket fills again with time, for all its connections.
	clock.Advance(1)
	a3.mustPublish(event())
	limited(a2, "the peer once its new token is spent")

	// The rate changes while the relay runs; a bad one is refused.
	for _, bad := range []float64{-1, math.NaN(), math.Inf(1)} {
		if err := r.SetEventRate(bad, 1); err == nil {
			t.Errorf("SetEventRate(%v) accepted", bad)
		}
	}
	if err := r.SetEventRate(5, 1); err != nil {
		t.Fatal(err)
	}
	clock.Advance(1)
	a1.mustPublish(event())
	if ok, why := a2.publish(event()); ok || why != "rate-limited: more than 5 events a second from your address" {
		t.Fatalf("at the new rate, past its burst of 1: %v %q", ok, why)
	}
}

// TestRateLimitIPv6Loopback: a client on ::1 is on the machine, as one on
// 127.0.0.1 is: it is neither rate-limited nor counted per peer (its /64,
// ::, is not a loopback address, so the key must keep it whole).
func TestRateLimitIPv6Loopback(t *testing.T) {
	clock := newClock()
	r, err := New(Config{EventsPerSecond: 1, EventBurst: 1, MaxConnections: 8, MaxConnectionsPerIP: 1, Now: clock.Now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	url := frontRelay(t, r)
	k := newKey(t)
	l := mustDialFrom(t, url, "::1")
	mustDialFrom(t, url, "::1") // a second loopback client, past a per-peer cap of 1
	for i := range 5 {
		l.mustPublish(k.event(t, 1, clock.Unix(), fmt.Sprint("local ", i)))
	}
}

func TestShutdownClosesConnections(t *testing.T) {
	tr := startRelay(t, Config{})
	c := dial(t, tr.url)
	c.req("s", map[string]any{})
	done := make(chan struct{})
	go func() {
		tr.stop()
		close(done)
	}()
	_, err := c.readErr(5 * time.Second)
	if !websocket.IsCloseError(err, websocket.CloseGoingAway) {
		t.Fatalf("client got %v, want close 1001", err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Serve did not return")
	}
	if _, _, err := websocket.DefaultDialer.Dial(tr.url, nil); err == nil {
		t.Fatal("still accepting after shutdown")
	}
}

func TestPingKeepalive(t *testing.T) {
	// Long enough for a loaded machine to answer a ping in time.
	tr := startRelay(t, Config{PingInterval: 250 * time.Millisecond})
	conns := func() int {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		return len(tr.conns)
	}
	// A client that reads answers pings (gorilla does it while reading) and
	// stays; one that never reads never answers and is dropped.
	live := dial(t, tr.url)
	liveDone := make(chan error, 1)
	go func() {
		_, _, err := live.ws.ReadMessage()
		liveDone <- err
	}()
	silent := dial(t, tr.url)
	_ = silent
	deadline := time.Now().Add(20 * time.Second)
	for conns() != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections, want the silent one dropped", conns())
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(time.Second) // several ping intervals
	if n := conns(); n != 1 {
		t.Fatalf("%d connections after the pings, want the reading client kept", n)
	}
	live.ws.Close()
	<-liveDone
}

func TestCloseRefusesNewConnections(t *testing.T) {
	r, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	if err := r.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Serve(context.Background(), ln); err == nil {
		t.Fatal("Serve after Close succeeded")
	}
}

func TestConfigErrors(t *testing.T) {
	if _, err := New(Config{MaxFilters: -1}); err == nil {
		t.Fatal("negative MaxFilters accepted")
	}
	if _, err := New(Config{MaxSubscriptionBytesPerIP: -1}); err == nil {
		t.Fatal("negative MaxSubscriptionBytesPerIP accepted")
	}
	if _, err := New(Config{MaxUnsentBytesPerIP: -1}); err == nil {
		t.Fatal("negative MaxUnsentBytesPerIP accepted")
	}
	if _, err := New(Config{DBPath: "x?y"}); err == nil {
		t.Fatal("path with ? accepted")
	}
}

// TestGoNostrClient checks interoperability with go-nostr's client.
func TestGoNostrClient(t *testing.T) {
	if raceEnabled {
		// go-nostr v0.38.2's Relay.Close reads r.Connection while its
		// connection goroutine sets it to nil: every disconnect is a data
		// race inside the client, whatever the server does.
		t.Skip("go-nostr v0.38.2's client races on disconnect; run without -race")
	}
	tr := startRelay(t, Config{Now: time.Now})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// The connection ends with ctx; go-nostr v0.38.2's Relay.Close races
	// with its own connection goroutine, so it is not called.
	rl, err := nostr.RelayConnect(ctx, tr.url)
	if err != nil {
		t.Fatal(err)
	}
	k := newKey(t)
	now := nostr.Now()
	card := k.event(t, 31337, now, `{"name":"agent"}`, nostr.Tag{"d", "bc1pagent"}, nostr.Tag{"skill", "echo", "Echo"})
	if err := rl.Publish(ctx, *card); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	got, err := rl.QuerySync(ctx, nostr.Filter{Kinds: []int{31337}, Tags: nostr.TagMap{"skill": {"echo"}}})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].ID != card.ID {
		t.Fatalf("QuerySync: %v", got)
	}
	sub, err := rl.Subscribe(ctx, nostr.Filters{{Kinds: []int{21339}, Tags: nostr.TagMap{"p": {k.pk}}}})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-sub.EndOfStoredEvents:
	case <-ctx.Done():
		t.Fatal("no EOSE")
	}
	msg := k.event(t, 21339, now, "ciphertext", nostr.Tag{"p", k.pk})
	if err := rl.Publish(ctx, *msg); err != nil {
		t.Fatalf("Publish ephemeral: %v", err)
	}
	select {
	case ev := <-sub.Events:
		if ev.ID != msg.ID {
			t.Fatalf("got %s", ev.ID)
		}
	case <-ctx.Done():
		t.Fatal("no live event")
	}
	bad := *msg
	bad.Content = "tampered"
	if err := rl.Publish(ctx, bad); err == nil || !strings.Contains(err.Error(), "invalid") {
		t.Fatalf("tampered event: %v", err)
	}
}

// A subscription id is any string: its EVENT messages, stored and live,
// carry it escaped as JSON wants, and the client reads back the id it sent.
func TestSubscriptionIDsEscaped(t *testing.T) {
	tr := startRelay(t, Config{})
	sub, pub := dial(t, tr.url), dial(t, tr.url)
	k := newKey(t)
	now := tr.clock.Unix()
	stored := k.event(t, 4339, now-5, "stored")
	pub.mustPublish(stored)
	for _, id := range []string{`q"uote\back`, "<tag>&amp;", "tab\there", "ü\u2028€"} {
		if got := sub.req(id, map[string]any{"kinds": []int{4339, 21339}, "authors": []string{k.pk}}); !slices.Equal(got, ids(stored)) {
			t.Fatalf("%q: stored %v", id, got)
		}
		live := k.event(t, 21339, now, "live "+id)
		pub.mustPublish(live)
		if m := sub.expect("EVENT"); m.str(0) != id || m.event(1).ID != live.ID {
			t.Fatalf("%q: live %s", id, joinRaw(m.args))
		}
		sub.send("CLOSE", id)
	}
}

// TestReqBudget: one REQ loads at most MaxLimit stored events and
// MaxStoredBytes of them, all its filters together, however many filters
// repeat or widen the search.
func TestReqBudget(t *testing.T) {
	tr := startRelay(t, Config{
		MaxMessageLength: 16 << 10,
		MaxContentLength: 8 << 10,
		MaxStoredBytes:   32 << 10,
		MaxLimit:         50,
	})
	c := dial(t, tr.url)
	now := tr.clock.Unix()

	// 16 authors of 10 small events each: 16 filters of limit 10 would
	// load 160; the REQ gets the MaxLimit newest of the first filters.
	filters := make([]any, 16)
	for i := range filters {
		k := newKey(t)
		for j := range 10 {
			c.mustPublish(k.event(t, 1, now-nostr.Timestamp(j), fmt.Sprint(i, j)))
		}
		filters[i] = map[string]any{"authors": []string{k.pk}, "limit": 10}
	}
	if got := c.req("wide", filters...); len(got) != 50 {
		t.Fatalf("16 filters of 10 events each: %d events, want MaxLimit (50)", len(got))
	}

	// 10 events of 6 KB: a filter given 16 times loads them once, and no
	// more of them than fit in 32 KiB.
	big := newKey(t)
	var stored []*nostr.Event
	for j := range 10 {
		ev := big.event(t, 1, now-nostr.Timestamp(j), strings.Repeat("x", 6000))
		c.mustPublish(ev)
		stored = append(stored, ev)
	}
	same := make([]any, 16)
	for i := range same {
		same[i] = map[string]any{"authors": []string{big.pk}, "limit": 10}
	}
	got := c.req("same", same...)
	if !slices.Equal(got, ids(stored[:5]...)) {
		t.Fatalf("16 copies of a filter over 10 events of 6 KB: got %d events, want the 5 newest (32 KiB)", len(got))
	}
}

// TestTagConditionsBounded: a filter of more "#name" conditions than the
// relay queries is refused, naming the rule, not failed in the database.
func TestTagConditionsBounded(t *testing.T) {
	tr := startRelay(t, Config{})
	c := dial(t, tr.url)
	filter := func(n int) map[string]any {
		f := map[string]any{}
		for i := range n {
			f[fmt.Sprintf("#tag%d", i)] = []string{"v"}
		}
		return f
	}
	if got := c.req("ok", filter(maxTagConditions)); len(got) != 0 {
		t.Fatalf("%d tag conditions: %d events from an empty relay", maxTagConditions, len(got))
	}
	for _, n := range []int{maxTagConditions + 1, 999} {
		c.send("REQ", "many", filter(n))
		m := c.expect("CLOSED")
		if m.str(0) != "many" || !strings.HasPrefix(m.str(1), "invalid: too many tag conditions") {
			t.Fatalf("%d tag conditions: CLOSED %s", n, joinRaw(m.args))
		}
	}
}

// TestLiveMatchingLinear: a live event is matched against each open
// filter once, and a tag condition costs a lookup per value, however
// many tags the event repeats. Before, a filter was tried again for
// every tag of the event naming one of its values, each try reading all
// the event's tags: one address's 1,024 filters {"#p":[X],"#q":[Y]} and
// one event of 2,500 ["p",X] tags made 6.4 billion comparisons, a
// minute and a half of CPU for one event, with the hub's lock held.
func TestLiveMatchingLinear(t *testing.T) {
	tr := startRelay(t, Config{})
	url := frontRelay(t, tr.Relay)
	k := newKey(t)
	sub := mustDialFrom(t, url, "192.0.2.1")
	for i := range tr.cfg.MaxSubscriptions - 1 {
		req := []any{"REQ", fmt.Sprint("miss", i)}
		for range tr.cfg.MaxFilters {
			req = append(req, map[string]any{"#p": []string{k.pk}, "#q": []string{"absent"}})
		}
		sub.send(req...)
		sub.expect("EOSE")
	}
	if got := sub.req("hit", map[string]any{"#p": []string{k.pk}, "kinds": []int{1}}); len(got) != 0 {
		t.Fatalf("stored %v in an empty relay", got)
	}
	tags := make([]nostr.Tag, tr.cfg.MaxEventTags)
	for i := range tags {
		tags[i] = nostr.Tag{"p", k.pk}
	}
	ev := k.event(t, 1, tr.clock.Unix(), "", tags...)
	pub := mustDialFrom(t, url, "192.0.2.2")
	start := time.Now()
	pub.mustPublish(ev) // fails after 5 s without an answer
	t.Logf("published in %v", time.Since(start))
	m := sub.expect("EVENT")
	if m.str(0) != "hit" || m.event(1).ID != ev.ID {
		t.Fatalf("EVENT %s, want %s for hit", joinRaw(m.args), ev.ID)
	}
	// A second copy would have been queued before pub's OK: it would
	// come before the second of two REQs' EOSE.
	for range 2 {
		if got := sub.req("miss0", map[string]any{"ids": []string{}}); len(got) != 0 {
			t.Fatalf("stored %v for no id", got)
		}
	}
}

// TestConnectionCaps: WebSocket clients are bounded in all and per IP
// address (loopback aside), refused before the upgrade with a status
// that says why, and a closed client's place is given back.
func TestConnectionCaps(t *testing.T) {
	r, err := New(Config{MaxConnections: 5, MaxConnectionsPerIP: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	url := frontRelay(t, r)
	must := func(from string) *websocket.Conn { t.Helper(); return mustDialFrom(t, url, from).ws }
	refused := func(from string, want int) {
		t.Helper()
		if c, code := dialFrom(t, url, from); c != nil || code != want {
			t.Fatalf("from %s: status %d, want %d", from, code, want)
		}
	}

	first := must("203.0.113.7")
	must("203.0.113.7")
	refused("203.0.113.7", http.StatusTooManyRequests)
	refused("::ffff:203.0.113.7", http.StatusTooManyRequests) // the same address, IPv6-mapped
	// One IPv6 /64 is one peer, whatever address of it a client takes.
	must("2001:db8:1:2::1")
	must("2001:db8:1:2::2")
	refused("2001:db8:1:2::3", http.StatusTooManyRequests)
	must("198.51.100.1")
	refused("198.51.100.2", http.StatusServiceUnavailable) // five in all

	// A closed client's place is free again once the relay has seen it go.
	first.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if c, code := dialFrom(t, url, "203.0.113.7"); c != nil {
			break
		} else if code != http.StatusTooManyRequests && code != http.StatusServiceUnavailable {
			t.Fatalf("after a close: status %d", code)
		}
		if time.Now().After(deadline) {
			t.Fatal("a closed client's place was not given back")
		}
		runtime.Gosched()
	}
}

// TestLoopbackNotCappedPerIP: clients on the machine itself share only
// the relay's overall bound.
func TestLoopbackNotCappedPerIP(t *testing.T) {
	tr := startRelay(t, Config{MaxConnectionsPerIP: 1, MaxConnections: 3})
	for range 3 {
		c := dial(t, tr.url)
		c.req("s", map[string]any{"limit": 0})
	}
	_, resp, err := websocket.DefaultDialer.Dial(tr.url, nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("a fourth client: %v %v, want 503", resp, err)
	}
}

// TestQueuedEventsShared: the events queued for a client that has stopped
// reading are held once, however many of its subscriptions they match:
// 64 subscriptions of three 200 KB events hold about 600 KB, not 38 MB.
func TestQueuedEventsShared(t *testing.T) {
	tr := startRelay(t, Config{WriteTimeout: time.Minute})
	pub := dial(t, tr.url)
	slow := dialSmallBuffer(t, tr.url)
	for i := range DefaultMaxSubscriptions {
		slow.req(fmt.Sprint("s", i), map[string]any{"kinds": []int{21339}})
	}

	heap := func() uint64 {
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	before := heap()
	k := newKey(t)
	content := strings.Repeat("x", 200_000)
	for i := range 3 { // 192 messages: the queue of 256 does not fill
		pub.mustPublish(k.event(t, 21339, tr.clock.Unix(), fmt.Sprint(i, content)))
	}
	grown := int64(heap()) - int64(before)
	if tr.slowCuts.Load() != 0 {
		t.Fatal("the client was cut off: the test did not hold its queue")
	}
	if grown > 8<<20 {
		t.Fatalf("the heap grew %d KB for three 200 KB events queued to 64 subscriptions", grown>>10)
	}
	t.Logf("heap grew %d KB", grown>>10)
}

// TestOpenFilterValuesBound: the filter values a connection's open
// subscriptions hold together are bounded, not only those of one filter:
// 64 subscriptions of sixteen filters of 1,000 values each (REQs of 90 KB)
// held over 400 MB of the relay's memory for one client. Past the bound a
// REQ is refused with CLOSED; closing or replacing a subscription gives
// its values back.
func TestOpenFilterValuesBound(t *testing.T) {
	tr := startRelay(t, Config{})
	c := dial(t, tr.url)
	next := 0
	values := func(n int) []string {
		vs := make([]string, n)
		for i := range vs {
			vs[i] = fmt.Sprintf("%x", next)
			next++
		}
		return vs
	}
	full := func() map[string]any { return map[string]any{"#t": values(DefaultMaxFilterValues)} }
	budget := DefaultMaxOpenFilterValues / DefaultMaxFilterValues
	for i := range budget {
		c.req(fmt.Sprint("s", i), full())
	}
	keys := tr.hub.size()
	c.send("REQ", "over", full())
	if m := c.expect("CLOSED"); m.str(0) != "over" || !strings.HasPrefix(m.str(1), "rate-limited:") {
		t.Fatalf("CLOSED %s, want over rate-limited: …", joinRaw(m.args))
	}
	c.send("REQ", "many", full(), full(), full(), full(), full())
	if m := c.expect("CLOSED"); m.str(0) != "many" || !strings.HasPrefix(m.str(1), "rate-limited:") {
		t.Fatalf("CLOSED %s, want many rate-limited: …", joinRaw(m.args))
	}
	if n := tr.hub.size(); n != keys {
		t.Fatalf("the hub indexes %d keys after refused REQs, want %d", n, keys)
	}
	// Replacing a subscription swaps its values; closing one frees them.
	c.req("s0", full())
	c.send("CLOSE", "s1")
	c.req("again", full())
	c.send("REQ", "over", map[string]any{"kinds": []int{1}})
	if m := c.expect("CLOSED"); m.str(0) != "over" {
		t.Fatalf("CLOSED %s, want over", joinRaw(m.args))
	}
}

// TestRefusedReplacementClosesSubscription: a REQ refused for an open
// subscription id is answered with CLOSED for that id, so the
// subscription it would have replaced is closed too: no EVENT follows a
// CLOSED (it used to stay open, sending events the client took for
// closed).
func TestRefusedReplacementClosesSubscription(t *testing.T) {
	tr := startRelay(t, Config{})
	c, pub := dial(t, tr.url), dial(t, tr.url)
	c.req("s", map[string]any{"kinds": []int{1}})
	c.send("REQ", "s", map[string]any{"kinds": []any{"x"}})
	if m := c.expect("CLOSED"); m.str(0) != "s" || !strings.HasPrefix(m.str(1), "invalid:") {
		t.Fatalf("CLOSED %s, want s invalid: …", joinRaw(m.args))
	}
	if n := tr.hub.size(); n != 0 {
		t.Fatalf("the hub indexes %d keys after CLOSED, want none", n)
	}
	pub.mustPublish(newKey(t).event(t, 1, tr.clock.Unix(), "after CLOSED"))
	if got := c.req("probe", map[string]any{"kinds": []int{2}}); len(got) != 0 {
		t.Fatalf("probe: %v", got)
	}
}

// TestPeerSubscriptionBudget: what the open subscriptions of one peer (an
// IPv4 address, an IPv6 /64) hold is bounded across its connections, in
// bytes, not only in values per connection: one value may be a 400 KB
// string, so 64 connections of 64 such subscriptions held about 2 GB for
// one address (one connection alone 32 MB). Past the budget a REQ is
// refused with CLOSED naming the rule; another peer keeps its own budget,
// loopback clients have none, and closing a subscription or a connection
// gives its part back.
func TestPeerSubscriptionBudget(t *testing.T) {
	big := func(i int) map[string]any {
		return map[string]any{"#t": []string{fmt.Sprintf("%06d", i) + strings.Repeat("v", 400_000)}}
	}
	budget := int(DefaultMaxConnectionsPerIP * subscriptionBytesPerConn)
	most := budget / 400_000 // subscriptions of one value of 400 KB that might fit
	for _, c := range []struct {
		name    string
		from    [2]string // the peer's two connections
		bounded bool
	}{
		{"IPv4 address", [2]string{"203.0.113.7", "203.0.113.7"}, true},
		{"IPv6 /64", [2]string{"2001:db8:1:2::1", "2001:db8:1:2:ffff::9"}, true},
		{"loopback", [2]string{"", "::1"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			tr := startRelay(t, Config{})
			url := frontRelay(t, tr.Relay)
			conns := [2]*client{mustDialFrom(t, url, c.from[0]), mustDialFrom(t, url, c.from[1])}
			open, refused := 0, false
			for i := 0; i <= most+2 && !refused; i++ {
				cl, id := conns[i%2], fmt.Sprint("s", i)
				cl.send("REQ", id, big(i))
				switch m := cl.read(); m.typ {
				case "EOSE":
					open++
				case "CLOSED":
					if m.str(0) != id || !strings.HasPrefix(m.str(1), "rate-limited:") || !strings.Contains(m.str(1), "your address") {
						t.Fatalf("CLOSED %s, want %s rate-limited: … your address …", joinRaw(m.args), id)
					}
					refused = true
				default:
					t.Fatalf("got %s %s, want EOSE or CLOSED", m.typ, joinRaw(m.args))
				}
			}
			if !c.bounded {
				if refused {
					t.Fatalf("a loopback client was refused after %d subscriptions", open)
				}
				return
			}
			if !refused || open*400_000 > budget || open < most/2 {
				t.Fatalf("%d subscriptions of 400 KB open, refused %v: want refused within the budget of %d bytes", open, refused, budget)
			}
			// Another peer has its own budget.
			other := mustDialFrom(t, url, "198.51.100.1")
			other.req("o", big(-1))
			// Closing a subscription gives its part back.
			last := open - 1
			conns[last%2].send("CLOSE", fmt.Sprint("s", last))
			conns[last%2].req("again", big(-2))
			// So does closing a connection, once the relay has seen it
			// go (a real socket: poll with a deadline).
			conns[0].ws.Close()
			deadline := time.Now().Add(5 * time.Second)
			for i := 0; ; i++ {
				id := fmt.Sprint("after", i)
				conns[1].send("REQ", id, big(1000+i))
				if m := conns[1].read(); m.typ == "EOSE" {
					break
				} else if m.typ != "CLOSED" || time.Now().After(deadline) {
					t.Fatalf("after the other connection closed: %s %s", m.typ, joinRaw(m.args))
				}
			}
		})
	}
}

// TestRefusalsDoNotEchoHugeReferences: a refusal echoes the event id or
// subscription id it answers only when it is short enough to be one: a
// 400 KB "id" was sent back whole in an OK or CLOSED, so a client that
// does not read made the relay hold 64 queued answers of its own 400 KB
// (25 MB a connection) until its write time-out. Past the bound the
// answer is a NOTICE.
func TestRefusalsDoNotEchoHugeReferences(t *testing.T) {
	tr := startRelay(t, Config{})
	c := dial(t, tr.url)
	long := strings.Repeat("a", 400_000)
	k := newKey(t)
	ev := k.event(t, 1, tr.clock.Unix(), "x")
	bogus := map[string]any{"id": long, "pubkey": ev.PubKey, "created_at": ev.CreatedAt, "kind": 1, "tags": []any{}, "content": "", "sig": ev.Sig}
	badKind := maps.Clone(bogus)
	badKind["kind"] = "one"
	for _, tc := range []struct {
		name string
		msg  []any
		want string // the answer's type
	}{
		{"EVENT with a long id", []any{"EVENT", bogus}, "NOTICE"},
		{"EVENT with a long id and a bad field", []any{"EVENT", badKind}, "NOTICE"},
		{"REQ with a long subscription id", []any{"REQ", long, map[string]any{}}, "NOTICE"},
		{"CLOSE with a long subscription id", []any{"CLOSE", long}, "NOTICE"},
		{"COUNT with a long subscription id", []any{"COUNT", long, map[string]any{}}, "NOTICE"},
		{"REQ with a subscription id just too long", []any{"REQ", strings.Repeat("s", DefaultMaxSubIDLength+1), map[string]any{}}, "CLOSED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c.send(tc.msg...)
			_ = c.ws.SetReadDeadline(time.Now().Add(5 * time.Second))
			_, b, err := c.ws.ReadMessage()
			if err != nil {
				t.Fatal(err)
			}
			if len(b) > 1024 || !strings.HasPrefix(string(b), `["`+tc.want+`",`) || !strings.Contains(string(b), "invalid:") {
				t.Fatalf("answered %d bytes: %.120s…, want a %s of at most 1 KiB saying invalid:", len(b), b, tc.want)
			}
		})
	}
}

// TestUnparsableEventGetsOK: an EVENT the JSON reader refuses as a
// whole (a repeated member name, a lone surrogate, data after the array)
// is answered with the OK false its publisher waits for, when its id can
// be read; before, a NOTICE, and the publisher waited out its time-out.
// A message that names no id still gets a NOTICE.
func TestUnparsableEventGetsOK(t *testing.T) {
	tr := startRelay(t, Config{})
	c := dial(t, tr.url)
	k := newKey(t)
	ev := k.event(t, 1, tr.clock.Unix(), "x")
	head := fmt.Sprintf(`["EVENT",{"id":%q,"pubkey":%q,"created_at":%d,`, ev.ID, ev.PubKey, ev.CreatedAt)
	tail := fmt.Sprintf(`"sig":%q}]`, ev.Sig)
	for name, raw := range map[string]string{
		"repeated member":  head + `"kind":1,"kind":1,"tags":[],"content":"x",` + tail,
		"lone surrogate":   head + `"kind":1,"tags":[],"content":"\ud800",` + tail,
		"data after array": head + `"kind":1,"tags":[],"content":"x",` + tail + ` []`,
	} {
		c.sendRaw([]byte(raw))
		m := c.read()
		if m.typ != "OK" || m.str(0) != ev.ID || string(m.args[1]) != "false" || !strings.HasPrefix(m.str(2), "invalid:") {
			t.Fatalf("%s: got %s %s, want OK %s false invalid:", name, m.typ, joinRaw(m.args), ev.ID)
		}
	}
	c.sendRaw([]byte(`["EVENT",{"kind":1,"kind":1}]`))
	if m := c.expect("NOTICE"); !strings.HasPrefix(m.str(0), "invalid:") {
		t.Fatalf("no id: NOTICE %s", joinRaw(m.args))
	}
	if got := c.req("all", map[string]any{}); len(got) != 0 {
		t.Fatalf("stored %v", got)
	}
}

// TestPeerUnsentBudget: the stored events that the REQs of one peer (an
// IPv4 address, an IPv6 /64) have loaded and not yet written are bounded
// in bytes across its connections. Before, a REQ of `{}` loaded up to
// MaxStoredBytes (8 MiB) for itself, held while its client read nothing
// until the write time-out: 64 connections of one address held several
// hundred MB. Now a REQ past the budget waits for room; once the wait is
// over it loads what is left of the budget, then a NOTICE naming the rule
// comes before its EOSE. Another peer keeps its own budget, loopback
// clients have none, and connections that go give their part back. What
// the relay holds is measured by the budget's own accounting.
//
// The silent clients' sockets take a few KiB, less than one event: no
// event of theirs is ever written, so what their REQs hold depends on no
// one's pace. Two REQs load every event (the budget is two REQs' worth),
// and the room they leave is less than one event, whenever the others
// end their wait: the budget is then full but for that room. (Sockets
// that take megabytes, as the kernel's defaults do, free room at their
// own pace, which a REQ whose wait ended before gets no part of.)
func TestPeerUnsentBudget(t *testing.T) {
	// 8.3 MB stored, what one REQ may load (MaxStoredBytes, 8 MiB) but
	// for less than a fifth of an event.
	const events, size = 32, 260_000
	for _, c := range []struct {
		name    string
		from    [2]string // the clients that do not read, the one that does
		bounded bool
	}{
		{"IPv4 address", [2]string{"203.0.113.7", "203.0.113.7"}, true},
		{"IPv6 /64", [2]string{"2001:db8:1:2::1", "2001:db8:1:2:ffff::9"}, true},
		{"loopback", [2]string{"", "::1"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			// A long write time-out: the clients that do not read keep
			// what they hold for the whole test.
			tr := startRelay(t, Config{WriteTimeout: time.Minute})
			tr.unsentWait = 100 * time.Millisecond
			budget := tr.cfg.MaxUnsentBytesPerIP
			if budget != 2*int64(tr.cfg.MaxStoredBytes) {
				t.Fatalf("MaxUnsentBytesPerIP %d, want two REQs' worth, %d", budget, 2*tr.cfg.MaxStoredBytes)
			}
			url := frontRelay(t, tr.Relay)
			silentURL := frontRelaySmallSendBuffer(t, tr.Relay)
			pub := dial(t, tr.url)
			k := newKey(t)
			for i := range events {
				pub.mustPublish(k.event(t, 1, tr.clock.Unix()-nostr.Timestamp(i), strings.Repeat("x", size)))
			}
			peer := peerName(peercap.Key(net.JoinHostPort(cmp.Or(c.from[0], "127.0.0.1"), "1")))
			// Six clients that ask for everything and read nothing:
			// 50 MB loaded before.
			var silent []*client
			for range 6 {
				s := dialFromSmallBuffer(t, silentURL, c.from[0])
				s.send("REQ", "all", map[string]any{})
				silent = append(silent, s)
			}
			if c.bounded {
				// Wait until the budget is full: less than one event's
				// room left. It never goes past the budget.
				var n int64
				waitUntil(t, func() bool {
					if n = tr.unsentBytes(peer); n > budget {
						t.Fatalf("%d bytes loaded and not sent for %s, past the budget of %d", n, peer, budget)
					}
					return n > budget-size
				}, func() string {
					return fmt.Sprintf("%d bytes loaded and not sent for %s, want the budget of %d full but for less than an event", n, peer, budget)
				})
			}
			// A client of the same peer that reads: its REQ gets what is
			// left of the budget, and a NOTICE saying why before EOSE.
			reader := mustDialFrom(t, url, c.from[1])
			got, notice := readStored(t, reader, "r")
			t.Logf("%d bytes loaded and not sent for %s; a reader of it got %d of %d stored events", tr.unsentBytes(peer), peer, got, events)
			switch {
			case c.bounded && (got >= events || !strings.HasPrefix(notice, "rate-limited:") || !strings.Contains(notice, "your address")):
				t.Fatalf("a reader of the same peer got %d of %d stored events and NOTICE %q, want fewer and a NOTICE rate-limited: … your address …", got, events, notice)
			case !c.bounded && (got != events || notice != ""):
				t.Fatalf("a loopback reader got %d of %d stored events and NOTICE %q, want all and none", got, events, notice)
			}
			if !c.bounded {
				return
			}
			if n := tr.unsentBytes(peer); n > budget {
				t.Fatalf("%d bytes loaded and not sent for %s, past the budget of %d", n, peer, budget)
			}
			// Another peer has its own budget.
			other := mustDialFrom(t, url, "198.51.100.1")
			if got, notice := readStored(t, other, "o"); got != events || notice != "" {
				t.Fatalf("another peer got %d of %d stored events and NOTICE %q", got, events, notice)
			}
			// The silent clients go: their part comes back once the
			// relay has seen them go (a real socket: poll).
			for _, s := range silent {
				s.ws.Close()
			}
			waitUntil(t, func() bool { return tr.unsentBytes(peer) == 0 }, func() string {
				return fmt.Sprintf("%d bytes still counted for %s after its silent clients went", tr.unsentBytes(peer), peer)
			})
			if got, notice := readStored(t, reader, "again"); got != events || notice != "" {
				t.Fatalf("once the silent clients went, the reader got %d of %d stored events and NOTICE %q", got, events, notice)
			}
		})
	}
}

// TestRelayUnsentBoundCutsREQ: over real sockets, a REQ that the bound of
// every peer together (MaxUnsentBytes) cuts, not its own address's, gets
// fewer stored events and, before its EOSE, the NOTICE naming the relay's
// bound and its size, not its address's. Once the peer holding the
// relay's room goes, the same REQ gets every event and no NOTICE.
func TestRelayUnsentBoundCutsREQ(t *testing.T) {
	const events, size = 32, 250_000 // 8 MB stored: what one REQ may load
	// The relay's bound as small as it may be, its address's: one peer
	// that reads nothing takes most of it, and the next peer's own bound
	// has room. A long write time-out: the silent client keeps what it holds.
	tr := startRelay(t, Config{WriteTimeout: time.Minute, MaxUnsentBytesPerIP: 1, MaxUnsentBytes: 1})
	tr.unsentWait = 100 * time.Millisecond
	bound := tr.cfg.MaxUnsentBytes
	if bound != tr.cfg.MaxUnsentBytesPerIP {
		t.Fatalf("MaxUnsentBytes %d, MaxUnsentBytesPerIP %d; want them equal", bound, tr.cfg.MaxUnsentBytesPerIP)
	}
	url := frontRelay(t, tr.Relay)
	pub := dial(t, tr.url)
	k := newKey(t)
	for i := range events {
		pub.mustPublish(k.event(t, 1, tr.clock.Unix()-nostr.Timestamp(i), strings.Repeat("x", size)))
	}
	const from = "203.0.113.7"
	peer := peerName(peercap.Key(net.JoinHostPort(from, "1")))
	// Its sockets take less than one event: none is written.
	silent := dialFromSmallBuffer(t, frontRelaySmallSendBuffer(t, tr.Relay), from)
	silent.send("REQ", "all", map[string]any{})
	// Wait until the silent peer's REQ has loaded its events: the
	// relay's room is then too small for the 32 (the silent peer is the
	// only one counted, the publisher being on loopback, so its count is
	// the relay's).
	waitUntil(t, func() bool { return tr.unsentBytes(peer) > bound-(events-2)*size }, func() string {
		return fmt.Sprintf("%d bytes loaded and not sent, want the silent peer's REQ loaded", tr.unsentBytes(peer))
	})
	reader := mustDialFrom(t, url, "198.51.100.1")
	got, notice := readStored(t, reader, "r")
	want := fmt.Sprintf("rate-limited: stored events loaded and not yet sent on this relay are at their bound (max %d bytes): subscription r got fewer stored events; try again later", bound)
	if got >= events || notice != want {
		t.Fatalf("another peer got %d of %d stored events and NOTICE %q; want fewer and %q", got, events, notice, want)
	}
	silent.ws.Close()
	waitUntil(t, func() bool { return tr.unsentBytes(peer) == 0 }, func() string {
		return fmt.Sprintf("%d bytes still counted after the silent client went", tr.unsentBytes(peer))
	})
	if got, notice := readStored(t, reader, "again"); got != events || notice != "" {
		t.Fatalf("once the silent client went, the reader got %d of %d stored events and NOTICE %q", got, events, notice)
	}
}

// readStored subscribes to everything and counts the stored events up to
// EOSE, and returns the NOTICE that came meanwhile, if any.
func readStored(t *testing.T, c *client, subID string) (int, string) {
	t.Helper()
	c.send("REQ", subID, map[string]any{})
	n, notice := 0, ""
	for {
		switch m := c.read(); m.typ {
		case "EVENT":
			n++
		case "NOTICE":
			notice = m.str(0)
		case "EOSE":
			return n, notice
		default:
			t.Fatalf("got %s %s during REQ", m.typ, joinRaw(m.args))
		}
	}
}

// TestReadKeepsAtMostTheLimit: a message is read keeping at most
// MaxMessageLength+1 bytes of it, however long it is: what is past the
// limit is read and let go as it comes. Before, a message up to twice the
// limit was read whole into memory (io.ReadAll, whose buffer grows past
// it) before it was refused: 1 MiB and more held for each connection
// sending one. The refusal still names the message's whole length.
func TestReadKeepsAtMostTheLimit(t *testing.T) {
	const limit = 64 << 10
	for _, n := range []int{0, 10, 4096, limit - 1, limit, limit + 1, limit + 5000, 2*limit - 1} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			in := make([]byte, n)
			for i := range in {
				in[i] = byte('a' + i%26)
			}
			// Without a buffer, and into one lent (see Relay.reads).
			for _, buf := range [][]byte{nil, make([]byte, readBufferSize)} {
				b, size, err := readLimited(bytes.NewReader(in), limit, buf)
				if err != nil {
					t.Fatal(err)
				}
				if size != int64(n) || !bytes.Equal(b, in[:min(n, limit+1)]) {
					t.Fatalf("read %d bytes, kept %d, want %d read, the first %d kept", size, len(b), n, min(n, limit+1))
				}
				if cap(b) > limit+1 {
					t.Fatalf("a message of %d bytes held a buffer of %d, past the limit %d", n, cap(b), limit+1)
				}
				// A message that fills the buffer moves before its end
				// is seen.
				if lent := buf != nil && len(b) > 0 && &b[0] == &buf[0]; lent != (buf != nil && n > 0 && n < len(buf)) {
					t.Fatalf("a message of %d bytes read into the lent buffer of %d: %v", n, len(buf), lent)
				}
			}
		})
	}
	// Over the socket, the refusal names the whole length.
	tr := startRelay(t, Config{MaxMessageLength: limit, MaxContentLength: limit / 2})
	c := dial(t, tr.url)
	msg := []byte(`["REQ","big",{"#x":["` + strings.Repeat("y", limit+limit/2) + `"]}]`)
	c.sendRaw(msg)
	if m := c.expect("CLOSED"); m.str(1) != fmt.Sprintf("invalid: message too large (%d > %d bytes)", len(msg), limit) {
		t.Fatalf("CLOSED %q, want the whole length %d", m.str(1), len(msg))
	}
}

// TestRelaySubscriptionBudget: the open subscriptions of every peer
// together are bounded too (MaxSubscriptionBytes): the /64s of one IPv6
// network are many peers, each within its own bound. A REQ past the
// relay-wide bound is CLOSED saying so, the next peer too, loopback
// clients are not counted, and a subscription closed makes room again.
func TestRelaySubscriptionBudget(t *testing.T) {
	big := func(i int) map[string]any {
		return map[string]any{"#t": []string{fmt.Sprintf("%06d", i) + strings.Repeat("v", 400_000)}}
	}
	// Each peer opens two such subscriptions, within its own bound (at
	// least what one REQ may hold, about 2 MB); all together hold five.
	tr := startRelay(t, Config{MaxSubscriptionBytesPerIP: 1, MaxSubscriptionBytes: 5 * 420_000})
	url := frontRelay(t, tr.Relay)
	open := 0
	var last *client // the peer of the last subscription opened, lastID
	var lastID string
	for i := 0; i < 4 && open < 5; i++ {
		cl := mustDialFrom(t, url, fmt.Sprintf("2001:db8:0:%x::1", i)) // a /64 each
		for j := range 2 {
			cl.send("REQ", fmt.Sprint("s", j), big(10*i+j))
			switch m := cl.read(); m.typ {
			case "EOSE":
				open++
				last, lastID = cl, fmt.Sprint("s", j)
			default:
				t.Fatalf("peer %d, subscription %d: %s %s, want EOSE", i, j, m.typ, joinRaw(m.args))
			}
			if open == 5 {
				break
			}
		}
	}
	fresh := mustDialFrom(t, url, "2001:db8:0:ff::1")
	fresh.send("REQ", "one", big(100))
	if m := fresh.read(); m.typ != "CLOSED" || !strings.HasPrefix(m.str(1), "rate-limited:") || !strings.Contains(m.str(1), "on this relay") {
		t.Fatalf("a new peer past the relay-wide bound: %s %s, want CLOSED rate-limited: … on this relay …", m.typ, joinRaw(m.args))
	}
	// A loopback client is not counted.
	local := dial(t, tr.url)
	local.req("local", big(200))
	// A subscription closed makes room (the probe's EOSE: the CLOSE
	// before it on that connection is done).
	last.send("CLOSE", lastID)
	last.req("probe", map[string]any{"kinds": []int{1}})
	fresh.req("again", big(101))
}

// peerBytes: a take that fits in its peer's bound but not in the bound of
// all waits for room freed by any peer, and says so; one past its own
// bound waits for its own peer.
func TestPeerBytesTotal(t *testing.T) {
	b := newPeerBytes(10, 15)
	if n, _, _ := b.take("a", 10, false); n != 10 {
		t.Fatalf("a takes %d of 10", n)
	}
	n, freed, whole := b.take("b", 6, false)
	if n != 0 || !whole || freed == nil {
		t.Fatalf("b past the bound of all: took %d, whole %v, freed %v", n, whole, freed)
	}
	if n, _, _ := b.take("b", 6, true); n != 5 {
		t.Errorf("b taking what fits: %d, want 5", n)
	}
	b.give("b", 5)
	b.give("a", 4) // room made by another peer wakes b
	select {
	case <-freed:
	default:
		t.Error("a's give did not wake b's wait")
	}
	if n, _, _ := b.take("b", 6, false); n != 6 {
		t.Errorf("b after a gave back: took %d, want 6", n)
	}
	if n, _, whole := b.take("a", 5, false); n != 0 || whole {
		t.Errorf("a past its own bound: took %d, whole %v; want 0, its own bound", n, whole)
	}
}
