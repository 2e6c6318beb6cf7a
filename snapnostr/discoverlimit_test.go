package snapnostr_test

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
	"github.com/snapnode/snapnode/snapnostr"
)

// floodingRelay is a WebSocket relay that answers every REQ with evs,
// whatever the REQ's limit and until, then EOSE.
func floodingRelay(t *testing.T, evs []nostr.Event) string {
	t.Helper()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns []*websocket.Conn
	)
	upgrader := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := upgrader.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		mu.Lock()
		conns = append(conns, ws)
		wg.Add(1)
		mu.Unlock()
		defer wg.Done()
		defer ws.Close()
		for {
			_, msg, err := ws.ReadMessage()
			if err != nil {
				return
			}
			req, ok := nostr.ParseMessage(msg).(*nostr.ReqEnvelope)
			if !ok {
				continue
			}
			for _, ev := range evs {
				b, _ := nostr.EventEnvelope{SubscriptionID: &req.SubscriptionID, Event: ev}.MarshalJSON()
				if ws.WriteMessage(websocket.TextMessage, b) != nil {
					return
				}
			}
			b, _ := nostr.EOSEEnvelope(req.SubscriptionID).MarshalJSON()
			if ws.WriteMessage(websocket.TextMessage, b) != nil {
				return
			}
		}
	}))
	t.Cleanup(func() {
		mu.Lock()
		for _, ws := range conns {
			ws.Close()
		}
		mu.Unlock()
		srv.Close()
		wg.Wait()
	})
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

// A relay that ignores the limit of discovery's queries, answering each
// with more impostor cards than one query may hold, does not hide the
// agent's card that another relay holds. Before, each of discovery's
// queries failed with relay.ErrQueryTruncated, down to a limit of one,
// and discovery failed with it.
func TestDiscoverPastARelayIgnoringTheLimit(t *testing.T) {
	agent, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	card := cardOf(t, agent)
	at := time.Now().Add(-time.Hour).Truncate(time.Second)
	own, err := snapnostr.CardEvent(card, agent, at)
	if err != nil {
		t.Fatal(err)
	}
	const maxQuery = 100
	bad := floodingRelay(t, impostors(t, own, maxQuery+1, at.Add(time.Second)))
	good := startRelayWith(t, embedded.Config{})
	publishAll(t, good, []nostr.Event{own})

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := relay.NewPool(relay.PoolConfig{URLs: []string{bad, good}, QueryMaxEvents: maxQuery, Logger: slog.New(slog.DiscardHandler)})
	pool.Start(ctx)
	defer pool.Close()
	found, rejected, err := snapnostr.DiscoverByIdentity(ctx, pool, card.Identity, snapnostr.DiscoverConfig{})
	if err != nil {
		t.Fatalf("discover: %v (%d rejected)", err, rejected.Count)
	}
	if found.EventID != own.ID {
		t.Fatalf("found %s, want the agent's own card %s", found.EventID, own.ID)
	}
}
