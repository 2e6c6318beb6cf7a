package snapnostr

import (
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/relay"
)

// A reply is dated now, or its request's created_at when that is later
// (the requester's clock ahead of the agent's), but never more than the
// agent's window ahead of its clock, however far ahead the request is
// dated.
func TestReplyTime(t *testing.T) {
	r := newHandleRig(t, InboxConfig{})
	now := r.now()
	for _, c := range []struct{ req, want nostr.Timestamp }{
		{now - 3600, now},
		{now, now},
		{now + 30, now + 30},
		{now + 60, now + 60},
		{now + 61, now + 60},
		{now + 86400*365*100, now + 60},
	} {
		if got := r.in.replyTime(r.request(relay.KindMessage, c.req, "x")); got != c.want {
			t.Errorf("request dated now%+d: reply dated now%+d, want now%+d", c.req-now, got-now, c.want-now)
		}
	}
}
