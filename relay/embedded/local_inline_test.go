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
