package embedded

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

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
