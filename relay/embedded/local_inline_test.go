package embedded

import (
	"context"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/snapnode/snapnode/relay"
)

// The node's own events are handled in the publishing goroutine when
// nothing is queued before them: no hand-off to the connection's reader
// and back for each reply.
func TestLocalPublishHandledByPublisher(t *testing.T) {
	var byPublisher, calls atomic.Int32
	tr := startRelay(t, Config{AcceptEvent: func(*nostr.Event) error {
		buf := make([]byte, 16<<10)
		stack := string(buf[:runtime.Stack(buf, false)])
		if strings.Contains(stack, "(*localConn).Publish") {
			byPublisher.Add(1)
		}
		calls.Add(1)
		return nil
	}})
	c, err := tr.LocalConn()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := newKey(t)
	for i := range 3 {
		ev := k.event(t, 1, tr.clock.Unix(), "own "+string(rune('a'+i)))
		if ok, why, err := c.Publish(context.Background(), *ev); err != nil || !ok {
			t.Fatalf("publish: %v %q %v", ok, why, err)
		}
	}
	if calls.Load() != 3 || byPublisher.Load() != 3 {
		t.Fatalf("%d of %d events handled by the publisher's goroutine, want all 3", byPublisher.Load(), calls.Load())
	}
}

// A subscription queued before a publish from the same goroutine is in
// place when the event is handled: the publish waits its turn.
func TestLocalPublishAfterReqKeepsOrder(t *testing.T) {
	tr := startRelay(t, Config{})
	c, err := tr.LocalConn()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	k := newKey(t)
	for i := range 50 {
		sub := "s" + string(rune('A'+i%26)) + string(rune('a'+i/26))
		// Ephemeral: never stored, so only a subscription already in place
		// gets it.
		ev := k.event(t, 20001, tr.clock.Unix(), "after "+sub)
		if err := c.Req(sub, nostr.Filter{Kinds: []int{20001}, Authors: []string{k.pk}}); err != nil {
			t.Fatal(err)
		}
		if ok, why, err := c.Publish(context.Background(), *ev); err != nil || !ok {
			t.Fatalf("publish: %v %q %v", ok, why, err)
		}
		var got bool
		for !got {
			var m relay.ConnMessage
			select {
			case m = <-c.Messages():
			case <-time.After(5 * time.Second):
				t.Fatalf("subscription %s never got the event published after it", sub)
			}
			if m.Label == labelEvent && m.SubID == sub {
				if m.Event.ID != ev.ID {
					t.Fatalf("subscription %s got %s, want %s", sub, m.Event.ID, ev.ID)
				}
				got = true
			}
		}
		if err := c.CloseReq(sub); err != nil {
			t.Fatal(err)
		}
	}
}

// Once the pool asks for them (Deliver), the in-process connection hands
// its messages to the pool's function instead of the Messages channel,
// and marks Verified the live events the relay checked, not the stored
// ones read back from the database. A live event is handed over by the
// goroutine that handles its publication (here a WebSocket client's
// reader), not by the connection's writer.
func TestLocalDeliverMarksLiveEventsVerified(t *testing.T) {
	tr := startRelay(t, Config{})
	c, err := tr.LocalConn()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ic, ok := c.(relay.InProcessConn)
	if !ok {
		t.Fatal("LocalConn is not a relay.InProcessConn")
	}
	got := make(chan relay.ConnMessage, 16)
	stacks := make(chan string, 16)
	ic.Deliver(func(m relay.ConnMessage) {
		buf := make([]byte, 16<<10)
		stacks <- string(buf[:runtime.Stack(buf, false)])
		got <- m
	})
	ws, err := relay.DialWebsocket(context.Background(), tr.url)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	pub := &connClient{t: t, c: ws}
	k, target := newKey(t), newKey(t)
	now := tr.clock.Unix()
	stored := k.event(t, 4339, now-1, "stored", nostr.Tag{"p", target.pk})
	pub.mustPublish(stored)
	if err := c.Req("s", nostr.Filter{Kinds: []int{4339, 21339}, Tags: nostr.TagMap{"p": {target.pk}}}); err != nil {
		t.Fatal(err)
	}
	next := func() relay.ConnMessage {
		t.Helper()
		select {
		case m := <-got:
			return m
		case <-time.After(5 * time.Second):
			t.Fatal("no message handed over")
			return relay.ConnMessage{}
		}
	}
	if m := next(); m.Label != "EVENT" || m.Event.ID != stored.ID || m.Verified {
		t.Fatalf("stored event: %+v", m)
	}
	if m := next(); m.Label != "EOSE" {
		t.Fatalf("want EOSE, got %+v", m)
	}
	live := k.event(t, 21339, now, "live", nostr.Tag{"p", target.pk})
	pub.mustPublish(live)
	if m := next(); m.Label != "EVENT" || m.Event.ID != live.ID || !m.Verified {
		t.Fatalf("live event: %+v", m)
	}
	<-stacks // the stored event's
	<-stacks // the EOSE's
	if s := <-stacks; !strings.Contains(s, "(*wsTransport).handle") || strings.Contains(s, "writeLoop") {
		t.Fatalf("the live event was not handed over by its publisher's goroutine:\n%s", s)
	}
	select {
	case m := <-c.Messages():
		t.Fatalf("a message went to Messages after Deliver: %+v", m)
	default:
	}
}
