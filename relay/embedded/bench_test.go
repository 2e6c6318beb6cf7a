package embedded

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// BenchmarkPublishAndDeliver measures one EVENT from its arrival to its
// delivery to one live subscriber: verification, storage (for the stored
// kind), fan-out and both WebSocket hops. The publisher waits for each OK
// and the subscriber for each EVENT.
func BenchmarkPublishAndDeliver(b *testing.B) {
	for _, tc := range []struct {
		name  string
		kind  int
		file  bool
		bound int // StoreMaxEvents, reached before the timer starts; 0: the default
	}{
		{"stored-4339/file", 4339, true, 0},
		{"stored-4339/file/at-its-bound", 4339, true, 1000},
		{"stored-4339/memory", 4339, false, 0},
		{"ephemeral-21339", 21339, false, 0},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := Config{StoreMaxEvents: tc.bound}
			if tc.file {
				cfg.DBPath = filepath.Join(b.TempDir(), "bench.db")
			}
			tr := startRelay(b, cfg)
			sub, pub := dial(b, tr.url), dial(b, tr.url)
			k, to := newKey(b), newKey(b)
			for i := range tc.bound { // every publish below deletes the oldest
				pub.mustPublish(k.event(b, tc.kind, tr.clock.Unix(), fmt.Sprint("filler ", i), nostr.Tag{"p", k.pk}))
			}
			sub.req("s", map[string]any{"kinds": []int{tc.kind}, "#p": []string{to.pk}})
			evs := make([]*nostr.Event, b.N)
			for i := range evs {
				evs[i] = k.event(b, tc.kind, tr.clock.Unix(), fmt.Sprint("message ", i), nostr.Tag{"p", to.pk})
			}
			b.ReportAllocs()
			b.ResetTimer()
			for _, ev := range evs {
				pub.mustPublish(ev)
				if typ := sub.readType(); typ != "EVENT" {
					b.Fatalf("got %s", typ)
				}
			}
		})
	}
}

// readType reads one message and returns its type, without decoding the
// rest: the benchmarks measure the relay, not the test client.
func (c *client) readType() string {
	c.t.Helper()
	_ = c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, b, err := c.ws.ReadMessage()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	for _, typ := range []string{"EVENT", "EOSE", "OK", "CLOSED", "NOTICE"} {
		if bytes.HasPrefix(b, []byte(`["`+typ+`"`)) {
			return typ
		}
	}
	c.t.Fatalf("unexpected message %.80s", b)
	return ""
}

// BenchmarkReqStored measures a REQ with a #p filter over 10,000 stored
// events, up to its EOSE: 100 recipients with 100 events each (the filter
// matches 100), and one recipient with all 10,000 (the default limit of
// 500 applies).
func BenchmarkReqStored(b *testing.B) {
	const total = 10_000
	tr := startRelay(b, Config{DBPath: filepath.Join(b.TempDir(), "bench.db")})
	k := newKey(b)
	recipients := make([]key, 100)
	for i := range recipients {
		recipients[i] = newKey(b)
	}
	everyone := newKey(b)
	ctx := context.Background()
	for i := range total {
		r := recipients[i%len(recipients)]
		ev := k.event(b, 4339, tr.clock.Unix()-nostr.Timestamp(i), fmt.Sprint("stored ", i), nostr.Tag{"p", r.pk}, nostr.Tag{"p", everyone.pk})
		raw, err := encodeEvent(ev)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := tr.store.save(ctx, ev, raw, 0, false, 0, ""); err != nil {
			b.Fatal(err)
		}
	}
	c := dial(b, tr.url)
	for _, tc := range []struct {
		name string
		p    string
		want int
	}{
		{"match-100", recipients[7].pk, 100},
		{"match-10000-limit-500", everyone.pk, DefaultDefaultLimit},
	} {
		b.Run(tc.name, func(b *testing.B) {
			filter := map[string]any{"kinds": []int{21339, 4339}, "#p": []string{tc.p}}
			b.ReportAllocs()
			b.ResetTimer()
			for range b.N {
				c.send("REQ", "q", filter)
				n := 0
				for c.readType() == "EVENT" {
					n++
				}
				if n != tc.want {
					b.Fatalf("got %d events, want %d", n, tc.want)
				}
				c.send("CLOSE", "q")
			}
		})
	}
}

// BenchmarkStoreSave measures storing one regular event in a file
// database that holds 20,000 events of other peers: from the node or a
// loopback client (no share, the baseline), from a peer within its share
// (the triggers keep what it holds), and from a peer at its share (each
// save also deletes its oldest event, found through its own index
// however many events others stored before). The events are signed and
// encoded before the timer starts.
func BenchmarkStoreSave(b *testing.B) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		peer  string
		share int64 // the peer's share of events, all of them held first
	}{
		{"no-share", "", 1000},
		{"peer-within-share", "203.0.113.7", 1 << 40},
		{"peer-at-share", "203.0.113.7", 1000},
	} {
		b.Run(tc.name, func(b *testing.B) {
			s, err := openStore(ctx, filepath.Join(b.TempDir(), "bench.db"), storeBound{events: 1 << 40, bytes: 1 << 60, peerEvents: tc.share, peerBytes: 1 << 60})
			if err != nil {
				b.Fatal(err)
			}
			defer s.close()
			k := newKey(b)
			type encoded struct {
				ev  *nostr.Event
				raw []byte
			}
			events := func(n, from int) []encoded {
				out := make([]encoded, n)
				for i := range out {
					ev := k.event(b, 1, nostr.Timestamp(testNow+from+i), fmt.Sprint("event ", from+i))
					raw, err := encodeEvent(ev)
					if err != nil {
						b.Fatal(err)
					}
					out[i] = encoded{ev, raw}
				}
				return out
			}
			save := func(e encoded) {
				if _, err := s.save(ctx, e.ev, e.raw, 0, false, 0, tc.peer); err != nil {
					b.Fatal(err)
				}
			}
			const others = 20_000
			for i, e := range events(others, 0) {
				if _, err := s.save(ctx, e.ev, e.raw, 0, false, 0, fmt.Sprint("198.51.100.", i%200)); err != nil {
					b.Fatal(err)
				}
			}
			held := 0
			if tc.share < 1<<40 {
				held = int(tc.share)
			}
			for _, e := range events(held, others) {
				save(e)
			}
			todo := events(b.N, others+held)
			b.ReportAllocs()
			b.ResetTimer()
			for _, e := range todo {
				save(e)
			}
		})
	}
}
