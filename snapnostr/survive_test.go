package snapnostr

import (
	"context"
	"testing"

	"github.com/nbd-wtf/go-nostr"

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

// panickingCheckpoint is a Checkpoint whose Done panics: a bug of the
// store met after the request was answered.
type panickingCheckpoint struct{ Checkpoint }

func (panickingCheckpoint) Done(context.Context, string, nostr.Timestamp) error {
	panic("a store's bug")
}

// answering is a Handler whose Serve answers every request (with an
// error response; what the answer says does not matter here).
type answering struct{ snap.Handler }

func (h answering) Serve(context.Context, snap.Inbound, func(*snap.Message) error) *snap.Message {
	return h.Refuse(&snap.Error{Code: snap.CodeInvalidMessage, Message: "an answer"})
}

// A panic while a stored request is recorded as processed, after its
// answer was published, does not answer it a second time: before, survive
// refused the answered request with 5001 as well.
func TestInboxAnswersOnceWhenRecordingPanics(t *testing.T) {
	r := newHandleRig(t, InboxConfig{Checkpoint: panickingCheckpoint{}})
	r.in.cfg.Handler = answering{r.in.cfg.Handler}
	for _, content := range []string{`{"a request":1}`, `{"and another":2}`} {
		sealed, err := newSealer(r.peer, 1).seal(r.agent.NostrPublicKey(), []byte(content))
		if err != nil {
			t.Fatal(err)
		}
		before := r.published.published.Load()
		r.in.serve(r.run, r.request(relay.KindMessage, r.now(), sealed))
		if n := r.published.published.Load() - before; n != 1 {
			t.Fatalf("%d answers published for one request, want 1", n)
		}
	}
}
