package embedded

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/nettest"
)

// TestConcurrentReadBuffers: several clients publish at once over bare
// sockets, each EVENT sized about the lent buffer (4094 to 4098 bytes:
// within it, filling it, past it) and sent in three fragments with a ping
// between them, each followed by an unknown message of 4 KiB and a
// binary one (refused with NOTICEs). Every OK names its event, and every
// event delivered live and stored is the one published: nothing the
// relay keeps of one message changes with another read into the same
// lent buffer, on this connection or another (the race detector sees a
// buffer shared between connections: tried by hand, with one buffer
// lent to all).
func TestConcurrentReadBuffers(t *testing.T) {
	tr := startRelay(t, Config{})
	sub := dial(t, tr.url)
	sub.req("all", map[string]any{"kinds": []int{1}})
	const pubs, each = 6, 10
	want := make(map[string]*nostr.Event)
	var wg sync.WaitGroup
	var starts []func()
	errs := make(chan error, pubs)
	for p := range pubs {
		k := newKey(t)
		var evs []*nostr.Event
		var msgs [][]byte
		for i := range each {
			target := 4094 + i%5
			probe := k.event(t, 1, tr.clock.Unix(), "", nostr.Tag{"t", fmt.Sprint(p)})
			raw, _ := encodeEvent(probe)
			base := len(`["EVENT",]`) + len(raw)
			content := strings.Repeat(string(rune('a'+p)), target-base-2) + fmt.Sprintf("%02d", i)
			ev := k.event(t, 1, tr.clock.Unix(), content, nostr.Tag{"t", fmt.Sprint(p)})
			raw, _ = encodeEvent(ev)
			m := []byte(`["EVENT",` + string(raw) + `]`)
			if len(m) != target {
				t.Fatalf("message of %d bytes, want %d", len(m), target)
			}
			evs = append(evs, ev)
			msgs = append(msgs, m)
			want[ev.ID] = ev
		}
		c := nettest.DialIdle(t, strings.TrimPrefix(tr.url, "ws://"), "/", 1)[0]
		starts = append(starts, func() {
			mask := [4]byte{byte(p + 1), 0x5a, 0xa5, 0x33}
			for i, m := range msgs {
				cut1, cut2 := 1+i*97%len(m), 0
				cut2 = cut1 + (len(m)-cut1)/2
				var out bytes.Buffer
				out.Write(nettest.ClientFrame(false, 0x1, mask, m[:cut1]))
				out.Write(nettest.ClientFrame(true, 0x9, mask, []byte("ping")))
				out.Write(nettest.ClientFrame(false, 0x0, mask, m[cut1:cut2]))
				out.Write(nettest.ClientFrame(true, 0x0, mask, m[cut2:]))
				out.Write(nettest.ClientFrame(true, 0x1, mask, []byte(`["ZZZ`+strings.Repeat("q", 4090)+`"]`)))
				out.Write(nettest.ClientFrame(true, 0x2, mask, bytes.Repeat([]byte{0xff}, 4096)))
				if _, err := c.Write(out.Bytes()); err != nil {
					errs <- err
					return
				}
			}
			oks := 0
			for oks < len(msgs) {
				op, b, err := nettest.ReadFrame(c)
				if err != nil {
					errs <- err
					return
				}
				if op != 0x1 {
					continue
				}
				var arr []json.RawMessage
				if err := json.Unmarshal(b, &arr); err != nil {
					errs <- fmt.Errorf("%s: %w", b, err)
					return
				}
				switch string(arr[0]) {
				case `"OK"`:
					if string(arr[2]) != "true" {
						errs <- fmt.Errorf("refused: %s", b)
						return
					}
					var id string
					_ = json.Unmarshal(arr[1], &id)
					_, ok := want[id] // read only, once every publisher is built
					if !ok || id != evs[oks].ID {
						errs <- fmt.Errorf("OK for %s, want %s", id, evs[oks].ID)
						return
					}
					oks++
				case `"NOTICE"`:
					if !strings.Contains(string(b), `unknown message type \"ZZZqq`) && !strings.Contains(string(b), "only text messages") {
						errs <- fmt.Errorf("notice %s", b)
						return
					}
				default:
					errs <- fmt.Errorf("unexpected %s", b)
					return
				}
			}
		})
	}
	for _, f := range starts {
		wg.Go(f)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	check := func(how string, got *nostr.Event) {
		t.Helper()
		ev := want[got.ID]
		if ev == nil {
			t.Fatalf("%s: unknown event %s", how, got.ID)
		}
		if ok, err := got.CheckSignature(); !ok || err != nil || got.Content != ev.Content {
			t.Fatalf("%s event %s changed: %v", how, got.ID, err)
		}
	}
	for range pubs * each {
		m := sub.expect("EVENT")
		check("live", m.event(1))
	}
	late := dial(t, tr.url)
	late.send("REQ", "stored", map[string]any{"kinds": []int{1}, "limit": 500})
	n := 0
	for {
		m := late.read()
		if m.typ == "EOSE" {
			break
		}
		check("stored", m.event(1))
		n++
	}
	if n != pubs*each {
		t.Fatalf("%d stored, want %d", n, pubs*each)
	}
}
