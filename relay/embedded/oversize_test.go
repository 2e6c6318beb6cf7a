package embedded

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/nbd-wtf/go-nostr"
)

// nostrToolsOrder is ev's EVENT message with its members in the order
// nostr-tools sends them: finalizeEvent adds pubkey, id and sig to the
// template {kind, created_at, tags, content}, so the id comes after the
// content.
func nostrToolsOrder(t *testing.T, id, pubkey, sig string, kind int, created int64, content string) []byte {
	t.Helper()
	c, err := json.Marshal(content)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Appendf(nil, `["EVENT",{"kind":%d,"created_at":%d,"tags":[],"content":%s,"pubkey":%q,"id":%q,"sig":%q}]`,
		kind, created, c, pubkey, id, sig)
}

// TestOversizedEventIDAfterContentGetsOK: an EVENT over MaxMessageLength
// whose id comes after its content, as nostr-tools orders an event's
// members, is refused with the OK false its publisher waits for, as one
// whose id comes first is. Before, the relay looked for the id only in
// the part of the message it kept (the limit's worth), found none, and
// answered a NOTICE: nostr-tools's publish waited out its time-out
// without the reason.
func TestOversizedEventIDAfterContentGetsOK(t *testing.T) {
	tr := startRelay(t, Config{MaxMessageLength: 4096})
	c := dial(t, tr.url)
	k := newKey(t)
	ev := k.event(t, 1, tr.clock.Unix(), strings.Repeat("x", 6000))
	c.sendRaw(nostrToolsOrder(t, ev.ID, ev.PubKey, ev.Sig, ev.Kind, int64(ev.CreatedAt), ev.Content))
	m := c.read()
	if m.typ != "OK" || m.str(0) != ev.ID || string(m.args[1]) != "false" || !strings.HasPrefix(m.str(2), "invalid: message too large") {
		t.Fatalf("got %s %s, want OK %s false invalid: message too large…", m.typ, joinRaw(m.args), ev.ID)
	}
	// An id-like member inside the content is text, not the event's id:
	// a message whose own id is missing still gets a NOTICE.
	fake := strings.Repeat("ab", 32)
	content := strings.Repeat("y", 6000) + `","id":"` + fake + `"`
	raw := fmt.Appendf(nil, `["EVENT",{"kind":1,"content":%q,"pubkey":%q}]`, content, ev.PubKey)
	c.sendRaw(raw)
	if m := c.read(); m.typ != "NOTICE" {
		t.Fatalf("an id only inside the content: got %s %s, want NOTICE", m.typ, joinRaw(m.args))
	}
}

// TestOversizedReqGetsClosed: a REQ over MaxMessageLength is refused
// with CLOSED for its subscription id, as NIP-01 has a relay refuse a
// REQ, so that the client's subscription ends with the reason. Before, a
// NOTICE: nostr-tools's subscription stayed open, waiting for an EOSE
// that never came.
func TestOversizedReqGetsClosed(t *testing.T) {
	tr := startRelay(t, Config{MaxMessageLength: 4096})
	c := dial(t, tr.url)
	ids := make([]string, 100) // 6,700 bytes of ids
	for i := range ids {
		ids[i] = fmt.Sprintf("%064x", i)
	}
	c.send("REQ", "big", map[string]any{"ids": ids})
	m := c.read()
	if m.typ != "CLOSED" || m.str(0) != "big" || !strings.HasPrefix(m.str(1), "invalid: message too large") {
		t.Fatalf("got %s %s, want CLOSED big invalid: message too large…", m.typ, joinRaw(m.args))
	}
	// A subscription id the relay could not take is not echoed.
	c.send("REQ", strings.Repeat("s", 65), map[string]any{"ids": ids})
	if m := c.read(); m.typ != "NOTICE" {
		t.Fatalf("too long a subscription id: got %s %s, want NOTICE", m.typ, joinRaw(m.args))
	}
	// A REQ that is not valid JSON, but whose id can be read, too.
	c.sendRaw([]byte(`["REQ","dup",{"kinds":[1],"kinds":[2]}]`))
	if m := c.read(); m.typ != "CLOSED" || m.str(0) != "dup" || !strings.HasPrefix(m.str(1), "invalid:") {
		t.Fatalf("unparsable REQ: got %s %s, want CLOSED dup invalid:…", m.typ, joinRaw(m.args))
	}
}

// TestOversizedReqGetsClosedOverEitherTransport: the in-process
// connection answers an oversized REQ as the WebSocket does, with CLOSED.
func TestOversizedReqGetsClosedOverEitherTransport(t *testing.T) {
	transports(t, Config{MaxMessageLength: 4096}, func(t *testing.T, tr *testRelay, dial func() *connClient) {
		c := dial()
		if err := c.c.Req("big", nostr.Filter{Tags: nostr.TagMap{"x": {strings.Repeat("y", 5000)}}}); err != nil {
			t.Fatal(err)
		}
		if m := c.expect("CLOSED"); m.SubID != "big" || !strings.HasPrefix(m.Reason, "invalid: message too large") {
			t.Fatalf("CLOSED %q %q, want big invalid: message too large…", m.SubID, m.Reason)
		}
	})
}

// TestWholeRefusal: what a message refused as a whole is answered with,
// from its head and the end of what was not kept.
func TestWholeRefusal(t *testing.T) {
	lim := &limits{maxSubIDLength: 8}
	id := strings.Repeat("ab", 32)
	head := []byte(`["EVENT",{"kind":1,"content":"xxxx`)
	for _, c := range []struct {
		name       string
		head, tail string
		want       replyType
		ref        string
	}{
		{"id in the head", `["EVENT",{"id":"` + id + `","content":"xx`, `x"}]`, replyOK, id},
		{"id in the tail", string(head), `xx","pubkey":"p","id":"` + id + `","sig":"s"}]`, replyOK, id},
		{"id in the tail, spaced", string(head), "xx\" ,\n \"id\" : \"" + id + "\" }]", replyOK, id},
		{"the last id member wins", string(head), `xx","id":"` + strings.Repeat("cd", 32) + `","id":"` + id + `"}]`, replyOK, id},
		{"an id inside a string", string(head), `xx\",\"id\":\"` + id + `\""}]`, replyNotice, ""},
		{"an id cut at the tail's start", string(head), `id":"` + id + `"}]`, replyNotice, ""},
		{"an uppercase id", string(head), `xx","id":"` + strings.ToUpper(id) + `"}]`, replyNotice, ""},
		{"a tail of no EVENT", `["NOTE",{"content":"xx`, `x","id":"` + id + `"}]`, replyNotice, ""},
		{"no tail", string(head), "", replyNotice, ""},
		{"a REQ", `["REQ","sub",{"ids":["`, `"]}]`, replyClosed, "sub"},
		{"a REQ with too long an id", `["REQ","123456789",{"ids":["`, `"]}]`, replyNotice, ""},
		{"a REQ with an empty id", `["REQ","",{"ids":["`, `"]}]`, replyNotice, ""},
	} {
		var tail []byte
		if c.tail != "" {
			tail = []byte(c.tail)
		}
		r := wholeRefusal([]byte(c.head), tail, lim, "invalid: message too large")
		if r.reply != c.want || r.ref != c.ref || r.msg != "invalid: message too large" {
			t.Errorf("%s: got %+v, want reply %d ref %q", c.name, r, c.want, c.ref)
		}
	}
}

// TestReadKeptTail: of a message not kept whole, readKept keeps its last
// tailKept bytes, however its reads fall.
func TestReadKeptTail(t *testing.T) {
	for _, n := range []int{4097, 4100, 4096 + tailKept, 4096 + 8*tailKept, 4096 + 8*tailKept + 1, 100_003} {
		in := make([]byte, n)
		for i := range in {
			in[i] = byte('a' + i%26)
		}
		for _, r := range []io.Reader{bytes.NewReader(in), iotest.OneByteReader(bytes.NewReader(in)), iotest.HalfReader(bytes.NewReader(in))} {
			b, tail, size, err := readKept(r, 4095, make([]byte, 0, 4096), nil)
			if err != nil {
				t.Fatal(err)
			}
			wantTail := in[max(4096, n-tailKept):]
			if size != int64(n) || !bytes.Equal(b, in[:4096]) || !bytes.Equal(tail, wantTail) {
				t.Errorf("%d bytes: read %d, kept %d, tail %d bytes; want %d, 4096, the last %d", n, size, len(b), len(tail), n, len(wantTail))
			}
		}
	}
	// A message kept whole has no tail.
	if _, tail, _, _ := readKept(strings.NewReader("short"), 4095, nil, nil); tail != nil {
		t.Errorf("a message kept whole: tail %q", tail)
	}
}
