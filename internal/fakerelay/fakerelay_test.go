package fakerelay_test

import (
	"context"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/fakerelay"
)

// A served script answers a REQ with its events and EOSE, and an EVENT
// with OK; a gated relay upgrades only once open is closed.
func TestServeAndGated(t *testing.T) {
	ev := nostr.Event{ID: "01", Kind: 1, Content: "x"}
	url := fakerelay.Serve(t, func(frame []byte, write func([]byte) error) {
		fakerelay.AcceptEvents(frame, write)
		fakerelay.AnswerREQ(func(*nostr.ReqEnvelope) []nostr.Event { return []nostr.Event{ev} })(frame, write)
	})
	ws := dial(t, url)
	req, _ := nostr.ReqEnvelope{SubscriptionID: "s", Filters: nostr.Filters{{}}}.MarshalJSON()
	event, _ := nostr.EventEnvelope{Event: ev}.MarshalJSON()
	for _, frame := range [][]byte{req, event} {
		if err := ws.WriteMessage(websocket.TextMessage, frame); err != nil {
			t.Fatal(err)
		}
	}
	for _, want := range []string{"EVENT", "EOSE", "OK"} {
		_, msg, err := ws.ReadMessage()
		if err != nil {
			t.Fatalf("want %s: %v", want, err)
		}
		if got := nostr.ParseMessage(msg).Label(); got != want {
			t.Fatalf("got %s (%s), want %s", got, msg, want)
		}
	}

	open := make(chan struct{})
	gated := fakerelay.Gated(t, open, fakerelay.AcceptEvents)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if c, _, err := websocket.DefaultDialer.DialContext(ctx, gated, nil); err == nil {
		c.Close()
		t.Fatal("a gated relay upgraded before it was opened")
	}
	close(open)
	dial(t, gated)
}

func dial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, _, err := websocket.DefaultDialer.DialContext(ctx, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.Close() })
	return ws
}
