package embedded

import (
	"fmt"
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
