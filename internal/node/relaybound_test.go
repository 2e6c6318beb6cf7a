package node_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/nettest"
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
	req := func(filter nostr.Filter) []string { t.Helper(); return storedIDs(t, ws, filter) }
	card := nostr.Filter{Kinds: []int{31337}, Authors: []string{n.NostrPublicKey()}}
	for deadline := time.Now().Add(10 * time.Second); len(req(card)) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the node's card was never published")
		}
	}
	sk := nostr.GeneratePrivateKey()
	var notes []string
	for i := range 5 {
		id, ok, why := publishNote(t, ws, sk, "note "+string(rune('a'+i)))
		if !ok {
			t.Fatalf("publish: refused: %q", why)
		}
		notes = append(notes, id)
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

// storedIDs asks the relay over ws for the stored events filter matches
// and returns their ids, read up to EOSE (the subscription, "q", stays
// open: a later call replaces it).
func storedIDs(t *testing.T, ws *websocket.Conn, filter nostr.Filter) []string {
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

// The node's embedded relay keeps at most relay_store_peer_share of its
// bound for the events of one client address: past it, that address's
// own oldest go, not what others stored.
func TestEmbeddedRelayPeerShare(t *testing.T) {
	ip := nettest.MachineIPv4(t)
	n := startNodeWith(t, func(c *config.Config) {
		c.RelayListen = "0.0.0.0:0"
		c.RelayStoreMaxEvents, c.RelayStorePeerShare = 10, 0.2
	})
	u, err := url.Parse(n.RelayURLs()[0])
	if err != nil {
		t.Fatal(err)
	}
	dial := func(host string) *websocket.Conn {
		t.Helper()
		ws, _, err := websocket.DefaultDialer.Dial("ws://"+net.JoinHostPort(host, u.Port()), nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ws.Close() })
		return ws
	}
	remote, local := dial(ip), dial("127.0.0.1")
	flooder, other := nostr.GeneratePrivateKey(), nostr.GeneratePrivateKey()
	var flood, kept []string
	for i := range 3 {
		id, ok, why := publishNote(t, local, other, fmt.Sprint("local ", i))
		if !ok {
			t.Fatalf("local note %d refused: %q", i, why)
		}
		kept = append(kept, id)
	}
	for i := range 6 {
		id, ok, why := publishNote(t, remote, flooder, fmt.Sprint("flood ", i))
		if !ok {
			t.Fatalf("note %d from %s refused: %q", i, ip, why)
		}
		flood = append(flood, id)
	}
	got := storedIDs(t, local, nostr.Filter{Kinds: []int{1}})
	slices.Sort(got)
	want := append(slices.Clone(kept), flood[4:]...) // 0.2 of 10: the address keeps its 2 newest
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("notes %v, want the loopback client's %v and the address's two newest %v", got, kept, flood[4:])
	}
}

// The node's embedded relay takes relay_event_rate events a second from
// a client address; the node's own publishing is not limited: it
// republishes its card at each reload however many events it published.
func TestEmbeddedRelayEventRate(t *testing.T) {
	ip := nettest.MachineIPv4(t)
	var cfg config.Config
	n := startNodeWith(t, func(c *config.Config) {
		c.RelayListen = "0.0.0.0:0"
		c.RelayEventRate, c.RelayEventBurst = 0.001, 2
		cfg = *c
	})
	u, err := url.Parse(n.RelayURLs()[0])
	if err != nil {
		t.Fatal(err)
	}
	// The relay listens on every address; this client comes from the
	// machine's own, not loopback.
	ws, _, err := websocket.DefaultDialer.Dial("ws://"+net.JoinHostPort(ip, u.Port()), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer ws.Close()
	sk := nostr.GeneratePrivateKey()
	for i, want := range []bool{true, true, false} {
		_, ok, why := publishNote(t, ws, sk, fmt.Sprint("note ", i))
		if ok != want || !ok && !strings.HasPrefix(why, "rate-limited:") {
			t.Fatalf("event %d from %s: accepted %v %q, want accepted %v (or rate-limited)", i, ip, ok, why, want)
		}
	}
	// Three reloads, three cards published: more than the burst.
	for i := range 3 {
		cfg.Card.Description = fmt.Sprint("card ", i)
		if _, err := n.Reload(context.Background(), cfg); err != nil {
			t.Fatal(err)
		}
		select { // published in the background
		case <-n.CardOut():
		case <-time.After(15 * time.Second):
			t.Fatalf("card %d not published in 15 s", i)
		}
		sub := fmt.Sprint("card", i)
		if err := ws.WriteJSON([]any{"REQ", sub, nostr.Filter{Kinds: []int{31337}, Authors: []string{n.NostrPublicKey()}}}); err != nil {
			t.Fatal(err)
		}
		var msg []json.RawMessage
		var card nostr.Event
		if err := ws.ReadJSON(&msg); err != nil || len(msg) < 3 || json.Unmarshal(msg[2], &card) != nil {
			t.Fatalf("the node's card: %s %v", msg, err)
		}
		if !strings.Contains(card.Content, cfg.Card.Description) {
			t.Fatalf("after reload %d the relay has the card %s, want its description %q", i, card.Content, cfg.Card.Description)
		}
		for string(msg[0]) != `"EOSE"` {
			if err := ws.ReadJSON(&msg); err != nil {
				t.Fatal(err)
			}
		}
		if err := ws.WriteJSON([]any{"CLOSE", sub}); err != nil {
			t.Fatal(err)
		}
	}
	// The rate changes at a reload: lifted, the peer publishes again.
	cfg.RelayEventRate = 0
	restart, err := n.Reload(context.Background(), cfg)
	if err != nil || len(restart) > 0 {
		t.Fatalf("reload lifting the rate: %v, restart %q; want it applied", err, restart)
	}
	for i := range 3 {
		if _, ok, why := publishNote(t, ws, sk, fmt.Sprint("after the reload ", i)); !ok {
			t.Fatalf("event %d once the rate is lifted: refused %q", i, why)
		}
	}
}

// publishNote publishes a kind-1 note of sk over ws and returns its id
// and the relay's OK: accepted, and the message.
func publishNote(t *testing.T, ws *websocket.Conn, sk, content string) (id string, accepted bool, message string) {
	t.Helper()
	ev := nostr.Event{Kind: 1, CreatedAt: nostr.Now(), Content: content}
	if err := ev.Sign(sk); err != nil {
		t.Fatal(err)
	}
	if err := ws.WriteJSON([]any{"EVENT", ev}); err != nil {
		t.Fatal(err)
	}
	var ok []any
	if err := ws.ReadJSON(&ok); err != nil || len(ok) < 4 || ok[0] != "OK" || ok[1] != ev.ID {
		t.Fatalf("publish: %v %v, want OK for %s", ok, err, ev.ID)
	}
	accepted, _ = ok[2].(bool)
	message, _ = ok[3].(string)
	return ev.ID, accepted, message
}
