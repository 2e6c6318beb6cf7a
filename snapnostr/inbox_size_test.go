package snapnostr_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/internal/testclock"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// A request event larger than any SNAP request over Nostr can be (its
// NIP-44 content and a few tags) is refused at once, unopened and not
// queued: a peer flooding the inbox with such events while its workers
// are busy costs the node at most its Queue of requests of
// snapnostr.MaxRequestEventSize, not of a relay's largest frame (1 MiB,
// about 18 MiB held of an event of many tags). Before, it waited in the
// queue, with 255 others, for a worker to open it.
func TestInboxRefusesOversizedRequestAtOnce(t *testing.T) {
	clock := testclock.New(time.Now())
	n, entered, unhold := heldNet(t, 4, clock)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	go func() {
		_, _ = n.client.Request(ctx, n.target, client.NostrRequest{Method: "test/hold", Payload: []byte(`{}`)})
	}()
	<-entered // the one worker is busy

	ev := nostr.Event{CreatedAt: nostr.Timestamp(time.Now().Unix()), Kind: relay.KindEphemeral,
		Tags:    nostr.Tags{{"p", n.agent.NostrPublicKey()}, {"x", strings.Repeat("x", 300<<10)}},
		Content: "not opened"}
	if err := relay.SignEvent(n.requester, &ev); err != nil {
		t.Fatal(err)
	}
	since := ev.CreatedAt - 60
	sub, err := n.pool.Subscribe(ctx, nostr.Filter{Kinds: []int{relay.KindEphemeral}, Since: &since,
		Tags: nostr.TagMap{"p": {n.requester.NostrPublicKey()}, "e": {ev.ID}}})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if _, err := n.pool.Publish(ctx, ev); err != nil {
		t.Fatal(err)
	}
	var reply *nostr.Event
	select {
	case reply = <-sub.Events():
	case <-ctx.Done():
		t.Fatal("no answer to an oversized request while the worker is busy: it was queued")
	}
	unhold()
	plain, err := snapnostr.NewSealer(n.requester, 4).Open(reply.PubKey, reply.Content)
	if err != nil {
		t.Fatal(err)
	}
	var m struct {
		Payload struct {
			Error struct {
				Code snap.Code      `json:"code"`
				Data map[string]any `json:"data"`
			} `json:"error"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(plain, &m); err != nil {
		t.Fatal(err)
	}
	if e := m.Payload.Error; e.Code != snap.CodeInvalidMessage || e.Data["limit"] != float64(snapnostr.MaxRequestEventSize) {
		t.Fatalf("answer %s, want %d with the limit", plain, snap.CodeInvalidMessage)
	}
}
