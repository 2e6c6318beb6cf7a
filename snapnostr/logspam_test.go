package snapnostr

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/logcap"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/relay"
)

// refusingRelays is a Transport whose relays refuse every publication: a
// paid relay, one that blocks the kind.
type refusingRelays struct{ publishCounter }

func (*refusingRelays) Publish(context.Context, nostr.Event) (relay.PublishResult, error) {
	return relay.PublishResult{}, errors.New("blocked: pay first")
}

// A peer decides how many requests the inbox answers: when the handling
// of each panics (a library's bug some input finds), or the relays refuse
// every reply, each request was logged at error — the panic with its
// stack — one line each. Each line is logged logcap.PerMinute a minute,
// the next counting those that were not.
func TestInboxFailuresLoggedBounded(t *testing.T) {
	const n = 50
	r := newHandleRig(t, InboxConfig{})
	logs := &testutil.Records{}
	r.in.cfg.Logger = slog.New(logs)
	r.in.cfg.Handler = panicking{r.in.cfg.Handler}
	r.in.cfg.Transport = &refusingRelays{}
	ask := func(i int) {
		sealed, err := newSealer(r.peer, 1).seal(r.agent.NostrPublicKey(), fmt.Appendf(nil, `{"request":%d}`, i))
		if err != nil {
			t.Fatal(err)
		}
		r.in.serve(r.run, r.request(relay.KindEphemeral, r.now(), sealed))
	}
	for i := range n {
		ask(i)
	}
	lines := []string{"inbox: handling a request panicked; refused with 5001", "inbox: reply not published"}
	for _, msg := range lines {
		if got := logs.Logged(msg); len(got) != logcap.PerMinute {
			t.Errorf("%q: %d lines for %d requests, want %d", msg, len(got), n, logcap.PerMinute)
		}
	}
	r.clock.Advance(time.Minute)
	ask(n)
	for _, msg := range lines {
		got := logs.Logged(msg)
		notLogged := testutil.AttrInt64(got[len(got)-1], logcap.NotLoggedKey)
		if notLogged != n-logcap.PerMinute {
			t.Errorf("%q: the next minute's line says %d not logged before it, want %d", msg, notLogged, n-logcap.PerMinute)
		}
	}
}
