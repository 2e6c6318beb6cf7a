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

// BenchmarkSendThroughServer measures one message/send as a transport
// hands it to the node's snap.Server: validation, the router decoding the
// payload into the params once, the Service creating the task (in
// memory, no runner), and the signed response. The message carries a text
// part and a proposal-shaped data part, whose classification is a JSON
// pass of its own. allocs/op shows how often the payload is decoded.
// "decision" adds what the node adds: an interceptor that looks at every
// message/send for an operator's decision, as the node's does.
//
//	go test ./tasks -run '^$' -bench SendThroughServer -benchmem -benchtime 5000x -count 5
func BenchmarkSendThroughServer(b *testing.B) {
	b.Run("service", func(b *testing.B) { benchSendThroughServer(b, nil) })
	b.Run("decision", func(b *testing.B) {
		benchSendThroughServer(b, func(ctx context.Context, req *snap.Verified, p *tasks.SendParams) (any, bool, error) {
			if p.TaskID == "" || len(p.Message.Parts) != 1 || p.Message.Parts[0].Data == nil {
				return nil, false, nil
			}
			b.Fatal("a decision")
			return nil, true, nil
		})
	})
}

func benchSendThroughServer(b *testing.B, intercept tasks.Interceptor) {
	server, raw := serverAndSend(b, intercept)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		resp := server.Respond(ctx, snap.Inbound{Raw: raw, Transport: "bench"})
		if resp == nil || len(resp.Payload) < 9 || string(resp.Payload[:9]) == `{"error":` {
			b.Fatalf("answered %s", resp.Payload)
		}
	}
}

// serverAndSend returns the node's snap.Server over a Service with a
// memory store (intercept, when not nil, looking at each message/send
// first), and a signed message/send to it, with a text part and a
// proposal-shaped data part, that it answers again and again: the
// server has no replay store and its clock stands still.
func serverAndSend(tb testing.TB, intercept tasks.Interceptor) (*snap.Server, []byte) {
	node, err := identity.Generate()
	if err != nil {
		tb.Fatal(err)
	}
	peer, err := identity.Generate()
	if err != nil {
		tb.Fatal(err)
	}
	t0 := time.Date(2026, 2, 4, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { return t0 }
	svc := tasks.NewService(tasks.NewMemoryStore(tasks.MemoryStoreOptions{MaxTasks: 1 << 30}), tasks.ServiceOptions{Now: now})
	router := snap.NewRouter()
	svc.Register(router, intercept)
	self := node.Address(identity.Mainnet)
	server := snap.NewServer(snap.ServerConfig{Key: node, Router: router, Now: now,
		Logger:    slog.New(slog.DiscardHandler),
		Validator: snap.NewValidator(snap.Config{Self: self, Now: now})})
	m := &snap.Message{ID: snap.NewID(), Version: snap.ProtocolVersion, Type: snap.TypeRequest, Method: "message/send",
		From: peer.Address(identity.Mainnet), To: self, Timestamp: t0.Unix(),
		Payload: []byte(`{"message":{"messageId":"m1","role":"user","parts":[` +
			`{"text":"please read the notes and summarize what changed since yesterday"},` +
			`{"data":{"schema_version":"1.0.0","id":"p1","reasoning":"the notes hold the changes","action":"READ_FILE","args":{"path":"/sandbox/notes.md"}}}]}}`)}
	if err := m.Sign(peer); err != nil {
		tb.Fatal(err)
	}
	raw, err := m.MarshalJSON()
	if err != nil {
		tb.Fatal(err)
	}
	return server, raw
}
