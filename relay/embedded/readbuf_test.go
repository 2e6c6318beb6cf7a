package embedded

import (
	"bytes"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"
)

// TestParseKeepsNothing: what parseMessage returns for a message (the
// message, or the refusal and its text) stays the same once the buffer
// the message was read into is written over, as the next message read
// into the same lent buffer writes it over (see Relay.reads). Anything
// parseMessage kept of the buffer — a string made without a copy, an
// unquoted value, an echoed label, an id found by eventIDHint — would
// change with it.
func TestParseKeepsNothing(t *testing.T) {
	lim := fuzzLimits()
	k := newKey(t)
	ev := k.event(t, 1, testNow, "hé \"quoted\" \\ \u2028 😀 and plain", nostr.Tag{"p", k.pk}, nostr.Tag{"t", "tag\tvalue", "third"})
	raw, err := encodeEvent(ev)
	if err != nil {
		t.Fatal(err)
	}
	id := ev.ID
	big := `["EVENT",{"id":"` + id + `","content":"` + strings.Repeat("x", lim.maxMessageLength) + `"}]`
	msgs := []string{
		`["EVENT",` + string(raw) + `]`,
		`["EVENT",{"id":"` + id + `","pubkey":"` + id + `","created_at":1.5,"kind":1,"tags":[],"content":"","sig":""}]`,
		`["EVENT",{"id":"` + id + `","pubkey":"` + id + `","created_at":1,"kind":1,"tags":[["p",null]],"content":"","sig":""}]`,
		`["EVENT",{"id":"` + id + `","kind":`, // unparsable, with an id to answer
		big,                                   // too large, with an id to answer
		`["REQ","sub\u00e9",{"kinds":[21339,4339],"#p":["` + id + `"],"#t":["a\"b","c"],"ids":["` + id + `"],"authors":["` + id + `"],"since":1700000000,"until":17e8,"limit":5}]`,
		`["REQ","s",{"#skill":["echo"],"limit":5},{"ids":[],"authors":null}]`,
		`["REQ","s",{"search":"x"}]`,
		`["REQ","s",{"unknown\"member":1}]`,
		`["REQ","s",{"#a":["x"],"#a":["y"]}]`,
		`["REQ","n",{"limit":1.5}]`,
		`["REQ","n",{"since":-1e19}]`,
		`["REQ","` + strings.Repeat("é", 17) + `",{}]`,
		`["CLOSE","sub"]`,
		`["CLOSE","` + strings.Repeat("😀", 17) + `"]`,
		`["COUNT","c",{}]`,
		`["AUTH",{}]`,
		`["UNKNOWN-TYPE-` + strings.Repeat("z", 40) + `"]`,
		`[]`, `{}`, `null`, `[1]`, `["REQ","s",{}] trailing`,
	}
	for i, m := range msgs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			// As the reader has it: the first limit+1 bytes, in a lent
			// buffer, and the message's whole size.
			kept := min(len(m), lim.maxMessageLength+1)
			buf := make([]byte, max(readBufferSize, kept))
			b := buf[:copy(buf, m[:kept])]
			got, gotErr := parseMessage(b, nil, int64(len(m)), lim)
			for _, fill := range []byte{'x', '"', 0xff} {
				for j := range buf {
					buf[j] = fill
				}
				want, wantErr := parseMessage([]byte(m[:kept]), nil, int64(len(m)), lim)
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%.60s: the message changed with its buffer written over with %q:\n got %+v\nwant %+v", m, fill, got, want)
				}
				if !reflect.DeepEqual(gotErr, wantErr) {
					t.Fatalf("%.60s: the refusal changed with its buffer written over with %q:\n got %#v\nwant %#v", m, fill, gotErr, wantErr)
				}
			}
		})
	}
}

// TestRelayReusesReadBuffers: over the socket, the messages a client
// sends one after the other are read into the same lent buffers, and
// nothing the relay keeps or answers of one changes with the next: the
// event stored and the one delivered live are the event published, the
// refusals echo the messages they refuse, answered while the next
// messages were read.
func TestRelayReusesReadBuffers(t *testing.T) {
	tr := startRelay(t, Config{})
	pub, sub := dial(t, tr.url), dial(t, tr.url)
	k := newKey(t)
	sub.req("live", map[string]any{"kinds": []int{1}})
	ev := k.event(t, 1, tr.clock.Unix(), "hé \"quoted\" 😀 "+strings.Repeat("content ", 40), nostr.Tag{"p", k.pk}, nostr.Tag{"t", "value"})
	pub.send("EVENT", ev)
	// Messages of the same length right after it, not waiting for any
	// answer, each written over the last in the reader's buffer.
	const n = 20
	var labels []string
	for i := range n {
		label := fmt.Sprintf("T%03d-%s", i, strings.Repeat(string(rune('a'+i)), 35))
		labels = append(labels, label)
		pub.sendRaw([]byte(`["` + label + `"]`))
	}
	if m := pub.expect("OK"); m.str(0) != ev.ID || string(m.args[1]) != "true" {
		t.Fatalf("OK %s", joinRaw(m.args))
	}
	for _, label := range labels {
		want := fmt.Sprintf("unsupported: unknown message type %q", label[:32])
		if m := pub.expect("NOTICE"); m.str(0) != want {
			t.Fatalf("NOTICE %q, want %q", m.str(0), want)
		}
	}
	same := func(how string, got *nostr.Event) {
		t.Helper()
		if ok, err := got.CheckSignature(); !ok || err != nil || got.GetID() != ev.ID {
			t.Fatalf("%s event fails its id or signature: %v", how, err)
		}
		if got.ID != ev.ID || got.PubKey != ev.PubKey || got.CreatedAt != ev.CreatedAt || got.Kind != ev.Kind ||
			!reflect.DeepEqual(got.Tags, ev.Tags) || got.Content != ev.Content || got.Sig != ev.Sig {
			t.Fatalf("%s event %+v, want %+v", how, got, ev)
		}
	}
	m := sub.expect("EVENT")
	same("live", m.event(1))
	late := dial(t, tr.url)
	late.send("REQ", "stored", map[string]any{"ids": []string{ev.ID}})
	m = late.expect("EVENT")
	same("stored", m.event(1))
	late.expect("EOSE")
	if !bytes.Contains(m.args[1], []byte(`"content"`)) {
		t.Fatalf("stored event %s", m.args[1])
	}
}
