package snap_test

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// newServer returns B's server with an echo handler for message/send and a
// handler per test need, and A's validator of B's responses.
func newServer(t *testing.T, maxSize int) (*snap.Server, *snap.Validator) {
	t.Helper()
	r := snap.NewRouter()
	r.Handle("message/send", func(ctx context.Context, req *snap.Verified) (any, error) {
		return map[string]any{"task": map[string]any{"id": "task-" + req.ID, "echo": json.RawMessage(req.Payload)}}, nil
	})
	r.Handle("tasks/get", func(ctx context.Context, req *snap.Verified) (any, error) {
		return nil, snap.NewError(snap.CodeTaskNotFound, "task not found", map[string]any{"taskId": "x"})
	})
	r.Handle("tasks/cancel", func(ctx context.Context, req *snap.Verified) (any, error) {
		panic("boom")
	})
	r.Handle("test/plain_error", func(ctx context.Context, req *snap.Verified) (any, error) {
		return nil, errors.New("database password is hunter2")
	})
	r.Handle("test/big", func(ctx context.Context, req *snap.Verified) (any, error) {
		h := make([]string, 100)
		for i := range h {
			h[i] = strings.Repeat("h", 50)
		}
		return &shrinkable{History: h}, nil
	})
	r.Handle("test/huge", func(ctx context.Context, req *snap.Verified) (any, error) {
		return map[string]string{"blob": strings.Repeat("x", 100_000)}, nil
	})
	self := keyB.Address(identity.Mainnet)
	s := snap.NewServer(snap.ServerConfig{
		Key: keyB, Router: r, Now: at(t0), MaxResponseSize: maxSize, Logger: slog.New(slog.DiscardHandler),
		// The failing handlers claim their record, as the task service's
		// do, so that their failure is answered as it is (a request
		// whose id validation spent is answered 2006: see
		// TestValidationSpentThenFailedIsNotToldToRetry).
		Validator: snap.NewValidator(snap.Config{Self: self, Now: at(t0), Replay: snap.NewMemoryReplayStore(0),
			ClaimMethods: []string{"tasks/cancel", "test/plain_error"}}),
	})
	return s, snap.NewValidator(snap.Config{Self: keyA.Address(identity.Mainnet), Now: at(t0)})
}

type shrinkable struct {
	History []string `json:"history"`
}

func (s *shrinkable) Shrink() bool {
	if len(s.History) == 0 {
		return false
	}
	s.History = s.History[len(s.History)/2+len(s.History)%2:]
	return true
}

// request returns a signed request from A to B.
func request(t *testing.T, id, method, payload string) []byte {
	t.Helper()
	m := &snap.Message{ID: id, Version: "0.1", Type: snap.TypeRequest, Method: method,
		From: keyA.Address(identity.Mainnet), To: keyB.Address(identity.Mainnet),
		Payload: []byte(payload), Timestamp: t0}
	if err := m.Sign(keyA); err != nil {
		t.Fatal(err)
	}
	raw, _ := m.MarshalJSON()
	return raw
}

// check verifies resp as a requester must and returns its payload.
func check(t *testing.T, client *snap.Validator, resp *snap.Message, method string) map[string]any {
	t.Helper()
	if resp == nil {
		t.Fatal("no response")
	}
	raw, _ := resp.MarshalJSON()
	v, err := client.Validate(context.Background(), raw)
	if err != nil {
		t.Fatalf("response does not validate: %v\n%s", err, raw)
	}
	if !v.Signed || v.Type != snap.TypeResponse || v.Method != method || v.From != keyB.Address(identity.Mainnet) {
		t.Fatalf("response envelope: %s", raw)
	}
	var p map[string]any
	if err := json.Unmarshal(v.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p
}

func errorCode(p map[string]any) (int, map[string]any) {
	e, _ := p["error"].(map[string]any)
	if e == nil {
		return 0, nil
	}
	c, _ := e["code"].(float64)
	d, _ := e["data"].(map[string]any)
	return int(c), d
}

func TestServerAnswersEveryRequest(t *testing.T) {
	ctx := context.Background()
	s, client := newServer(t, 0)

	p := check(t, client, s.Respond(ctx, snap.Inbound{Raw: request(t, "ok-1", "message/send", `{"a":1}`)}), "message/send")
	if task, _ := p["task"].(map[string]any); task["id"] != "task-ok-1" {
		t.Errorf("handler result missing: %v", p)
	}

	cases := []struct {
		name   string
		raw    []byte
		method string
		code   int
		field  string
	}{
		{"unknown method", request(t, "u-1", "foo/bar", `{}`), "foo/bar", 1007, ""},
		{"handler's own error", request(t, "g-1", "tasks/get", `{"taskId":"x"}`), "tasks/get", 1001, ""},
		{"handler panic", request(t, "c-1", "tasks/cancel", `{}`), "tasks/cancel", 5001, ""},
		{"plain error is not leaked", request(t, "p-1", "test/plain_error", `{}`), "test/plain_error", 5001, ""},
		{"bad field", []byte(strings.Replace(string(request(t, "b-1", "message/send", `{}`)), `"id":"b-1"`, `"id":"b@1"`, 1)), "message/send", 1004, "id"},
		{"bad signature", []byte(strings.Replace(string(request(t, "s-1", "message/send", `{"a":1}`)), `"a":1`, `"a":2`, 1)), "message/send", 2001, "sig"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := check(t, client, s.Respond(ctx, snap.Inbound{Raw: c.raw}), c.method)
			code, data := errorCode(p)
			if code != c.code {
				t.Fatalf("code %d, want %d: %v", code, c.code, p)
			}
			if c.field != "" && data["field"] != c.field {
				t.Errorf("field %v, want %s", data["field"], c.field)
			}
			if strings.Contains(p["error"].(map[string]any)["message"].(string), "hunter2") {
				t.Error("internal error text leaked to the peer")
			}
		})
	}
}

// An error that names a field the peer named (a member of its own
// choosing) still fits the error schema's message of at most 1024
// characters and the transport: over Nostr (65,535 bytes) a request of
// that size whose offence sits under a member name tens of kilobytes long
// is answered with its own code, 1003 or 1004, never replaced by a
// retryable 5001 "response too large" because the answer echoed the name
// in full, in data.field and in the message.
func TestServerLongFieldNamesInErrors(t *testing.T) {
	const nostrMax = 65535
	r := snap.NewRouter()
	r.HandleStream(snap.MethodTasksResubscribe, snap.StreamParams(snap.ParseResubscribeParams,
		func(ctx context.Context, req *snap.Verified, p *snap.ResubscribeParams, emit func(any) error) (any, error) {
			return map[string]any{"task": map[string]any{"id": p.TaskID}}, nil
		}))
	r.Handle("message/send", func(ctx context.Context, req *snap.Verified) (any, error) { return map[string]any{}, nil })
	self := keyB.Address(identity.Mainnet)
	s := snap.NewServer(snap.ServerConfig{
		Key: keyB, Router: r, Now: at(t0), Logger: slog.New(slog.DiscardHandler),
		Validator: snap.NewValidator(snap.Config{Self: self, Now: at(t0), Replay: snap.NewMemoryReplayStore(0)}),
	})
	client := snap.NewValidator(snap.Config{Self: keyA.Address(identity.Mainnet), Now: at(t0)})
	// fill returns build(name) for the name of "k"s that brings it to
	// exactly nostrMax bytes.
	fill := func(build func(name string) []byte) []byte {
		return build(strings.Repeat("k", nostrMax-len(build("k"))+1))
	}
	cases := []struct {
		name   string
		raw    []byte
		method string // echoed; snap/error when the input is not I-JSON
		code   int
		field  string // data.field begins so
	}{
		{"lone surrogate under an unknown envelope member", fill(func(n string) []byte {
			return []byte(strings.Replace(string(request(t, "e-1", "message/send", `{}`)), `{"id"`, `{"`+n+`":"\ud800","id"`, 1))
		}), "snap/error", 1003, "kkk"},
		{"lone surrogate under a payload member", fill(func(n string) []byte {
			return []byte(strings.Replace(string(request(t, "p-1", "message/send", `{}`)), `"payload":{}`, `"payload":{"`+n+`":"\ud800"}`, 1))
		}), "snap/error", 1003, "payload.kkk"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if len(c.raw) != nostrMax {
				t.Fatalf("request of %d bytes, want %d", len(c.raw), nostrMax)
			}
			resp := s.Respond(context.Background(), snap.Inbound{Raw: c.raw, Transport: "nostr", MaxSize: nostrMax})
			p := check(t, client, resp, c.method)
			code, data := errorCode(p)
			if code != c.code {
				t.Fatalf("code %d, want %d: %.300v", code, c.code, p)
			}
			field, _ := data["field"].(string)
			if !strings.HasPrefix(field, c.field) || len(field) > 300 {
				t.Errorf("data.field of %d bytes %.40q…, want a short one beginning %q", len(field), field, c.field)
			}
			if msg := p["error"].(map[string]any)["message"].(string); utf8.RuneCountInString(msg) > 1024 {
				t.Errorf("message of %d characters, the error schema allows 1024", utf8.RuneCountInString(msg))
			}
		})
	}
}

// A message that is not even JSON still gets a signed answer; with no
// sender to address, to is omitted.
func TestServerAnswersGarbage(t *testing.T) {
	s, _ := newServer(t, 0)
	resp := s.Respond(context.Background(), snap.Inbound{Raw: []byte("not json")})
	if resp == nil || resp.To != "" || resp.Method != "snap/error" || resp.Sig == "" {
		t.Fatalf("response %+v", resp)
	}
	if !strings.Contains(string(resp.Payload), `"code":1003`) {
		t.Errorf("payload %s", resp.Payload)
	}
}

// Responses and events are never routed and never answered, signed or not
// (the reference SDK runs the handlers of an unsigned event or response,
// an authentication bypass; docs/conformance.md).
func TestServerNeverRoutesResponsesOrEvents(t *testing.T) {
	s, _ := newServer(t, 0)
	for _, typ := range []string{"response", "event"} {
		raw := request(t, "r-"+typ, "tasks/cancel", `{}`) // tasks/cancel panics if routed
		unsigned := strings.Replace(string(raw), `"type":"request"`, `"type":"`+typ+`"`, 1)
		unsigned = unsigned[:strings.LastIndex(unsigned, `,"sig"`)] + "}"
		if resp := s.Respond(context.Background(), snap.Inbound{Raw: []byte(unsigned)}); resp != nil {
			t.Errorf("unsigned %s answered: %s", typ, resp.Payload)
		}
		m, _ := snap.Parse([]byte(unsigned))
		m.Sign(keyA)
		signed, _ := m.MarshalJSON()
		if resp := s.Respond(context.Background(), snap.Inbound{Raw: signed}); resp != nil {
			t.Errorf("signed %s answered: %s", typ, resp.Payload)
		}
	}
}

func TestServerSignerBinding(t *testing.T) {
	s, client := newServer(t, 0)
	ctx := context.Background()
	pa, pc := keyA.InternalKey(), keyC.InternalKey()
	p := check(t, client, s.Respond(ctx, snap.Inbound{Raw: request(t, "n-1", "message/send", `{}`), Signer: &pa}), "message/send")
	if code, _ := errorCode(p); code != 0 {
		t.Fatalf("A's event carrying A's message: %v", p)
	}
	p = check(t, client, s.Respond(ctx, snap.Inbound{Raw: request(t, "n-2", "message/send", `{}`), Signer: &pc}), "message/send")
	code, data := errorCode(p)
	if code != 2003 || data["from"] != keyA.Address(identity.Mainnet) || data["signer"] == nil {
		t.Fatalf("C's event carrying A's message: %v, want 2003 {from, signer}", p)
	}
	// A testnet from is bound to the same key. (Without to: a mainnet
	// to would be refused for its network, and only service/call may
	// leave it out, so the answer is 1007 from the router, past the
	// binding check.)
	m := &snap.Message{ID: "n-3", Version: "0.1", Type: snap.TypeRequest, Method: "service/call",
		From: keyA.Address(identity.Testnet), Payload: []byte(`{}`), Timestamp: t0}
	m.Sign(keyA)
	raw, _ := m.MarshalJSON()
	resp := s.Respond(ctx, snap.Inbound{Raw: raw, Signer: &pa})
	var got struct {
		Error struct{ Code int } `json:"error"`
	}
	if json.Unmarshal(resp.Payload, &got); got.Error.Code != int(snap.CodeMethodNotFound) {
		t.Errorf("testnet from of the signer: %s, want it past the binding (1007)", resp.Payload)
	}
}

// A retried message/send gets the original result marked deduplicated;
// other duplicates get 2006.
func TestServerDeduplicated(t *testing.T) {
	s, client := newServer(t, 0)
	ctx := context.Background()
	raw := request(t, "d-1", "message/send", `{"n":1}`)
	first := check(t, client, s.Respond(ctx, snap.Inbound{Raw: raw}), "message/send")
	again := check(t, client, s.Respond(ctx, snap.Inbound{Raw: raw}), "message/send")
	if again["deduplicated"] != true {
		t.Fatalf("retry: %v, want deduplicated", again)
	}
	delete(again, "deduplicated")
	a, _ := json.Marshal(first)
	b, _ := json.Marshal(again)
	if string(a) != string(b) {
		t.Errorf("retry result differs:\n%s\n%s", a, b)
	}
	get := request(t, "d-2", "tasks/get", `{"taskId":"x"}`)
	s.Respond(ctx, snap.Inbound{Raw: get})
	p := check(t, client, s.Respond(ctx, snap.Inbound{Raw: get}), "tasks/get")
	if code, _ := errorCode(p); code != 2006 {
		t.Errorf("duplicate tasks/get: %v, want 2006", p)
	}
}

// Two servers sharing a replay store and a result store, as replicas on one
// database do: one delivery is answered once, by the server that took it;
// the same message in a new delivery (a retry) gets the original result
// from either.
func TestServerReplicasShareDeliveries(t *testing.T) {
	replay, results := snap.NewMemoryReplayStore(0), snap.NewMemoryResultStore(10)
	r := snap.NewRouter()
	var calls int
	r.Handle("message/send", func(ctx context.Context, req *snap.Verified) (any, error) {
		calls++
		return map[string]any{"task": map[string]any{"id": "task-" + req.ID}}, nil
	})
	self := keyB.Address(identity.Mainnet)
	replica := func() *snap.Server {
		return snap.NewServer(snap.ServerConfig{Key: keyB, Router: r, Now: at(t0), Logger: slog.New(slog.DiscardHandler), Results: results,
			Validator: snap.NewValidator(snap.Config{Self: self, Now: at(t0), Replay: replay})})
	}
	a, b := replica(), replica()
	client := snap.NewValidator(snap.Config{Self: keyA.Address(identity.Mainnet), Now: at(t0)})
	ctx := context.Background()
	raw := request(t, "r-1", "message/send", `{"n":1}`)

	first := check(t, client, a.Respond(ctx, snap.Inbound{Raw: raw, Via: "event-1"}), "message/send")
	if resp := b.Respond(ctx, snap.Inbound{Raw: raw, Via: "event-1"}); resp != nil {
		t.Fatalf("the replica answered a delivery another took: %s", resp.Payload)
	}
	if resp := a.Respond(ctx, snap.Inbound{Raw: raw, Via: "event-1"}); resp != nil {
		t.Fatalf("the same delivery answered twice: %s", resp.Payload)
	}
	for _, s := range []*snap.Server{a, b} {
		again := check(t, client, s.Respond(ctx, snap.Inbound{Raw: raw, Via: "event-2"}), "message/send")
		if again["deduplicated"] != true {
			t.Fatalf("retry in a new delivery: %v, want deduplicated", again)
		}
		delete(again, "deduplicated")
		x, _ := json.Marshal(first)
		y, _ := json.Marshal(again)
		if string(x) != string(y) {
			t.Fatalf("retry result differs:\n%s\n%s", x, y)
		}
	}
	if calls != 1 {
		t.Fatalf("handler ran %d times, want 1", calls)
	}
	// Without a result (not a message/send, or forgotten) a retry is 2006.
	get := request(t, "r-2", "tasks/get", `{"taskId":"x"}`)
	r.Handle("tasks/get", func(context.Context, *snap.Verified) (any, error) { return map[string]any{}, nil })
	check(t, client, a.Respond(ctx, snap.Inbound{Raw: get, Via: "event-3"}), "tasks/get")
	if resp := b.Respond(ctx, snap.Inbound{Raw: get, Via: "event-3"}); resp != nil {
		t.Fatal("replica answered a taken tasks/get delivery")
	}
	if code, _ := errorCode(check(t, client, b.Respond(ctx, snap.Inbound{Raw: get, Via: "event-4"}), "tasks/get")); code != 2006 {
		t.Fatalf("retried tasks/get: code %d, want 2006", code)
	}
}

// A late delivery (one a replica took up because nobody recorded it) is
// answered when it is recorded here, and not at all when it fails before
// that: its owner answered that failure already.
func TestServerLateDeliveries(t *testing.T) {
	s, client := newServer(t, 0)
	ctx := context.Background()
	raw := request(t, "late-1", "tasks/get", `{"taskId":"x"}`)
	if resp := s.Respond(ctx, snap.Inbound{Raw: raw, Via: "ev-late-1", Late: true}); resp == nil {
		t.Fatal("a late delivery recorded here was not answered")
	} else {
		check(t, client, resp, "tasks/get")
	}
	bad := []byte(strings.Replace(string(request(t, "late-2", "tasks/get", `{"taskId":"x"}`)), `"late-2"`, `"late-3"`, 1)) // its signature no longer holds
	if resp := s.Respond(ctx, snap.Inbound{Raw: bad, Via: "ev-late-2", Late: true}); resp != nil {
		t.Fatalf("a late delivery that failed validation was answered: %s", resp.Payload)
	}
	if code, _ := errorCode(check(t, client, s.Respond(ctx, snap.Inbound{Raw: bad, Via: "ev-late-3"}), "tasks/get")); code != 2001 {
		t.Fatalf("the same message on time: code %d, want 2001", code)
	}
}

func TestServerResponseSizeLimit(t *testing.T) {
	s, client := newServer(t, 2000)
	ctx := context.Background()
	resp := s.Respond(ctx, snap.Inbound{Raw: request(t, "z-1", "test/big", `{}`)})
	if b, _ := resp.MarshalJSON(); len(b) > 2000 {
		t.Fatalf("response of %d bytes over a 2000 limit", len(b))
	}
	p := check(t, client, resp, "test/big")
	if h, ok := p["history"].([]any); !ok || len(h) == 0 || len(h) == 100 {
		t.Errorf("history not trimmed to fit: %d entries", len(h))
	}
	p = check(t, client, s.Respond(ctx, snap.Inbound{Raw: request(t, "z-2", "test/huge", `{}`)}), "test/huge")
	code, data := errorCode(p)
	if code != 5001 || data["limit"] != float64(2000) {
		t.Errorf("unshrinkable response: %v, want 5001 with the limit", p)
	}
}

// countingResults is a MemoryResultStore that counts SaveResult calls.
type countingResults struct {
	*snap.MemoryResultStore
	saves int
}

func (c *countingResults) SaveResult(ctx context.Context, from, id string, result []byte, expires time.Time) error {
	c.saves++
	return c.MemoryResultStore.SaveResult(ctx, from, id, result, expires)
}

// A message/send handler that kept its request's result in its own write
// (snap.ResultKept) saves the Server a second write when the answer is
// that result; an answer that differs from what was kept is saved.
func TestServerResultKept(t *testing.T) {
	for _, tc := range []struct {
		name      string
		kept      string // what the handler says it kept
		wantSaves int
	}{
		{"same answer", `{"task":{"id":"t1","status":"done"}}`, 0},
		{"answer changed since", `{"task":{"id":"t1","status":"submitted"}}`, 1},
		{"nothing kept", "", 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			results := &countingResults{MemoryResultStore: snap.NewMemoryResultStore(10)}
			r := snap.NewRouter()
			r.Handle("message/send", func(ctx context.Context, req *snap.Verified) (any, error) {
				if tc.kept != "" {
					if err := results.MemoryResultStore.SaveResult(ctx, req.From, req.ID, []byte(tc.kept), time.Unix(t0, 0).Add(time.Hour)); err != nil {
						t.Fatal(err)
					}
					snap.ResultKept(ctx, []byte(tc.kept))
				}
				return map[string]any{"task": map[string]any{"status": "done", "id": "t1"}}, nil
			})
			self := keyB.Address(identity.Mainnet)
			s := snap.NewServer(snap.ServerConfig{Key: keyB, Router: r, Now: at(t0), Logger: slog.New(slog.DiscardHandler), Results: results,
				Validator: snap.NewValidator(snap.Config{Self: self, Now: at(t0), Replay: snap.NewMemoryReplayStore(0)})})
			client := snap.NewValidator(snap.Config{Self: keyA.Address(identity.Mainnet), Now: at(t0)})
			ctx := context.Background()
			raw := request(t, "k-1", "message/send", `{"n":1}`)
			check(t, client, s.Respond(ctx, snap.Inbound{Raw: raw}), "message/send")
			if results.saves != tc.wantSaves {
				t.Errorf("the server saved the answer %d times; want %d", results.saves, tc.wantSaves)
			}
			again := check(t, client, s.Respond(ctx, snap.Inbound{Raw: raw}), "message/send")
			task, _ := again["task"].(map[string]any)
			if again["deduplicated"] != true || task["status"] != "done" {
				t.Errorf("retry: %v; want the answer, deduplicated", again)
			}
		})
	}
}

// A delivery already taken (the same Via: one relay event reaching the
// process twice) is dropped without an answer; the same message carried
// by another delivery, or by none, is answered as the duplicate it is.
// Each replay is answered from the Validator's cache and from the replay
// store alike: the second server shares only the store.
func TestRedeliveryIsDroppedSilently(t *testing.T) {
	ctx := context.Background()
	replay := snap.NewMemoryReplayStore(0)
	server := func() *snap.Server {
		r := snap.NewRouter()
		r.Handle("message/send", func(context.Context, *snap.Verified) (any, error) { return map[string]any{"ok": true}, nil })
		return snap.NewServer(snap.ServerConfig{
			Key: keyB, Router: r, Now: at(t0), Logger: slog.New(slog.DiscardHandler),
			Validator: snap.NewValidator(snap.Config{Self: keyB.Address(identity.Mainnet), Now: at(t0), Replay: replay}),
		})
	}
	raw := request(t, "via-1", "message/send", sendText)
	first := server()
	if resp := first.Respond(ctx, snap.Inbound{Raw: raw, Via: "event-a"}); resp == nil {
		t.Fatal("the first delivery got no answer")
	}
	for name, s := range map[string]*snap.Server{"the same process": first, "another process": server()} {
		for range 2 { // the second time from the Validator's cache
			if resp := s.Respond(ctx, snap.Inbound{Raw: raw, Via: "event-a"}); resp != nil {
				t.Fatalf("%s: the same delivery again was answered: %s", name, resp.Payload)
			}
			for _, via := range []string{"event-b", ""} {
				if resp := s.Respond(ctx, snap.Inbound{Raw: raw, Via: via}); resp == nil {
					t.Fatalf("%s: the message by another delivery (%q) got no answer", name, via)
				}
			}
		}
	}
}

// A requester on the other network (a tb1p address writing to a bc1p node)
// is refused with 2005, and the refusal is addressed to no one: naming it
// in `to` would make the answer itself mix networks, which the requester's
// own validator refuses, so it would never learn why.
func TestServerRefusalOfOtherNetworkOmitsTo(t *testing.T) {
	s, _ := newServer(t, 0)
	m := &snap.Message{ID: "net-1", Version: "0.1", Type: snap.TypeRequest, Method: "message/send",
		From: keyA.Address(identity.Testnet), To: keyB.Address(identity.Mainnet),
		Payload: []byte(`{"a":1}`), Timestamp: t0}
	if err := m.Sign(keyA); err != nil {
		t.Fatal(err)
	}
	raw, _ := m.MarshalJSON()
	resp := s.Respond(context.Background(), snap.Inbound{Raw: raw})
	if resp == nil {
		t.Fatal("no response")
	}
	if resp.To != "" {
		t.Errorf("refusal addressed to %s, a network other than the node's %s", resp.To, resp.From)
	}
	// The requester, on its network, can read the refusal.
	client := snap.NewValidator(snap.Config{Self: keyA.Address(identity.Testnet), Now: at(t0)})
	rraw, _ := resp.MarshalJSON()
	v, err := client.Validate(context.Background(), rraw)
	if err != nil {
		t.Fatalf("the requester cannot read the refusal: %v\n%s", err, rraw)
	}
	var p map[string]any
	if err := json.Unmarshal(v.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if code, data := errorCode(p); code != 2005 || data["field"] != "to" {
		t.Errorf("refusal %d %v, want 2005 naming to", code, data)
	}
}
