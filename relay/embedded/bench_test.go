package embedded

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// BenchmarkPublishAndDeliver measures one EVENT from its arrival to its
// delivery to one live subscriber: verification, storage (for the stored
// kind), fan-out and both WebSocket hops. The publisher waits for each OK
// and the subscriber for each EVENT.
func BenchmarkPublishAndDeliver(b *testing.B) {
	for _, tc := range []struct {
		name string
		kind int
		file bool
	}{
		{"stored-4339/file", 4339, true},
		{"stored-4339/memory", 4339, false},
		{"ephemeral-21339", 21339, false},
	} {
		b.Run(tc.name, func(b *testing.B) {
			cfg := Config{}
			if tc.file {
				cfg.DBPath = filepath.Join(b.TempDir(), "bench.db")
			}
			tr := startRelay(b, cfg)
			sub, pub := dial(b, tr.url), dial(b, tr.url)
			k, to := newKey(b), newKey(b)
			sub.req("s", map[string]any{"kinds": []int{tc.kind}, "#p": []string{to.pk}})
			evs := make([]*nostr.Event, b.N)
			for i := range evs {
				evs[i] = k.event(b, tc.kind, tr.clock.Unix(), fmt.Sprint("message ", i), nostr.Tag{"p", to.pk})
			}
			b.ReportAllocs()
			b.ResetTimer()
			for _, ev := range evs {
				pub.mustPublish(ev)
				if m := sub.read(); m.typ != "EVENT" {
					b.Fatalf("got %s", m.typ)
				}
			}
		})
	}
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
		if _, err := tr.store.save(ctx, ev, raw, 0, false, 0); err != nil {
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
				if got := c.req("q", filter); len(got) != tc.want {
					b.Fatalf("got %d events, want %d", len(got), tc.want)
				}
				c.send("CLOSE", "q")
			}
		})
	}
}
