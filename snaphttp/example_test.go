package snaphttp_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// A snap.Server behind snaphttp: a peer posts a signed message/send to
// /snap and gets the signed response with HTTP 200. The same message
// posted again (a retry) is not run twice: it gets the kept result, marked
// deduplicated.
func Example() {
	agent, _ := identity.FromHex(strings.Repeat("0b", 32))
	peer, _ := identity.FromHex(strings.Repeat("0a", 32))

	router := snap.NewRouter()
	router.Handle("message/send", func(ctx context.Context, req *snap.Verified) (any, error) {
		return map[string]any{"task": map[string]any{"id": "t-1", "status": map[string]any{"state": "submitted"}}}, nil
	})
	server := snap.NewServer(snap.ServerConfig{Key: agent, Router: router, Logger: slog.New(slog.DiscardHandler),
		Validator: snap.NewValidator(snap.Config{Self: agent.Address(identity.Mainnet), Replay: snap.NewMemoryReplayStore(0)})})
	srv, err := snaphttp.New(snaphttp.Config{Handler: server, Key: agent, Address: server.Address(),
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	ts := httptest.NewServer(srv) // or srv.Serve(ctx, ln), which stops gracefully
	defer ts.Close()

	m := &snap.Message{ID: "m-1", Version: snap.ProtocolVersion, Type: snap.TypeRequest, Method: "message/send",
		From: peer.Address(identity.Mainnet), To: server.Address(), Timestamp: time.Now().Unix(),
		Payload: []byte(`{"message":{"messageId":"m-1","role":"user","parts":[{"text":"hi"}]}}`)}
	if err := m.Sign(peer); err != nil {
		panic(err)
	}
	raw, _ := m.MarshalJSON()
	for range 2 {
		resp, err := http.Post(ts.URL+"/snap", "application/json", bytes.NewReader(raw))
		if err != nil {
			panic(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		answer, _ := snap.Parse(body) // package client also checks its signature
		fmt.Println(resp.StatusCode, answer.Type, answer.From == server.Address(), string(answer.Payload))
	}
	// Output:
	// 200 response true {"task":{"id":"t-1","status":{"state":"submitted"}}}
	// 200 response true {"deduplicated":true,"task":{"id":"t-1","status":{"state":"submitted"}}}
}

// The agent card, served signed at the well-known path, is what a peer
// reads to find the agent; it verifies against the card's own identity.
func Example_card() {
	agent, _ := identity.FromHex(strings.Repeat("0b", 32))
	card := &snap.Card{Name: "echo", Description: "an example agent", Version: "1.0.0",
		Identity: agent.Address(identity.Mainnet), DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		Skills: []snap.Skill{{ID: "echo", Name: "Echo", Description: "echoes", Tags: []string{"demo"}}}}
	router := snap.NewRouter()
	server := snap.NewServer(snap.ServerConfig{Key: agent, Router: router, Logger: slog.New(slog.DiscardHandler),
		Validator: snap.NewValidator(snap.Config{Self: card.Identity})})
	srv, err := snaphttp.New(snaphttp.Config{Handler: server, Key: agent, Card: func() *snap.Card { return card },
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		panic(err)
	}
	ts := httptest.NewServer(srv)
	defer ts.Close()

	resp, err := http.Get(ts.URL + snaphttp.WellKnownPath)
	if err != nil {
		panic(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	got, _, err := snap.VerifySignedCard(body)
	fmt.Println(resp.StatusCode, got.Name, got.Identity == card.Identity, err)
	// Output:
	// 200 echo true <nil>
}
