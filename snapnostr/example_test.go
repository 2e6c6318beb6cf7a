package snapnostr_test

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"

	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
)

// An agent answers over Nostr: its Inbox, subscribed through a relay pool
// to the embedded relay, opens a sealed message/send, hands it to the
// snap.Server and publishes the sealed answer, which the requester's client
// opens and verifies.
func Example() {
	log := slog.New(slog.DiscardHandler)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	rel, _ := embedded.New(embedded.Config{DBPath: ":memory:", Logger: log})
	defer rel.Close()
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	served := make(chan error, 1)
	go func() { served <- rel.Serve(ctx, ln) }()
	defer func() { <-served }()
	urls := []string{embedded.WebSocketURL(ln.Addr())}

	// The agent.
	agent, _ := identity.FromHex(strings.Repeat("0b", 32))
	router := snap.NewRouter()
	router.Handle("message/send", func(ctx context.Context, req *snap.Verified) (any, error) {
		return map[string]any{"task": map[string]any{"id": "t-1", "status": map[string]any{"state": "submitted"}}}, nil
	})
	server := snap.NewServer(snap.ServerConfig{Key: agent, Router: router, Logger: log,
		Validator: snap.NewValidator(snap.Config{Self: agent.Address(identity.Mainnet), Replay: snap.NewMemoryReplayStore(0)})})
	pool := relay.NewPool(relay.PoolConfig{URLs: urls, Logger: log})
	pool.Start(ctx)
	defer pool.Close()
	in := snapnostr.NewInbox(snapnostr.InboxConfig{Key: agent, Transport: pool, Handler: server,
		Checkpoint: snapnostr.NewMemoryCheckpoint(), Logger: log})
	done := make(chan error, 1)
	go func() { done <- in.Run(ctx) }()
	<-in.Ready()

	// A requester with its own pool.
	peer, _ := identity.FromHex(strings.Repeat("0a", 32))
	peerPool := relay.NewPool(relay.PoolConfig{URLs: urls, Logger: log})
	peerPool.Start(ctx)
	defer peerPool.Close()
	c := client.NewNostr(client.NostrConfig{Key: peer, Relays: peerPool, Logger: log})
	to := c.To(client.Target{Address: server.Address(), PubKey: agent.NostrPublicKey()}, false)
	resp, err := to.Send(ctx, "message/send", []byte(`{"message":{"messageId":"m-1","role":"user","parts":[{"text":"hi"}]}}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Type, resp.From == server.Address(), string(resp.Payload))
	stop()
	fmt.Println("inbox:", <-done)
	// Output:
	// response true {"task":{"id":"t-1","status":{"state":"submitted"}}}
	// inbox: <nil>
}
