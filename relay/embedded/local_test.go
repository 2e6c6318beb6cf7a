package embedded

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/snapnode/snapnode/internal/jsonenc"
	"github.com/snapnode/snapnode/relay"
)

// The same behaviours over the pool's two kinds of relay.Conn: the
// WebSocket one (relay.DialWebsocket) and the in-process one (LocalConn).

// connClient drives a relay.Conn in a test.
type connClient struct {
	t testing.TB
	c relay.Conn
}

// transports runs f once per kind of connection; f's dial opens one more
// connection to tr.
func transports(t *testing.T, cfg Config, f func(t *testing.T, tr *testRelay, dial func() *connClient)) {
	for _, kind := range []string{"websocket", "in-process"} {
		t.Run(kind, func(t *testing.T) {
			tr := startRelay(t, cfg)
			dial := func() *connClient {
				t.Helper()
				var c relay.Conn
				var err error
				if kind == "websocket" {
					c, err = relay.DialWebsocket(context.Background(), tr.url)
				} else {
					c, err = tr.LocalConn()
				}
				if err != nil {
					t.Fatalf("dial: %v", err)
				}
				t.Cleanup(func() { c.Close() })
				return &connClient{t: t, c: c}
			}
			f(t, tr, dial)
		})
	}
}

// next returns the next message, failing the test after 5 s.
func (cc *connClient) next() relay.ConnMessage {
	cc.t.Helper()
	select {
	case m, ok := <-cc.c.Messages():
		if !ok {
			cc.t.Fatalf("connection ended: %v", cc.c.Err())
		}
		return m
	case <-time.After(5 * time.Second):
		cc.t.Fatal("no message from the relay")
		return relay.ConnMessage{}
	}
}

func (cc *connClient) expect(label string) relay.ConnMessage {
	cc.t.Helper()
	m := cc.next()
	if m.Label != label {
		cc.t.Fatalf("got %s %q %q, want %s", m.Label, m.SubID, m.Reason, label)
	}
	return m
}

func (cc *connClient) publish(ev *nostr.Event) (bool, string) {
	cc.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	ok, why, err := cc.c.Publish(ctx, *ev)
	if err != nil {
		cc.t.Fatalf("publish: %v", err)
	}
	return ok, why
}

func (cc *connClient) mustPublish(ev *nostr.Event) {
	cc.t.Helper()
	if ok, why := cc.publish(ev); !ok {
		cc.t.Fatalf("publish refused: %s", why)
	}
}

// req subscribes and returns the stored events, in order, checking that
// EOSE ends them.
func (cc *connClient) req(id string, f nostr.Filter) []*nostr.Event {
	cc.t.Helper()
	if err := cc.c.Req(id, f); err != nil {
		cc.t.Fatal(err)
	}
	var evs []*nostr.Event
	for {
		m := cc.next()
		switch {
		case m.Label == "EVENT" && m.SubID == id:
			evs = append(evs, m.Event)
		case m.Label == "EOSE" && m.SubID == id:
			return evs
		default:
			cc.t.Fatalf("got %s %q %q during REQ %s", m.Label, m.SubID, m.Reason, id)
		}
	}
}

// sameEvent compares the exported fields (go-nostr's decoder sets an
// unexported one).
func sameEvent(a, b *nostr.Event) bool {
	return reflect.DeepEqual(copyEvent(a), copyEvent(b))
}

func eventIDs(evs []*nostr.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.ID
	}
	return out
}

func TestConnPublish(t *testing.T) {
	transports(t, Config{MaxMessageLength: 2048}, func(t *testing.T, tr *testRelay, dial func() *connClient) {
		c := dial()
		k := newKey(t)
		now := tr.clock.Unix()

		ev := k.event(t, 1, now, "hello", nostr.Tag{"t", "x"})
		if ok, why := c.publish(ev); !ok || why != "" {
			t.Fatalf("valid event: ok=%v %q", ok, why)
		}
		if ok, why := c.publish(ev); !ok || !strings.HasPrefix(why, "duplicate:") {
			t.Fatalf("duplicate: ok=%v %q", ok, why)
		}
		badSig := k.event(t, 1, now, "bad sig")
		badSig.Sig = ev.Sig
		if ok, why := c.publish(badSig); ok || !strings.HasPrefix(why, "invalid:") {
			t.Fatalf("bad signature: ok=%v %q", ok, why)
		}
		badID := k.event(t, 1, now, "bad id")
		badID.Content = "changed after signing"
		if ok, why := c.publish(badID); ok || !strings.HasPrefix(why, "invalid:") {
			t.Fatalf("bad id: ok=%v %q", ok, why)
		}
		expired := k.event(t, 1, now, "expired", nostr.Tag{"expiration", fmt.Sprint(now - 1)})
		if ok, why := c.publish(expired); ok || why != "invalid: event has expired" {
			t.Fatalf("expired: ok=%v %q", ok, why)
		}
		// The message length counts as the JSON message would (plain ASCII
		// content: go-nostr's encoding and the relay's agree).
		big := k.event(t, 1, now, strings.Repeat("b", 2000))
		raw, _ := encodeEvent(big)
		want := fmt.Sprintf("invalid: message too large (%d > 2048 bytes)", len(`["EVENT",]`)+len(raw))
		if ok, why := c.publish(big); ok || why != want {
			t.Fatalf("too large: ok=%v %q, want %q", ok, why, want)
		}
		// Only the valid event was stored.
		if got := c.req("all", nostr.Filter{}); !slices.Equal(eventIDs(got), []string{ev.ID}) {
			t.Fatalf("stored: %v", eventIDs(got))
		}
	})
}

func TestConnReqStoredThenLive(t *testing.T) {
	transports(t, Config{}, func(t *testing.T, tr *testRelay, dial func() *connClient) {
		sub, pub := dial(), dial()
		k, target := newKey(t), newKey(t)
		now := tr.clock.Unix()
		var stored []*nostr.Event
		for i := range 3 {
			ev := k.event(t, 4339, now-10+nostr.Timestamp(i), fmt.Sprint("stored ", i), nostr.Tag{"p", target.pk})
			pub.mustPublish(ev)
			stored = append(stored, ev)
		}
		pub.mustPublish(k.event(t, 4339, now, "for someone else", nostr.Tag{"p", k.pk}))

		f := nostr.Filter{Kinds: []int{4339, 21339}, Tags: nostr.TagMap{"p": {target.pk}}}
		got := sub.req("s", f)
		if want := []string{stored[2].ID, stored[1].ID, stored[0].ID}; !slices.Equal(eventIDs(got), want) {
			t.Fatalf("stored events: %v, want newest first %v", eventIDs(got), want)
		}
		for _, ev := range got {
			if err := relay.VerifyEvent(ev); err != nil {
				t.Fatalf("stored event as delivered: %v", err)
			}
		}

		// After EOSE: live events that match, and only those.
		pub.mustPublish(k.event(t, 21339, now, "not for target", nostr.Tag{"p", k.pk}))
		live := k.event(t, 21339, now, "live", nostr.Tag{"p", target.pk})
		pub.mustPublish(live)
		m := sub.expect("EVENT")
		if m.SubID != "s" || !sameEvent(m.Event, live) {
			t.Fatalf("live: %q %+v, want %+v", m.SubID, m.Event, live)
		}
		if err := relay.VerifyEvent(m.Event); err != nil {
			t.Fatalf("live event as delivered: %v", err)
		}
	})
}

func TestConnCloseReq(t *testing.T) {
	transports(t, Config{}, func(t *testing.T, tr *testRelay, dial func() *connClient) {
		sub, pub := dial(), dial()
		k := newKey(t)
		now := tr.clock.Unix()
		sub.req("a", nostr.Filter{Kinds: []int{1}})
		if err := sub.c.CloseReq("a"); err != nil {
			t.Fatal(err)
		}
		// The relay reads a connection's messages in order: once a REQ
		// sent after the CLOSE has its EOSE, the CLOSE is done, and an
		// event published from now on cannot be meant for "a" (one
		// published before could have been, and sent: a race of the
		// test's, not a fault of the relay's).
		if got := sub.req("sync", nostr.Filter{Kinds: []int{3}, Limit: 0, LimitZero: true}); len(got) != 0 {
			t.Fatalf("sync: %v", eventIDs(got))
		}
		pub.mustPublish(k.event(t, 1, now, "after close"))
		// A REQ on another id is a barrier: its EOSE comes after anything
		// still queued for "a".
		if got := sub.req("barrier", nostr.Filter{Kinds: []int{2}, Limit: 0, LimitZero: true}); len(got) != 0 {
			t.Fatalf("barrier: %v", eventIDs(got))
		}
		two := k.event(t, 2, now, "kind 2")
		pub.mustPublish(two)
		if m := sub.expect("EVENT"); m.SubID != "barrier" || m.Event.ID != two.ID {
			t.Fatalf("got an event for %q, want only the barrier's", m.SubID)
		}
	})
}

func TestConnEphemeralNotStored(t *testing.T) {
	transports(t, Config{}, func(t *testing.T, tr *testRelay, dial func() *connClient) {
		sub, pub := dial(), dial()
		k := newKey(t)
		sub.req("eph", nostr.Filter{Kinds: []int{21339}})
		ev := k.event(t, 21339, tr.clock.Unix(), "ephemeral", nostr.Tag{"p", k.pk})
		pub.mustPublish(ev)
		if m := sub.expect("EVENT"); m.Event.ID != ev.ID {
			t.Fatal("wrong event")
		}
		if got := pub.req("after", nostr.Filter{Kinds: []int{21339}}); len(got) != 0 {
			t.Fatalf("ephemeral event was stored: %v", eventIDs(got))
		}
		if n, _ := tr.store.count(context.Background()); n != 0 {
			t.Fatalf("%d rows stored", n)
		}
	})
}

func TestConnReplaceable(t *testing.T) {
	transports(t, Config{}, func(t *testing.T, tr *testRelay, dial func() *connClient) {
		c := dial()
		k := newKey(t)
		now := tr.clock.Unix()
		old, neu := k.event(t, 0, now-5, "old"), k.event(t, 0, now, "new")
		c.mustPublish(old)
		c.mustPublish(neu)
		if ok, why := c.publish(k.event(t, 0, now-9, "older")); !ok || !strings.HasPrefix(why, "duplicate:") {
			t.Fatalf("older version: ok=%v %q", ok, why)
		}
		if got := c.req("meta", nostr.Filter{Kinds: []int{0}, Authors: []string{k.pk}}); !slices.Equal(eventIDs(got), []string{neu.ID}) {
			t.Fatalf("replaceable: %v, want only the newest", eventIDs(got))
		}
	})
}

func TestConnRefusals(t *testing.T) {
	cfg := Config{MaxSubscriptions: 2, MaxFilterValues: 3, MaxSubIDLength: 8}
	transports(t, cfg, func(t *testing.T, tr *testRelay, dial func() *connClient) {
		c := dial()
		closedWith := func(id string, f nostr.Filter, prefix string) {
			t.Helper()
			if err := c.c.Req(id, f); err != nil {
				t.Fatal(err)
			}
			m := c.expect("CLOSED")
			if m.SubID != id || !strings.HasPrefix(m.Reason, prefix) {
				t.Fatalf("REQ %q: CLOSED %q %q, want %q", id, m.SubID, m.Reason, prefix)
			}
		}
		closedWith("values", nostr.Filter{Authors: []string{"a", "b"}, Kinds: []int{1, 2}}, "invalid: too many values")
		closedWith("search", nostr.Filter{Search: "x"}, "unsupported: search")
		closedWith("limit", nostr.Filter{Limit: -1}, "invalid: limit must not be negative")
		closedWith("longer-than-8", nostr.Filter{}, "invalid: subscription id too long")
		if err := c.c.Req("", nostr.Filter{}); err != nil {
			t.Fatal(err)
		}
		if m := c.expect("CLOSED"); m.SubID != "" || m.Reason != "invalid: subscription id must not be empty" {
			t.Fatalf("empty id: CLOSED %q %q", m.SubID, m.Reason)
		}
		c.req("one", nostr.Filter{Kinds: []int{1}})
		c.req("two", nostr.Filter{Kinds: []int{1}})
		closedWith("three", nostr.Filter{Kinds: []int{1}}, "rate-limited: too many open subscriptions")
		// A tag condition with no values matches nothing.
		if got := c.req("one", nostr.Filter{Tags: nostr.TagMap{"p": {}}}); len(got) != 0 {
			t.Fatal(got)
		}
	})
}

// A local consumer that stops reading Messages is cut off once the
// publisher has waited WriteTimeout for room (the in-process connection
// is patient, unlike a WebSocket client), while a WebSocket subscriber
// gets every event.
func TestLocalSlowConsumerCutOff(t *testing.T) {
	tr := startRelay(t, Config{SendQueue: 4, WriteTimeout: 200 * time.Millisecond})
	local, err := tr.LocalConn()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	ws := &client{t: t, ws: dial(t, tr.url).ws}
	pub := dial(t, tr.url)
	f := nostr.Filter{Kinds: []int{21339}}
	if err := local.Req("slow", f); err != nil {
		t.Fatal(err)
	}
	// Req only queues the REQ: an ephemeral event published before the
	// relay handled it reaches no one, and a local client that missed
	// enough of them is never cut off. Its EOSE (nothing is stored) says
	// the subscription is live.
	if m, open := <-local.Messages(); !open || m.Label != "EOSE" || m.SubID != "slow" {
		t.Fatalf("got %s %q %s (%v), want EOSE for slow", m.Label, m.SubID, m.Reason, local.Err())
	}
	ws.req("fast", map[string]any{"kinds": []int{21339}})

	// Messages (4) and the live queue (4) fill, with one message held by
	// the writer: past them the publisher waits, then the local client is
	// cut off.
	const n = 30
	k := newKey(t)
	now := tr.clock.Unix()
	for i := range n {
		ev := k.event(t, 21339, now, fmt.Sprint("event ", i))
		pub.mustPublish(ev)
		if m := ws.expect("EVENT"); m.event(1).ID != ev.ID {
			t.Fatalf("fast subscriber, event %d: wrong event", i)
		}
	}
	// The local client gets what was queued for it, then the end.
	events := 0
	for m := range local.Messages() {
		if m.Label == "EVENT" {
			events++
		}
	}
	if events >= n {
		t.Fatalf("slow local client got all %d events", events)
	}
	if err := local.Err(); !errors.Is(err, errLocalEnded) {
		t.Fatalf("Err = %v, want the local connection ended", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, _, err := local.Publish(ctx, *k.event(t, 1, now, "late")); err == nil {
		t.Fatal("publish on an ended connection succeeded")
	}
}

// Events cross the in-process connection as copies: neither the publisher,
// nor one subscriber, can change what the relay or another subscriber has.
func TestLocalEventsAreCopies(t *testing.T) {
	tr := startRelay(t, Config{})
	conn := func() *connClient {
		c, err := tr.LocalConn()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return &connClient{t: t, c: c}
	}
	a, b, pub := conn(), conn(), conn()
	a.req("a", nostr.Filter{Kinds: []int{1}})
	b.req("b", nostr.Filter{Kinds: []int{1}})
	k := newKey(t)
	ev := k.event(t, 1, tr.clock.Unix(), "content", nostr.Tag{"t", "one", "two"}, nostr.Tag{"p", k.pk})
	want := copyEvent(ev)
	pub.mustPublish(ev)
	ev.Tags[0][1] = "changed by the publisher"
	ev.Tags = append(ev.Tags, nostr.Tag{"x"})

	gotA := a.expect("EVENT").Event
	gotA.Tags[0][1] = "changed by a"
	gotA.Tags[0] = append(gotA.Tags[0], "appended by a")
	gotA.Content = "changed by a"
	gotB := b.expect("EVENT").Event
	if !sameEvent(gotB, want) {
		t.Fatalf("b got %+v, want %+v", gotB, want)
	}
	stored := pub.req("stored", nostr.Filter{IDs: []string{want.ID}})
	if len(stored) != 1 || !sameEvent(stored[0], want) {
		t.Fatalf("stored %+v, want %+v", stored, want)
	}
}

func TestLocalConnEnds(t *testing.T) {
	tr := startRelay(t, Config{})
	owner, err := tr.LocalConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	owner.Close() // again: nothing
	if _, ok := <-owner.Messages(); ok || owner.Err() != relay.ErrConnClosed {
		t.Fatalf("closed by its owner: Err = %v", owner.Err())
	}
	if err := owner.Req("s", nostr.Filter{}); err == nil {
		t.Fatal("Req on a closed connection")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	k := newKey(t)
	if _, _, err := owner.Publish(ctx, *k.event(t, 1, tr.clock.Unix(), "x")); !errors.Is(err, relay.ErrConnClosed) {
		t.Fatalf("Publish on a closed connection: %v", err)
	}

	live, err := tr.LocalConn()
	if err != nil {
		t.Fatal(err)
	}
	if err := live.Req("s", nostr.Filter{}); err != nil {
		t.Fatal(err)
	}
	tr.stop() // Serve shuts down: every connection ends
	for range live.Messages() {
	}
	if err := live.Err(); !errors.Is(err, errLocalEnded) || !strings.Contains(err.Error(), "relay shutting down") {
		t.Fatalf("Err after shutdown: %v", err)
	}
	live.Close()
	if err := tr.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := tr.LocalConn(); err == nil {
		t.Fatal("LocalConn on a closed relay")
	}
}

// A pool can use the in-process connection as it uses a WebSocket.
func TestPoolOverLocalConn(t *testing.T) {
	tr := startRelay(t, Config{})
	p := relay.NewPool(relay.PoolConfig{
		URLs:   []string{tr.url},
		Logger: slog.New(slog.DiscardHandler),
		Dial:   func(context.Context, string) (relay.Conn, error) { return tr.LocalConn() },
	})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	p.Start(ctx)
	defer p.Close()
	k := newKey(t)
	stored := k.event(t, 4339, tr.clock.Unix()-1, "stored")
	if _, err := p.Publish(ctx, *stored); err != nil {
		t.Fatal(err)
	}
	sub, err := p.Subscribe(ctx, nostr.Filter{Authors: []string{k.pk}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if ev := recv(t, sub.Events()); ev == nil || ev.ID != stored.ID {
		t.Fatalf("stored: %v", ev)
	}
	recv(t, sub.EOSE())
	live := k.event(t, 21339, tr.clock.Unix(), "live")
	if _, err := p.Publish(ctx, *live); err != nil {
		t.Fatal(err)
	}
	// A WebSocket client sees what the pool published in-process.
	ws := dial(t, tr.url)
	if got := ws.req("ws", map[string]any{"ids": []string{stored.ID}}); !slices.Equal(got, []string{stored.ID}) {
		t.Fatalf("over the WebSocket: %v", got)
	}
	if ev := recv(t, sub.Events()); ev == nil || ev.ID != live.ID {
		t.Fatalf("live: %v", ev)
	}
	if h := p.Health(); h[0].State != relay.StateConnected || h[0].EventsInvalid != 0 {
		t.Fatalf("health: %+v", h[0])
	}
}

// recv receives from ch, failing the test after 5 s.
func recv[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(5 * time.Second):
		t.Fatal("nothing received")
		var zero T
		return zero
	}
}

// The in-process messages are what the relay's parser makes of the JSON
// the pool's WebSocket Conn sends (go-nostr's envelopes).
func TestLocalMessagesMatchParser(t *testing.T) {
	cfg, err := Config{MaxFilterValues: 4, MaxSubIDLength: 10, MaxEventTags: 3, MaxContentLength: 100, MaxMessageLength: 700}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	lim := new(cfg.limits())
	ts := func(v int64) *nostr.Timestamp { t := nostr.Timestamp(v); return &t }
	filters := []nostr.Filter{
		{},
		{IDs: []string{}, Kinds: []int{}, Authors: []string{}},
		{IDs: []string{"b", "a", "b"}},
		{Kinds: []int{3, 1, 3}, Since: ts(10), Until: ts(5)},
		{Authors: []string{"x"}, Limit: 7},
		{Limit: 0, LimitZero: true},
		{Limit: 100_000},
		{Limit: -1},
		{Search: "x"},
		{Tags: nostr.TagMap{"p": {"1", "2"}, "e": {"3"}}},
		{Tags: nostr.TagMap{"p": {}}},
		{Tags: nostr.TagMap{"p": nil}},
		{Tags: nostr.TagMap{"": {"x"}}},
		{Tags: nostr.TagMap{"skill": {"a"}}},
		{Kinds: []int{1, 2, 3}, Authors: []string{"a", "b"}},
		{IDs: []string{strings.Repeat("i", 300), strings.Repeat("j", 300)}},
	}
	for _, id := range []string{"sub", "", "eleven-char"} {
		for _, f := range filters {
			wire, err := nostr.ReqEnvelope{SubscriptionID: id, Filters: nostr.Filters{f}}.MarshalJSON()
			if err != nil {
				t.Fatal(err)
			}
			want, wantErr := parseClientMessage(wire, lim)
			got, gotErr := reqMessage(id, f, lim)
			if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotErr, wantErr) {
				t.Errorf("REQ %q %s:\n got %+v, %v\nwant %+v, %v", id, wire, got, gotErr, want, wantErr)
			}
		}
		wire, _ := nostr.CloseEnvelope(id).MarshalJSON()
		want, wantErr := parseClientMessage(wire, lim)
		got, gotErr := closeMessage(id, lim)
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotErr, wantErr) {
			t.Errorf("CLOSE %q: got %+v, %v; want %+v, %v", id, got, gotErr, want, wantErr)
		}
	}

	k := newKey(t)
	good := k.event(t, 1, 100, "hello", nostr.Tag{"t", "x"})
	mut := func(f func(*nostr.Event)) *nostr.Event { ev := copyEvent(good); f(ev); return ev }
	events := []*nostr.Event{
		good,
		mut(func(ev *nostr.Event) { ev.Tags = nil }),
		mut(func(ev *nostr.Event) { ev.ID = "" }),
		mut(func(ev *nostr.Event) { ev.PubKey = "" }),
		mut(func(ev *nostr.Event) { ev.Sig = "" }),
		mut(func(ev *nostr.Event) { ev.ID = strings.ToUpper(ev.ID) }),
		mut(func(ev *nostr.Event) { ev.Kind = 70000 }),
		mut(func(ev *nostr.Event) { ev.CreatedAt = 0 }),
		mut(func(ev *nostr.Event) { ev.Tags = nostr.Tags{{"a"}, {"b"}, {"c"}, {"d"}} }),
		mut(func(ev *nostr.Event) { ev.Content = strings.Repeat("c", 101) }),
		mut(func(ev *nostr.Event) { ev.Tags = nostr.Tags{{"big", strings.Repeat("t", 600)}} }),
		mut(func(ev *nostr.Event) { ev.ID = "short"; ev.Tags = nostr.Tags{{"big", strings.Repeat("t", 600)}} }),
	}
	for i, ev := range events {
		wire, err := nostr.EventEnvelope{Event: *ev}.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want, wantErr := parseClientMessage(wire, lim)
		if r, ok := wantErr.(*refusal); ok && len(wire) > lim.maxMessageLength {
			if id := eventIDHint(wire); id != "" { // as wsTransport.handle
				wantErr = okFalse(id, "%s", r.msg)
			}
		}
		got, gotErr := eventMessage(ev, lim)
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotErr, wantErr) {
			t.Errorf("event %d %s:\n got %+v, %v\nwant %+v, %v", i, wire, got, gotErr, want, wantErr)
		}
	}
}

// The lengths counted without encoding are those of the relay's encoding.
func TestMessageLengths(t *testing.T) {
	strs := []string{"", "plain", `quote " and \ backslash`, "\b\f\n\r\t\x00\x1f\x7f", "é ü 日本 🙂", "\u2028\u2029", "bad \xff\xfe utf-8 \xe2\x82", "<html>&amp;"}
	for _, s := range strs {
		b, _ := jsonenc.Marshal(s)
		if got := jsonStringLen(s); got != len(b) {
			t.Errorf("jsonStringLen(%q) = %d, want %d", s, got, len(b))
		}
		ev := &nostr.Event{ID: s, PubKey: "p", CreatedAt: -12345, Kind: 7, Tags: nostr.Tags{{s, "v"}, {}, {s}}, Content: s + s, Sig: "s"}
		raw, _ := encodeEvent(ev)
		if got, want := eventMessageLen(ev), len(`["EVENT",]`)+len(raw); got != want {
			t.Errorf("eventMessageLen with %q = %d, want %d", s, got, want)
		}
	}
	// Plain values: go-nostr's REQ has the length counted.
	ts := nostr.Timestamp(1_700_000_000)
	for _, f := range []nostr.Filter{
		{},
		{IDs: []string{"a", "b"}, Kinds: []int{1, 30000}, Authors: []string{"c"}, Since: &ts, Until: &ts, Limit: 10, Search: "s", Tags: nostr.TagMap{"p": {"x", "y"}, "skill": {}}},
		{Limit: 0, LimitZero: true, Tags: nostr.TagMap{"e": nil}},
	} {
		wire, _ := nostr.ReqEnvelope{SubscriptionID: "id", Filters: nostr.Filters{f}}.MarshalJSON()
		if got := len(`["REQ",,]`) + jsonStringLen("id") + filterLen(&f); got != len(wire) {
			t.Errorf("REQ %s: counted %d, want %d", wire, got, len(wire))
		}
	}
}

// A local consumer that falls behind for a while is not cut off: the
// publisher waits for room, and every event arrives, in order.
func TestLocalConsumerCatchesUp(t *testing.T) {
	tr := startRelay(t, Config{SendQueue: 4, WriteTimeout: time.Hour})
	local, err := tr.LocalConn()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	pub := dial(t, tr.url)
	if err := local.Req("behind", nostr.Filter{Kinds: []int{21339}}); err != nil {
		t.Fatal(err)
	}
	// Req only queues the REQ: an ephemeral event published before the
	// relay handled it reaches no one. Its EOSE (nothing is stored) says
	// the subscription is live.
	if m, open := <-local.Messages(); !open || m.Label != "EOSE" || m.SubID != "behind" {
		t.Fatalf("got %s %q %s (%v), want EOSE for behind", m.Label, m.SubID, m.Reason, local.Err())
	}
	const n = 20
	k := newKey(t)
	now := tr.clock.Unix()
	events := make([]*nostr.Event, n)
	ids := make([]string, n)
	for i := range events {
		events[i] = k.event(t, 21339, now, fmt.Sprint("event ", i))
		ids[i] = events[i].ID
	}
	// The publisher reports its failure here (t.Fatal would end its
	// goroutine only, and the test would wait for events never sent).
	published := make(chan int, n)
	failed := make(chan error, 1)
	go func() {
		for i, ev := range events {
			if err := pub.publishErr(ev); err != nil {
				failed <- fmt.Errorf("publish event %d: %w", i, err)
				return
			}
			published <- i
		}
	}()
	waitPublished := func() {
		t.Helper()
		select {
		case <-published:
		case err := <-failed:
			t.Fatal(err)
		}
	}
	// Read nothing until the queues are full (4 + 4, one held by the
	// writer): the publisher is then waiting.
	for range 8 {
		waitPublished()
	}
	var got []string
	for len(got) < n {
		select {
		case m, open := <-local.Messages():
			if !open {
				t.Fatalf("the connection ended after %d events: %v", len(got), local.Err())
			}
			if m.Label == "EVENT" {
				got = append(got, m.Event.ID)
			} else {
				t.Errorf("got %s %q %s, want only events", m.Label, m.SubID, m.Reason)
			}
		case err := <-failed:
			t.Fatalf("after %d events: %v", len(got), err)
		}
	}
	for range n - 8 { // the publisher is done with its connection
		waitPublished()
	}
	if !slices.Equal(got, ids) {
		t.Fatalf("got %d events %v, want all %d in order", len(got), got, n)
	}
	if tr.slowCuts.Load() != 0 {
		t.Errorf("%d clients cut off, want none", tr.slowCuts.Load())
	}
}

// The node's own connection is not cut when live events come faster than
// its stored ones go (a flood prolonging the stored phase): the publisher
// waits for the phase's end, and every event reaches the node.
func TestLocalStoredPhaseWaits(t *testing.T) {
	tr := startRelay(t, Config{SendQueue: 4, WriteTimeout: 10 * time.Second})
	local, err := tr.LocalConn()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { local.Close() })
	pub := dial(t, tr.url)
	k := newKey(t)
	now := tr.clock.Unix()
	const stored, live = 40, 12
	for i := range stored {
		pub.mustPublish(k.event(t, 1, now, fmt.Sprint("stored ", i)))
	}
	// Nothing is read yet: the stored events fill the way to the node,
	// and the live ones wait in the subscription's buffer, then past it.
	if err := local.Req("s", nostr.Filter{Kinds: []int{1, 21339}}); err != nil {
		t.Fatal(err)
	}
	// Req only queues the REQ, and a live (ephemeral) event published
	// before the relay handled it would reach no one: the live events go
	// once the stored ones fill Messages.
	msgs := local.Messages()
	waitUntil(t, func() bool { return len(msgs) == cap(msgs) }, func() string {
		return fmt.Sprintf("%d of %d stored events on Messages", len(msgs), cap(msgs))
	})
	lives := make([]*nostr.Event, live)
	for i := range lives {
		lives[i] = k.event(t, 21339, now, fmt.Sprint("live ", i))
	}
	// The publisher reports its end here (t.Fatal would end its goroutine
	// only).
	published := make(chan error, 1)
	go func() {
		for i, ev := range lives {
			if err := pub.publishErr(ev); err != nil {
				published <- fmt.Errorf("live %d: %w", i, err)
				return
			}
		}
		published <- nil
	}()
	// Reading starts once a live event found the buffer full.
	waitUntil(t, func() bool { return tr.slowCuts.Load() != 0 || tr.phaseWaits.Load() != 0 }, func() string {
		return "the live events never filled the stored phase's buffer"
	})
	events, pubDone := 0, false
	for events < stored+live {
		select {
		case m, open := <-msgs:
			if !open {
				t.Fatalf("the node's connection ended after %d of %d events: %v", events, stored+live, local.Err())
			}
			if m.Label == "EVENT" {
				events++
			}
		case err := <-published: // a nil channel once received from
			if err != nil {
				t.Fatalf("after %d of %d events: %v", events, stored+live, err)
			}
			pubDone, published = true, nil
		}
	}
	if local.Err() != nil {
		t.Fatalf("the node's connection got %d of %d events: %v", events, stored+live, local.Err())
	}
	if !pubDone {
		if err := <-published; err != nil {
			t.Fatal(err)
		}
	}
}

// TestReqBytesBoundByTransport: a WebSocket client's REQ loads no more
// than MaxStoredBytes of stored events; the node's own connection gets
// every event its filter's limit gives (its inbox catching up).
func TestReqBytesBoundByTransport(t *testing.T) {
	cfg := Config{MaxMessageLength: 16 << 10, MaxContentLength: 8 << 10, MaxStoredBytes: 32 << 10}
	transports(t, cfg, func(t *testing.T, tr *testRelay, dial func() *connClient) {
		c := dial()
		k := newKey(t)
		now := tr.clock.Unix()
		for j := range 10 {
			c.mustPublish(k.event(t, 1, now-nostr.Timestamp(j), strings.Repeat("x", 6000)))
		}
		got := len(c.req("big", nostr.Filter{Authors: []string{k.pk}}))
		want := 5 // 32 KiB of events of 6 KB
		if _, local := c.c.(relay.InProcessConn); local {
			want = 10
		}
		if got != want {
			t.Fatalf("10 events of 6 KB: got %d, want %d", got, want)
		}
	})
}
