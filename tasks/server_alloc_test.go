//go:build !race

package tasks_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// A message/send answered through the node's snap.Server, with Nostr's
// bound on an answer's size, takes at most 128 allocations: the answer is
// written once, in canonical form, and measured without being built
// again (it took 139, encoding/json by reflection, canonicalization, and
// the whole message built to be measured; not run under the race
// detector, which empties pools at random).
func TestSendThroughServerAllocations(t *testing.T) {
	node, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	peer, err := identity.Generate()
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 2, 4, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { return t0 }
	svc := tasks.NewService(tasks.NewMemoryStore(tasks.MemoryStoreOptions{MaxTasks: 1 << 30}), tasks.ServiceOptions{Now: now})
	router := snap.NewRouter()
	svc.Register(router, nil)
	self := node.Address(identity.Mainnet)
	server := snap.NewServer(snap.ServerConfig{Key: node, Router: router, Now: now,
		Logger:    slog.New(slog.DiscardHandler),
		Validator: snap.NewValidator(snap.Config{Self: self, Now: now})}) // no replay store: one request serves every run
	m := &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, Type: snap.TypeRequest, Method: "message/send",
		From: peer.Address(identity.Mainnet), To: self, Timestamp: t0.Unix(),
		Payload: []byte(`{"message":{"messageId":"m1","role":"user","parts":[` +
			`{"text":"please read the notes and summarize what changed since yesterday"},` +
			`{"data":{"schema_version":"1.0.0","id":"p1","reasoning":"the notes hold the changes","action":"READ_FILE","args":{"path":"/sandbox/notes.md"}}}]}}`)}
	if err := m.Sign(peer); err != nil {
		t.Fatal(err)
	}
	raw, err := m.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	in := snap.Inbound{Raw: raw, Transport: "nostr", MaxSize: 65_535}
	if n := testing.AllocsPerRun(200, func() {
		resp := server.Respond(ctx, in)
		if resp == nil || len(resp.Payload) < 9 || string(resp.Payload[:9]) == `{"error":` {
			t.Fatalf("answered %s", resp.Payload)
		}
	}); n > 128 {
		t.Errorf("answering the message/send made %.0f allocations, want at most 128", n)
	}
}
