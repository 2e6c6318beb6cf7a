package client_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// A requester finds an agent served over HTTP by its well-known card and
// asks it a message/send through the agent's Transport, which signs the
// request and verifies the answer.
func Example() {
	agentKey, _ := identity.FromHex("1111111111111111111111111111111111111111111111111111111111111111")
	me, _ := identity.FromHex("2222222222222222222222222222222222222222222222222222222222222222")

	// The agent: a SNAP server behind HTTP.
	self := agentKey.Address(identity.Mainnet)
	router := snap.NewRouter()
	router.Handle("message/send", func(ctx context.Context, req *snap.Verified) (any, error) {
		return map[string]any{"task": map[string]any{"id": "t-1", "status": map[string]any{"state": "submitted"}}}, nil
	})
	server := snap.NewServer(snap.ServerConfig{
		Key: agentKey, Router: router, Logger: slog.New(slog.DiscardHandler),
		Validator: snap.NewValidator(snap.Config{Self: self, Replay: snap.NewMemoryReplayStore(0)}),
	})
	card := &snap.Card{Name: "echo", Description: "an example agent", Version: "1.0.0", Identity: self,
		Skills:            []snap.Skill{{ID: "echo", Name: "Echo", Description: "echoes", Tags: []string{"demo"}}},
		DefaultInputModes: []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"}}
	srv, err := snaphttp.New(snaphttp.Config{Handler: server, Key: agentKey, Card: func() *snap.Card { return card }})
	if err != nil {
		panic(err)
	}
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()

	// The requester.
	c := client.NewHTTP(client.HTTPConfig{Key: me})
	found, _, err := c.Discover(ctx, base)
	if err != nil {
		panic(err)
	}
	var agent client.Transport = c.To(base+"/snap", found.Identity)
	resp, err := agent.Send(ctx, "message/send", []byte(`{"message":{"messageId":"m-1","role":"user","parts":[{"text":"hi"}]}}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(found.Name, resp.Type, resp.From == found.Identity, string(resp.Payload))
	stop()
	fmt.Println(<-served)
	// Output:
	// echo response true {"task":{"id":"t-1","status":{"state":"submitted"}}}
	// <nil>
}
