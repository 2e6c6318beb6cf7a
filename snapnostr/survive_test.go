package snapnostr

import (
	"context"
	"testing"

	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
)

// panicking is a Handler whose Serve panics: the bug of a library that
// some hostile input finds.
type panicking struct{ snap.Handler }

func (panicking) Serve(context.Context, snap.Inbound, func(*snap.Message) error) *snap.Message {
	panic("a library's bug")
}

// A request whose handling panics is refused, and the worker (the node)
// lives on to answer the next: before, one such event from any key took
// the whole process down.
func TestInboxSurvivesAPanic(t *testing.T) {
	r := newHandleRig(t, InboxConfig{})
	r.in.cfg.Handler = panicking{r.in.cfg.Handler}
	for _, content := range []string{`{"a request":1}`, `{"and another":2}`} {
		sealed, err := newSealer(r.peer, 1).seal(r.agent.NostrPublicKey(), []byte(content))
		if err != nil {
			t.Fatal(err)
		}
		before := r.published.published.Load()
		r.in.serve(r.run, r.request(relay.KindEphemeral, r.now(), sealed))
		if n := r.published.published.Load() - before; n != 1 {
			t.Fatalf("%d answers published for a request whose handling panicked, want the refusal", n)
		}
	}
}
