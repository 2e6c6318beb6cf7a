package snap_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// chunks is an event payload that shrinks by dropping its last chunk.
type chunks struct {
	N      int      `json:"n"`
	Chunks []string `json:"chunks"`
}

func (c *chunks) Shrink() bool {
	if len(c.Chunks) <= 1 {
		return false
	}
	c.Chunks = c.Chunks[:len(c.Chunks)-1]
	return true
}

// streamServer returns B's server with streaming test methods, and A's
// validator of B's messages.
func streamServer(t *testing.T, maxSize int) (*snap.Server, *snap.Validator, *atomic.Int32) {
	t.Helper()
	r := snap.NewRouter()
	var calls atomic.Int32
	// message/stream is the one streaming method a test can use besides
	// tasks/resubscribe: the payload's mode picks what the handler does.
	modes := map[string]snap.StreamHandlerFunc{
		"count": func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
			calls.Add(1)
			for i := 1; i <= 3; i++ {
				if err := emit(map[string]any{"n": i}); err != nil {
					if ctx.Err() == nil {
						t.Error("emit failed but the handler's context is not canceled")
					}
					return map[string]any{"stopped": i}, nil
				}
			}
			return map[string]any{"done": 3}, nil
		},
		"sizes": func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
			emit(&chunks{N: 1, Chunks: []string{strings.Repeat("a", 600), strings.Repeat("b", 600), strings.Repeat("c", 600)}})
			emit(map[string]any{"n": 2, "blob": strings.Repeat("x", 5000)}) // cannot shrink: dropped
			emit(map[string]any{"n": 3})
			return map[string]any{"done": 3}, nil
		},
		"panic": func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
			emit(map[string]any{"n": 1})
			panic("boom")
		},
		"fail": func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
			emit(map[string]any{"n": 1})
			return nil, snap.NewError(snap.CodeTaskNotFound, "task not found", map[string]any{"taskId": "x"})
		},
		"": func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
			emit(map[string]any{"taskId": "t-1", "progress": 0.5, "message": "working"})
			return map[string]any{"task": map[string]any{"id": "t-1"}}, nil
		},
	}
	r.HandleStream("message/stream", func(ctx context.Context, req *snap.Verified, emit func(any) error) (any, error) {
		var p struct {
			Mode string `json:"mode"`
		}
		json.Unmarshal(req.Payload, &p)
		return modes[p.Mode](ctx, req, emit)
	})
	r.Handle("test/plain", func(ctx context.Context, req *snap.Verified) (any, error) {
		return map[string]any{"plain": true}, nil
	})
	self := keyB.Address(identity.Mainnet)
	s := snap.NewServer(snap.ServerConfig{
		Key: keyB, Router: r, Now: at(t0), MaxResponseSize: maxSize, Logger: slog.New(slog.DiscardHandler),
		Validator: snap.NewValidator(snap.Config{Self: self, Now: at(t0), Replay: snap.NewMemoryReplayStore(0)}),
	})
	return s, snap.NewValidator(snap.Config{Self: keyA.Address(identity.Mainnet), Now: at(t0)}), &calls
}

// collect runs Stream and returns the events it sent, checked as a
// requester must check them, with the final payload.
func collect(t *testing.T, s *snap.Server, client *snap.Validator, raw []byte, method string) ([]map[string]any, map[string]any) {
	t.Helper()
	var events []map[string]any
	final := s.Serve(context.Background(), snap.Inbound{Raw: raw}, func(m *snap.Message) error {
		b, _ := m.MarshalJSON()
		v, err := client.Validate(context.Background(), b)
		if err != nil {
			t.Fatalf("event does not validate: %v\n%s", err, b)
		}
		if !v.Signed || v.Type != snap.TypeEvent || v.Method != method || v.From != keyB.Address(identity.Mainnet) || v.To != keyA.Address(identity.Mainnet) {
			t.Fatalf("event envelope: %s", b)
		}
		var p map[string]any
		if err := json.Unmarshal(v.Payload, &p); err != nil {
			t.Fatal(err)
		}
		events = append(events, p)
		return nil
	})
	return events, check(t, client, final, method)
}

func TestStreamSendsEventsThenResponse(t *testing.T) {
	s, client, _ := streamServer(t, 0)
	events, final := collect(t, s, client, request(t, "s-1", "message/stream", `{"mode":"count"}`), "message/stream")
	if fmt.Sprint(events) != "[map[n:1] map[n:2] map[n:3]]" || final["done"] != float64(3) {
		t.Fatalf("events %v, final %v", events, final)
	}
}

// Respond on a streaming method runs the handler and answers with its
// final payload only; Stream on a plain method is Respond.
func TestStreamAndRespondMeet(t *testing.T) {
	s, client, calls := streamServer(t, 0)
	ctx := context.Background()
	p := check(t, client, s.Respond(ctx, snap.Inbound{Raw: request(t, "r-1", "message/stream", `{"mode":"count"}`)}), "message/stream")
	if p["done"] != float64(3) || calls.Load() != 1 {
		t.Fatalf("Respond on a stream: %v (handler ran %d times)", p, calls.Load())
	}
	final := s.Serve(ctx, snap.Inbound{Raw: request(t, "r-2", "test/plain", `{}`)}, func(*snap.Message) error {
		t.Fatal("a plain method sent an event")
		return nil
	})
	if p := check(t, client, final, "test/plain"); p["plain"] != true {
		t.Fatalf("Stream on a plain method: %v", p)
	}
	// Errors before the handler, and unknown methods, get no event. A
	// retried streaming request is not answered from a result cache, as
	// message/send is: it is a duplicate.
	streamed := request(t, "r-6", "message/stream", `{}`)
	if events, p := collect(t, s, client, streamed, "message/stream"); len(events) != 1 || p["task"] == nil {
		t.Fatalf("message/stream: %v then %v", events, p)
	}
	for _, c := range []struct {
		raw    []byte
		method string
		code   int
	}{
		{request(t, "r-3", "foo/bar", `{}`), "foo/bar", 1007},
		{request(t, "r-2", "message/stream", `{"mode":"count"}`), "message/stream", 2006}, // a replayed id
		{streamed, "message/stream", 2006},
		{[]byte(strings.Replace(string(request(t, "r-4", "message/stream", `{"mode":"count","a":1}`)), `"a":1`, `"a":2`, 1)), "message/stream", 2001},
	} {
		events, p := collect(t, s, client, c.raw, c.method)
		if code, _ := errorCode(p); code != c.code || len(events) != 0 {
			t.Errorf("%s: code %d with %d events, want %d and none", c.method, code, len(events), c.code)
		}
	}
	// Events and responses are never answered, through Stream either.
	m, _ := snap.Parse(request(t, "r-5", "message/stream", `{"mode":"count"}`))
	m.Type = snap.TypeEvent
	m.Sign(keyA)
	raw, _ := m.MarshalJSON()
	if resp := s.Serve(ctx, snap.Inbound{Raw: raw}, func(*snap.Message) error { t.Fatal("event sent"); return nil }); resp != nil {
		t.Fatalf("an inbound event was answered: %s", resp.Payload)
	}
}

// A failed send cancels the handler's context, emit reports it, and the
// final response still comes back.
func TestStreamSendFailure(t *testing.T) {
	s, client, _ := streamServer(t, 0)
	gone := errors.New("connection reset")
	sent := 0
	final := s.Serve(context.Background(), snap.Inbound{Raw: request(t, "f-1", "message/stream", `{"mode":"count"}`)}, func(*snap.Message) error {
		sent++
		if sent == 2 {
			return gone
		}
		return nil
	})
	if p := check(t, client, final, "message/stream"); p["stopped"] != float64(2) || sent != 2 {
		t.Fatalf("final %v after %d sends; want the handler stopped at the second event", p, sent)
	}
}

func TestStreamHandlerErrors(t *testing.T) {
	s, client, _ := streamServer(t, 0)
	for _, c := range []struct {
		method string
		code   int
	}{{"panic", 5001}, {"fail", 1001}} {
		events, p := collect(t, s, client, request(t, "e-"+c.method, "message/stream", `{"mode":"`+c.method+`"}`), "message/stream")
		if code, _ := errorCode(p); code != c.code || len(events) != 1 {
			t.Errorf("%s: code %d after %d events, want %d after 1", c.method, code, len(events), c.code)
		}
	}
}

// Events stay within MaxResponseSize: a Shrinker shrinks, anything else
// too large is dropped, and the stream goes on.
func TestStreamEventSizeLimit(t *testing.T) {
	s, client, _ := streamServer(t, 1500)
	events, final := collect(t, s, client, request(t, "z-1", "message/stream", `{"mode":"sizes"}`), "message/stream")
	if len(events) != 2 || events[0]["n"] != float64(1) || events[1]["n"] != float64(3) || final["done"] != float64(3) {
		t.Fatalf("events %v, final %v; want the first shrunk, the second dropped", events, final)
	}
	if n := len(events[0]["chunks"].([]any)); n != 1 {
		t.Errorf("first event kept %d chunks, want 1 (two of 600 bytes do not fit in 1500)", n)
	}
}

func TestRouterStreams(t *testing.T) {
	r := snap.NewRouter()
	h := func(context.Context, *snap.Verified, func(any) error) (any, error) { return nil, nil }
	r.HandleStream("message/stream", h)
	r.Handle("tasks/get", func(context.Context, *snap.Verified) (any, error) { return nil, nil })
	if !r.IsStream("message/stream") || r.IsStream("tasks/get") || r.IsStream("nope/nope") {
		t.Error("IsStream")
	}
	if fmt.Sprint(r.Methods()) != "[message/stream tasks/get]" {
		t.Errorf("Methods = %v", r.Methods())
	}
	if _, ok := r.Lookup("message/stream"); !ok {
		t.Error("Lookup does not find a streaming method")
	}
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"stream after stream", func() { r.HandleStream("message/stream", h) }},
		{"stream after plain", func() { r.HandleStream("tasks/get", h) }},
		{"plain after stream", func() {
			r.Handle("message/stream", func(context.Context, *snap.Verified) (any, error) { return nil, nil })
		}},
		{"invalid name", func() { r.HandleStream("Bad/Name", h) }},
		{"stream of a method that does not stream", func() { r.HandleStream("test/stream", h) }},
		{"plain handler of a streaming method", func() {
			r.Handle("tasks/resubscribe", func(context.Context, *snap.Verified) (any, error) { return nil, nil })
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Error("no panic")
				}
			}()
			c.f()
		})
	}
}
