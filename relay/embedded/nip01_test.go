package embedded

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// TestSubscriptionIDCountsCharacters: NIP-01's subscription id is "a
// non-empty string of max length 64 chars", and the bound counts
// characters (Unicode code points), not bytes: an id of 64 "é" (128
// bytes) or 64 emoji (256 bytes) is an id, which the relay refused as
// "too long (128 > 64)"; 65 characters are refused with CLOSED for that
// id, naming characters.
func TestSubscriptionIDCountsCharacters(t *testing.T) {
	tr := startRelay(t, Config{})
	c, pub := dial(t, tr.url), dial(t, tr.url)
	k := newKey(t)
	for _, r := range []string{"é", "😀", "s"} {
		id := strings.Repeat(r, DefaultMaxSubIDLength)
		if got := c.req(id, map[string]any{"kinds": []int{1}, "#t": []string{r}}); len(got) != 0 {
			t.Fatalf("%d × %q: %v", DefaultMaxSubIDLength, r, got)
		}
		live := k.event(t, 1, tr.clock.Unix(), "live", nostr.Tag{"t", r})
		pub.mustPublish(live)
		if m := c.expect("EVENT"); m.str(0) != id || m.event(1).ID != live.ID {
			t.Fatalf("%d × %q: live EVENT %.80s", DefaultMaxSubIDLength, r, joinRaw(m.args))
		}
		// CLOSE takes the same id (the REQ after it answers once the
		// CLOSE is done).
		c.send("CLOSE", id)
		c.req("probe", map[string]any{"kinds": []int{2}})
		pub.mustPublish(k.event(t, 1, tr.clock.Unix(), "after CLOSE", nostr.Tag{"t", r}))
		if got := c.req("probe", map[string]any{"kinds": []int{2}}); len(got) != 0 {
			t.Fatalf("probe: %v", got)
		}
		c.send("CLOSE", "probe")
	}
	long := strings.Repeat("é", DefaultMaxSubIDLength+1)
	c.send("REQ", long, map[string]any{})
	want := fmt.Sprintf("invalid: subscription id too long (%d > %d characters)", DefaultMaxSubIDLength+1, DefaultMaxSubIDLength)
	if m := c.expect("CLOSED"); m.str(0) != long || m.str(1) != want {
		t.Fatalf("65 × é: CLOSED %.80s, want %q", joinRaw(m.args), want)
	}
}

// TestEmptySubscriptionIDClosed: NIP-01 says a refused REQ MUST get
// CLOSED, with a machine-readable prefix; a REQ (or COUNT) whose id is
// the empty string, which NIP-01 does not allow, got a NOTICE, which a
// client waiting on its subscription does not read as the answer. It
// gets CLOSED for the id it sent, "". A CLOSE, which has no answer in
// NIP-01, still gets a NOTICE.
func TestEmptySubscriptionIDClosed(t *testing.T) {
	tr := startRelay(t, Config{})
	c := dial(t, tr.url)
	for _, label := range []string{"REQ", "COUNT"} {
		c.send(label, "", map[string]any{"kinds": []int{1}})
		m := c.expect("CLOSED")
		if len(m.args) != 2 || m.str(0) != "" || m.str(1) != "invalid: subscription id must not be empty" {
			t.Fatalf("%s with an empty id: CLOSED %s", label, joinRaw(m.args))
		}
	}
	if n := tr.hub.size(); n != 0 {
		t.Fatalf("the hub indexes %d keys after the refused REQ, want none", n)
	}
	c.send("CLOSE", "")
	if m := c.expect("NOTICE"); !strings.HasPrefix(m.str(0), "invalid:") {
		t.Fatalf("CLOSE with an empty id: NOTICE %s", joinRaw(m.args))
	}
}

// TestCloseWithTooLongIDGetsNotice: NIP-01 has CLOSED as the answer to
// a REQ the relay refuses, or for a subscription it ends on its side; a
// CLOSE has no answer. A CLOSE whose id is too long to be a subscription
// was answered with CLOSED for that id, naming a subscription that never
// was; it gets a NOTICE, as a CLOSE with an empty id does, and the
// connection's subscriptions stay open.
func TestCloseWithTooLongIDGetsNotice(t *testing.T) {
	tr := startRelay(t, Config{})
	c, pub := dial(t, tr.url), dial(t, tr.url)
	k := newKey(t)
	c.req("open", map[string]any{"kinds": []int{1}})
	long := strings.Repeat("s", DefaultMaxSubIDLength+1)
	c.send("CLOSE", long)
	want := fmt.Sprintf("invalid: CLOSE subscription id too long (%d > %d characters)", DefaultMaxSubIDLength+1, DefaultMaxSubIDLength)
	if m := c.expect("NOTICE"); len(m.args) != 1 || m.str(0) != want {
		t.Fatalf("CLOSE with a %d-character id: NOTICE %s, want %q", DefaultMaxSubIDLength+1, joinRaw(m.args), want)
	}
	live := k.event(t, 1, tr.clock.Unix(), "still open")
	pub.mustPublish(live)
	if m := c.expect("EVENT"); m.str(0) != "open" || m.event(1).ID != live.ID {
		t.Fatalf("after the CLOSE: EVENT %.80s, want the live event on \"open\"", joinRaw(m.args))
	}
}

// TestEventNumbersPlainIntegersOnly: unlike a filter's numbers, an
// event's created_at and kind are taken in the plain integer form only,
// as go-nostr and strfry read them: the event's id is the hash of a
// serialization holding those integers, and a relay forwards the event
// as it got it. A signed event whose numbers are written 1.7e+09 or 1e0
// gets OK false naming the field; the same event written plainly is
// taken.
func TestEventNumbersPlainIntegersOnly(t *testing.T) {
	tr := startRelay(t, Config{})
	c := dial(t, tr.url)
	ev := newKey(t).event(t, 1, tr.clock.Unix(), "numbers")
	plain := fmt.Sprintf(`["EVENT",{"id":%q,"pubkey":%q,"created_at":%%s,"kind":%%s,"tags":[],"content":"numbers","sig":%q}]`, ev.ID, ev.PubKey, ev.Sig)
	exp := strconv.FormatFloat(float64(ev.CreatedAt), 'e', -1, 64)
	for _, tc := range []struct{ createdAt, kind, field string }{
		{exp, "1", "created_at"},
		{fmt.Sprint(ev.CreatedAt), "1e0", "kind"},
		{fmt.Sprint(ev.CreatedAt) + ".0", "1", "created_at"},
	} {
		c.sendRaw(fmt.Appendf(nil, plain, tc.createdAt, tc.kind))
		want := fmt.Sprintf("invalid: field %q must be an integer", tc.field)
		if m := c.expect("OK"); m.str(0) != ev.ID || string(m.args[1]) != "false" || m.str(2) != want {
			t.Fatalf("created_at %s, kind %s: OK %s, want false %q", tc.createdAt, tc.kind, joinRaw(m.args), want)
		}
	}
	c.sendRaw(fmt.Appendf(nil, plain, fmt.Sprint(ev.CreatedAt), "1"))
	if m := c.expect("OK"); string(m.args[1]) != "true" {
		t.Fatalf("the event written plainly: OK %s", joinRaw(m.args))
	}
}

// TestFilterNumbersAnyJSONForm: a filter's limit, since, until and kinds
// are JSON numbers, and JSON has one number type: 1e3 and 1000.0 are the
// integer 1000 (Python's json writes a float limit as 2.0). They were
// refused as "must be an integer"; now any number whose value is an
// integer in range is taken, and a fraction, a negative limit or a value
// out of range is refused with CLOSED saying which.
func TestFilterNumbersAnyJSONForm(t *testing.T) {
	tr := startRelay(t, Config{})
	c := dial(t, tr.url)
	k := newKey(t)
	now := int64(tr.clock.Unix())
	var stored []*nostr.Event
	for i := range 5 {
		ev := k.event(t, 1000, nostr.Timestamp(now-int64(i)), fmt.Sprint(i))
		c.mustPublish(ev)
		stored = append(stored, ev)
	}
	reqRaw := func(id, filter string) msg {
		t.Helper()
		c.sendRaw([]byte(`["REQ",` + fmt.Sprintf("%q", id) + `,` + filter + `]`))
		return c.read()
	}
	collect := func(id, filter string) []string {
		t.Helper()
		var got []string
		for m := reqRaw(id, filter); m.typ != "EOSE"; m = c.read() {
			if m.typ != "EVENT" {
				t.Fatalf("%s: got %s %s, want EVENT or EOSE", filter, m.typ, joinRaw(m.args))
			}
			got = append(got, m.event(1).ID)
		}
		c.send("CLOSE", id)
		return got
	}
	for _, tc := range []struct {
		filter string
		want   []*nostr.Event
	}{
		{`{"kinds":[1e3],"limit":2.0}`, stored[:2]},
		{`{"kinds":[1000.000],"limit":3E0}`, stored[:3]},
		{`{"kinds":[10000e-1],"limit":1e3}`, stored},
		{`{"kinds":[1000],"limit":0.0}`, nil},
		{`{"kinds":[1000],"limit":-0.0}`, nil},
		{fmt.Sprintf(`{"kinds":[1000],"since":%de0,"until":%d.0}`, now-3, now-1), stored[1:4]},
		{fmt.Sprintf(`{"kinds":[1000],"since":%d0e-1}`, now-2), stored[:3]},
	} {
		if got := collect("n", tc.filter); !slices.Equal(got, ids(tc.want...)) {
			t.Errorf("%s: %v, want %v", tc.filter, got, ids(tc.want...))
		}
	}
	for _, tc := range []struct{ filter, want string }{
		{`{"limit":1.5}`, `invalid: "limit" must be an integer, not 1.5`},
		{`{"limit":15e-1}`, `invalid: "limit" must be an integer, not 15e-1`},
		{`{"since":1.000000000000000000001e3}`, `invalid: "since" must be an integer, not 1.000000000000000000001e3`},
		{`{"limit":-1}`, `invalid: limit must not be negative`},
		{`{"limit":-1e0}`, `invalid: limit must not be negative`},
		{`{"until":1e19}`, `invalid: "until" is out of range (1e19)`},
		{`{"since":-92233720368547758090}`, `invalid: "since" is out of range (-92233720368547758090)`},
		{`{"limit":1e999999999}`, `invalid: "limit" is out of range (1e999999999)`},
		{`{"kinds":[1.5]}`, `invalid: "kinds" must be an array of integers`},
		{`{"limit":"5"}`, `invalid: "limit" must be an integer`},
	} {
		m := reqRaw("bad", tc.filter)
		if m.typ != "CLOSED" || m.str(0) != "bad" || m.str(1) != tc.want {
			t.Errorf("%s: got %s %s, want CLOSED bad %q", tc.filter, m.typ, joinRaw(m.args), tc.want)
		}
	}
}

// TestOlderReplaceableIsDuplicate: an event of a replaceable or
// addressable kind older than the version stored (or as old, with a
// higher id) is answered OK true with "duplicate:", as nostream answers
// and as khatru accepts it (OK true) without storing it: the relay
// already holds this address's current version, so there is nothing for
// the publisher to retry. It got OK false with "invalid:", which the
// event is not: a client reads it as a bad event.
func TestOlderReplaceableIsDuplicate(t *testing.T) {
	tr := startRelay(t, Config{})
	c := dial(t, tr.url)
	k := newKey(t)
	now := tr.clock.Unix()
	for _, tc := range []struct {
		kind int
		tags []nostr.Tag
	}{
		{0, nil}, {3, nil}, {10002, nil}, {30000, []nostr.Tag{{"d", "x"}}},
	} {
		neu := k.event(t, tc.kind, now-5, "new", tc.tags...)
		old := k.event(t, tc.kind, now-9, "old", tc.tags...)
		c.mustPublish(neu)
		ok, why := c.publish(old)
		if !ok || !strings.HasPrefix(why, "duplicate: ") {
			t.Errorf("kind %d, older version: OK %v %q, want true duplicate: …", tc.kind, ok, why)
		}
		lo, hi := tiePair(t, k, tc.kind, now, tc.tags...)
		c.mustPublish(lo)
		if ok, why := c.publish(hi); !ok || !strings.HasPrefix(why, "duplicate: ") {
			t.Errorf("kind %d, tie with a higher id: OK %v %q, want true duplicate: …", tc.kind, ok, why)
		}
		if got := c.req("r", map[string]any{"kinds": []int{tc.kind}}); !slices.Equal(got, ids(lo)) {
			t.Errorf("kind %d: stored %v, want only %s", tc.kind, got, lo.ID)
		}
	}
}

// TestShapeRefusalSaysInvalidOnce: an event refused for its shape (a
// kind out of range, a negative created_at, an id not in hex) gets OK
// false with one "invalid:" prefix and the rule it breaks, as one refused
// for its id or signature does; it read "invalid: invalid event: …".
func TestShapeRefusalSaysInvalidOnce(t *testing.T) {
	tr := startRelay(t, Config{})
	c := dial(t, tr.url)
	ev := newKey(t).event(t, 1, tr.clock.Unix(), "shape")
	msg := `["EVENT",{"id":%q,"pubkey":%q,"created_at":%s,"kind":%s,"tags":[],"content":"shape","sig":%q}]`
	for _, tc := range []struct{ createdAt, kind, want string }{
		{fmt.Sprint(ev.CreatedAt), "70000", "invalid: kind must be in 0…65535"},
		{"-1", "1", "invalid: created_at must not be negative"},
	} {
		c.sendRaw(fmt.Appendf(nil, msg, ev.ID, ev.PubKey, tc.createdAt, tc.kind, ev.Sig))
		if m := c.expect("OK"); m.str(0) != ev.ID || string(m.args[1]) != "false" || m.str(2) != tc.want {
			t.Errorf("created_at %s, kind %s: OK %s, want false %q", tc.createdAt, tc.kind, joinRaw(m.args), tc.want)
		}
	}
}
