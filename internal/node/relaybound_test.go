package node_test

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/config"
)

// The node's embedded relay keeps what relay_store_max_events allows:
// whoever publishes to it pushes the oldest events out, never the node's
// own agent card.
func TestEmbeddedRelayBoundKeepsTheCard(t *testing.T) {
	n := startNodeWith(t, func(c *config.Config) { c.RelayStoreMaxEvents = 3 })
	ws, _, err := websocket.DefaultDialer.Dial(n.RelayURLs()[0], nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	req := func(filter nostr.Filter) []string {
		t.Helper()
		if err := ws.WriteJSON([]any{"REQ", "q", filter}); err != nil {
			t.Fatal(err)
		}
		var ids []string
		for {
			var msg []json.RawMessage
			if err := ws.ReadJSON(&msg); err != nil {
				t.Fatal(err)
			}
			var typ string
			json.Unmarshal(msg[0], &typ)
			switch typ {
			case "EVENT":
				var ev nostr.Event
				json.Unmarshal(msg[2], &ev)
				ids = append(ids, ev.ID)
			case "EOSE":
				return ids
			}
		}
	}
	card := nostr.Filter{Kinds: []int{31337}, Authors: []string{n.NostrPublicKey()}}
	for deadline := time.Now().Add(10 * time.Second); len(req(card)) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the node's card was never published")
		}
	}
	sk := nostr.GeneratePrivateKey()
	var notes []string
	for i := range 5 {
		ev := nostr.Event{Kind: 1, CreatedAt: nostr.Now(), Content: "note " + string(rune('a'+i))}
		if err := ev.Sign(sk); err != nil {
			t.Fatal(err)
		}
		if err := ws.WriteJSON([]any{"EVENT", ev}); err != nil {
			t.Fatal(err)
		}
		var ok []any
		if err := ws.ReadJSON(&ok); err != nil || len(ok) < 3 || ok[0] != "OK" || ok[2] != true {
			t.Fatalf("publish: %v %v", ok, err)
		}
		notes = append(notes, ev.ID)
	}
	if got := req(card); len(got) != 1 {
		t.Fatalf("the node's card: %v, want it kept", got)
	}
	got := req(nostr.Filter{Kinds: []int{1}})
	slices.Sort(got)
	want := slices.Clone(notes[3:]) // the card and the two newest notes make three
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("notes %v, want the two newest %v", got, want)
	}
}
