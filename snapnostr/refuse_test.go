package snapnostr_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/nbd-wtf/go-nostr"
	"github.com/nbd-wtf/go-nostr/nip44"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/testclock"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
)

// Many keys flood the node with invalid messages while its one worker is
// held and its queue is full: a valid peer asking meanwhile is answered
// (its refusal is not crowded out by the flood's), and each flooding key
// gets at most one refusal a second (the clock stands still here, so one
// in all), however many events it sends.
func TestInboxRefusalsUnderAFlood(t *testing.T) {
	const keys, each = 8, 40
	clock := testclock.New(time.Now())
	n, entered, unhold := heldNet(t, 2, clock)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	held := make(chan error, 1)
	go func() {
		_, err := n.client.Request(ctx, n.target, client.NostrRequest{Method: "test/hold", Payload: []byte(`{}`)})
		held <- err
	}()
	<-entered // the one worker is held

	flooders := make([]*identity.Key, keys)
	for i := range flooders {
		k, err := identity.Generate()
		if err != nil {
			t.Fatal(err)
		}
		flooders[i] = k
	}
	var flood sync.WaitGroup
	for _, k := range flooders {
		flood.Go(func() {
			for i := range each {
				ev := nostr.Event{CreatedAt: nostr.Timestamp(clock.Now().Unix()), Kind: relay.KindMessage,
					Tags: nostr.Tags{{"p", n.agent.NostrPublicKey()}}, Content: fmt.Sprintf("not a NIP-44 payload %d", i)}
				if err := ev.Sign(k.NostrSecretKey()); err != nil {
					t.Error(err)
					return
				}
				if _, err := n.pool.Publish(ctx, ev); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	valid, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	vc := client.NewNostr(client.NostrConfig{Key: valid, Relays: n.pool, Logger: quiet()})
	// The valid peer asks during the flood: refused at once (5003) when the
	// queue is full, or queued behind the held worker and answered once it
	// is free; either way answered, never left to its time-out.
	type answer struct {
		resp *client.NostrResponse
		err  error
	}
	asked := make(chan answer, 1)
	go func() {
		resp, err := vc.Request(ctx, n.target, client.NostrRequest{Method: "tasks/get", Payload: []byte(`{"taskId":"t"}`)})
		asked <- answer{resp, err}
	}()
	flood.Wait()
	unhold()
	a := <-asked
	if a.err != nil {
		t.Fatalf("the valid peer's request under the flood: %v, want an answer", a.err)
	}
	if p := payload(t, a.resp); p["task"] == nil {
		if e, _ := p["error"].(map[string]any); e == nil || (e["code"] != float64(snap.CodeServiceUnavailable) && e["code"] != float64(snap.CodeTaskNotFound)) {
			t.Fatalf("the valid peer's answer: %v, want its task, 1001 or 5003", p)
		}
	}
	if err := <-held; err != nil {
		t.Fatalf("the held request: %v", err)
	}
	// Stopping the inbox sends the refusals still waiting; then the relay
	// holds every answer (stored kind) to count.
	n.stop()
	err = <-n.inboxDone
	n.inboxDone <- err // for the cleanup
	if err != nil {
		t.Fatal(err)
	}
	pubs := make([]string, keys)
	for i, k := range flooders {
		pubs[i] = k.NostrPublicKey()
	}
	answers, err := n.pool.Query(ctx, nostr.Filter{Kinds: []int{relay.KindMessage}, Authors: []string{n.agent.NostrPublicKey()},
		Tags: nostr.TagMap{"p": pubs}, Limit: keys * each})
	if err != nil {
		t.Fatal(err)
	}
	refusals := map[string]int{}
	total := 0
	for _, ev := range answers {
		to := ev.Tags.GetFirst([]string{"p", ""})
		var k *identity.Key
		for _, f := range flooders {
			if to != nil && f.NostrPublicKey() == (*to)[1] {
				k = f
			}
		}
		if k == nil {
			t.Fatalf("answer %s to no flooder", ev.ID)
		}
		ck, err := nip44.GenerateConversationKey(n.agent.NostrPublicKey(), k.NostrSecretKey())
		if err != nil {
			t.Fatal(err)
		}
		plain, err := nip44.Decrypt(ev.Content, ck)
		if err != nil {
			t.Fatal(err)
		}
		var m struct {
			Payload struct {
				Error struct {
					Code snap.Code `json:"code"`
				} `json:"error"`
			} `json:"payload"`
		}
		if err := json.Unmarshal([]byte(plain), &m); err != nil {
			t.Fatalf("answer %s: %v", plain, err)
		}
		if c := m.Payload.Error.Code; c == snap.CodeServiceUnavailable || c == snap.CodeRateLimitExceeded {
			refusals[k.NostrPublicKey()]++
			total++
		}
	}
	if total == 0 {
		t.Fatalf("no flooder was refused (%d answers): the flood did not fill the queue", len(answers))
	}
	t.Logf("%d answers to the flooders, %d refusals", len(answers), total)
	for key, got := range refusals {
		if got > 1 {
			t.Errorf("flooding key %s…: %d refusals within one second, want at most 1", key[:8], got)
		}
	}
}
