package node_test

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/internal/slots"
	"github.com/snapnode/snapnode/internal/testdb"
)

// heldStream is a message/stream request over Nostr that runs until its
// task ends or the test does.
type heldStream struct {
	opened chan streamEvent // the first event: the stream holds a slot
	done   chan struct{}
	final  map[string]any
	err    error
	at     time.Time // when the final response came
}

func holdStream(ctx context.Context, r *requester, n *node.Node, payload any) *heldStream {
	h := &heldStream{opened: make(chan streamEvent, 1), done: make(chan struct{})}
	body, _ := json.Marshal(payload)
	go func() {
		defer close(h.done)
		first := true
		resp, err := r.client.RequestStream(ctx, client.Target{Address: n.Address(), PubKey: n.NostrPublicKey()},
			client.NostrRequest{Method: "message/stream", Payload: body},
			func(ev *client.NostrResponse) error {
				var e streamEvent
				if err := json.Unmarshal(ev.Payload, &e); err != nil {
					return err
				}
				if first {
					first = false
					h.opened <- e
				}
				return nil
			})
		h.at = time.Now()
		if h.err = err; err == nil {
			h.err = json.Unmarshal(resp.Payload, &h.final)
		}
	}()
	return h
}

// waitOpened returns the stream's first event, failing if the stream
// ended (or nothing came in 20 s) instead.
func (h *heldStream) waitOpened(t *testing.T, who string) streamEvent {
	t.Helper()
	select {
	case e := <-h.opened:
		return e
	case <-h.done:
		t.Fatalf("%s's stream ended without an event: %v %v", who, h.final, h.err)
	case <-time.After(20 * time.Second):
		t.Fatalf("%s's stream: no event in 20 s", who)
	}
	return streamEvent{}
}

// waitSlots waits until the node's stream slots satisfy ok.
func waitSlots(t *testing.T, n *node.Node, what string, ok func(slots.Stats) bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok(n.Tasks.StreamSlots()) {
		if time.Now().After(deadline) {
			t.Fatalf("%s: stream slots %+v", what, n.Tasks.StreamSlots())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Throwaway identities cannot starve known peers of streams (W7): with
// the newcomers' share held by fresh identities and another waiting, a
// known peer still opens its streams; when the node is full a known
// peer waits too, and the first slot to free goes to it, ahead of the
// newcomer that waited longer; that newcomer gets 5002 with retryAfter
// once its wait is over.
func TestStreamSlotsKnownBeforeNewcomers(t *testing.T) {
	const wait = 6 * time.Second
	a := startAgentNode(t, testdb.SQLite(t), func(c *config.Config) {
		c.MaxStreams, c.MaxNewcomerStreams = 4, 2
		c.StreamWaitTimeout = config.Duration{Duration: wait}
	})
	// The model never answers in time: free-text tasks stay submitted and
	// their streams open.
	a.llm.SetHandler(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Content: finish("late").Content, Delay: time.Minute}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bob := newRequester(t, a.RelayURLs())
	for i, known := range []*requester{a.alice, bob} {
		p := known.call(t, a.Node, "message/send", proposal("WRITE_FILE", map[string]any{"path": "/sandbox/known" + string(rune('a'+i)) + ".txt", "content": "x\n"}), false)
		if v := taskOf(t, p); v.Status.State != "completed" {
			t.Fatalf("known peer's first task: %v", p)
		}
	}

	n1, n2, n3 := newRequester(t, a.RelayURLs()), newRequester(t, a.RelayURLs()), newRequester(t, a.RelayURLs())
	s1, s2 := holdStream(ctx, n1, a.Node, text("fresh1")), holdStream(ctx, n2, a.Node, text("fresh2"))
	first := s1.waitOpened(t, "newcomer 1")
	s2.waitOpened(t, "newcomer 2")
	s3 := holdStream(ctx, n3, a.Node, text("fresh3"))
	waitSlots(t, a.Node, "the third newcomer waits", func(s slots.Stats) bool { return s.WaitingNewcomers == 1 })

	// The newcomers' share is full; a known peer opens its streams.
	a1, a2 := holdStream(ctx, a.alice, a.Node, text("known1")), holdStream(ctx, a.alice, a.Node, text("known2"))
	a1.waitOpened(t, "known peer")
	a2.waitOpened(t, "known peer")
	// The node is full: the known peer bob waits, ahead of the newcomer.
	b := holdStream(ctx, bob, a.Node, text("known3"))
	waitSlots(t, a.Node, "the known peer waits", func(s slots.Stats) bool { return s.WaitingKnown == 1 })
	if p := n1.call(t, a.Node, "tasks/cancel", map[string]any{"taskId": first.TaskID}, false); taskOf(t, p).Status.State != "canceled" {
		t.Fatalf("cancel: %v", p)
	}
	b.waitOpened(t, "the waiting known peer")
	select {
	case <-s3.done:
		t.Fatalf("the newcomer got an answer before its wait was over: %v %v", s3.final, s3.err)
	default:
	}
	<-s3.done
	if s3.err != nil || !rateLimited(s3.final, "node") {
		t.Fatalf("the newcomer past its wait: %v %v; want 5002 with retryAfter, scope node", s3.final, s3.err)
	}
	if st := a.Tasks.StreamSlots(); st.Open != 4 || st.WaitingKnown+st.WaitingNewcomers != 0 {
		t.Fatalf("stream slots %+v: want 4 open, none waiting", st)
	}
}

// Over Nostr, the stream slots decide, not the inbox's own bound: more
// fresh Nostr keys than the inbox used to carry (64) hold streams within
// the newcomers' share, a known peer still opens its stream, and the
// newcomer past the share gets the slots' 5002 rather than the inbox's
// 5003.
func TestNostrStreamFloodMeetsTheSlots(t *testing.T) {
	const newcomers = 66
	a := startAgentNode(t, testdb.SQLite(t), func(c *config.Config) {
		c.MaxStreams, c.MaxNewcomerStreams = newcomers+4, newcomers
		c.StreamWaitTimeout = config.Duration{}
		c.IdentityBurst, c.NostrKeyBurst = 1000, 1000
	})
	a.llm.SetHandler(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Content: finish("late").Content, Delay: time.Minute}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if p := a.alice.call(t, a.Node, "message/send", proposal("WRITE_FILE", map[string]any{"path": "/sandbox/known.txt", "content": "x\n"}), false); taskOf(t, p).Status.State != "completed" {
		t.Fatalf("the known peer's first task: %v", p)
	}
	held := make([]*heldStream, newcomers)
	for i := range held {
		held[i] = holdStream(ctx, newRequester(t, a.RelayURLs()), a.Node, text("fresh"))
	}
	for i, h := range held {
		h.waitOpened(t, "newcomer "+strconv.Itoa(i))
	}
	known := holdStream(ctx, a.alice, a.Node, text("known"))
	known.waitOpened(t, "the known peer")
	extra := holdStream(ctx, newRequester(t, a.RelayURLs()), a.Node, text("extra"))
	<-extra.done
	if extra.err != nil || !rateLimited(extra.final, "newcomers") {
		t.Fatalf("the newcomer past the share: %v %v; want 5002 with scope newcomers", extra.final, extra.err)
	}
	if st := a.Tasks.StreamSlots(); st.Open != newcomers+1 {
		t.Fatalf("stream slots %+v: want %d open", st, newcomers+1)
	}
}
