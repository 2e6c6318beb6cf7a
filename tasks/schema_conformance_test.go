package tasks_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/snapref"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// TestResponsesMatchOfficialSchemas sends requests through a snap.Server
// serving the Service and holds every answer to the SNAP specification's
// published schemas: the envelope, and the payload of the method's
// response (message/send, tasks/get, tasks/cancel), results and errors
// alike; an error without a method schema (1007, validation failures)
// against the error schema. The one answer the schemas cannot describe
// is the duplicate message/send's original result with deduplicated: true,
// which the specification's messages document asks for while the
// response schema forbids the member: only that member may differ. And
// the schema requires to, which the specification makes optional: the
// answer to a message whose sender cannot be read is addressed to no one.
func TestResponsesMatchOfficialSchemas(t *testing.T) {
	schema := snapref.Schemas(t)
	envelope := schema("envelope.schema.json")
	errSchema := schema("error.schema.json")
	bySchema := map[string]*jsonschema.Schema{
		"message/send": schema("payloads/message-send.response.schema.json"),
		"tasks/get":    schema("payloads/tasks-get.response.schema.json"),
		"tasks/cancel": schema("payloads/tasks-cancel.response.schema.json"),
	}

	node, _ := identity.FromHex(strings.Repeat("0b", 32))
	peer, _ := identity.FromHex(strings.Repeat("0a", 32))
	t0 := time.Date(2026, 2, 4, 10, 0, 0, 0, time.UTC)
	now := func() time.Time { return t0 }
	svc := tasks.NewService(tasks.NewMemoryStore(tasks.MemoryStoreOptions{MaxTasks: 100}), tasks.ServiceOptions{Now: now})
	router := snap.NewRouter()
	svc.Register(router, nil)
	self := node.Address(identity.Mainnet)
	server := snap.NewServer(snap.ServerConfig{Key: node, Router: router, Now: now,
		Logger:    slog.New(slog.DiscardHandler),
		Validator: snap.NewValidator(snap.Config{Self: self, Now: now, Replay: snap.NewMemoryReplayStore(0)})})
	ctx := context.Background()

	n := 0
	build := func(method, payload string, edit func(*snap.Message)) []byte {
		t.Helper()
		n++
		m := &snap.Message{ID: "req-" + string(rune('a'+n)), Version: snap.ProtocolVersion, Type: snap.TypeRequest, Method: method,
			From: peer.Address(identity.Mainnet), To: self, Timestamp: t0.Unix(), Payload: []byte(payload)}
		if edit != nil {
			edit(m)
		}
		if err := m.Sign(peer); err != nil {
			t.Fatal(err)
		}
		raw, err := m.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		return raw
	}
	// check answers raw and holds the answer to the schemas; it returns
	// the payload decoded.
	check := func(name string, raw []byte, wantCode snap.Code) map[string]any {
		t.Helper()
		resp := server.Respond(ctx, snap.Inbound{Raw: raw, Transport: "test"})
		if resp == nil {
			t.Fatalf("%s: no answer", name)
		}
		b, err := resp.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		var env, payload map[string]any
		if err := json.Unmarshal(b, &env); err != nil {
			t.Fatal(err)
		}
		if _, ok := env["to"]; !ok && wantCode == snap.CodeInvalidMessage {
			env["to"] = peer.Address(identity.Mainnet) // addressed to no one: only to may be missing
		}
		if err := envelope.Validate(env); err != nil {
			t.Errorf("%s: the envelope %s breaks the envelope schema: %v", name, b, err)
		}
		if err := json.Unmarshal(resp.Payload, &payload); err != nil {
			t.Fatal(err)
		}
		if got := resp.ErrorCode(); got != wantCode {
			t.Fatalf("%s: answered %s, want code %d", name, resp.Payload, wantCode)
		}
		if s, ok := bySchema[resp.Method]; ok {
			p := payload
			if _, dedup := p["deduplicated"]; dedup {
				p = map[string]any{"task": p["task"]}
			}
			if err := s.Validate(p); err != nil {
				t.Errorf("%s: the payload %s breaks the %s response schema: %v", name, resp.Payload, resp.Method, err)
			}
		}
		if e, ok := payload["error"]; ok {
			if err := errSchema.Validate(e); err != nil {
				t.Errorf("%s: the error %s breaks the error schema: %v", name, resp.Payload, err)
			}
		}
		return payload
	}
	taskOf := func(p map[string]any) string {
		t.Helper()
		task, _ := p["task"].(map[string]any)
		id, _ := task["id"].(string)
		if id == "" {
			t.Fatalf("no task in %v", p)
		}
		return id
	}

	sendPayload := `{"message":{"messageId":"m1","role":"user","parts":[{"text":"hello"},` +
		`{"data":{"k":[1,2.5,"x"]},"mediaType":"application/json"},{"url":"https://example.com/a"},{"raw":"aGk=","mediaType":"text/plain"}]},` +
		`"idempotencyKey":"k-1"}`
	first := build("message/send", sendPayload, nil)
	id := taskOf(check("message/send", first, 0))
	check("message/send retried (deduplicated)", first, 0)
	check("message/send with the same key", build("message/send", sendPayload, nil), 0)
	check("message/send continuing", build("message/send",
		`{"taskId":"`+id+`","message":{"messageId":"m2","role":"user","parts":[{"text":"more"}]}}`, nil), 0)
	if _, err := svc.Transition(ctx, id, tasks.StateWorking, "on it"); err != nil {
		t.Fatal(err)
	}
	if _, err := svc.AddArtifact(ctx, id, tasks.Artifact{ArtifactID: "a1", Name: "answer", Parts: []tasks.Part{tasks.TextPart("done")}}); err != nil {
		t.Fatal(err)
	}
	check("tasks/get", build("tasks/get", `{"taskId":"`+id+`"}`, nil), 0)
	check("tasks/get historyLength 0", build("tasks/get", `{"taskId":"`+id+`","historyLength":0}`, nil), 0)
	check("tasks/get historyLength 1", build("tasks/get", `{"taskId":"`+id+`","historyLength":1}`, nil), 0)
	if _, err := svc.Transition(ctx, id, tasks.StateCompleted, ""); err != nil {
		t.Fatal(err)
	}
	check("tasks/cancel of a completed task", build("tasks/cancel", `{"taskId":"`+id+`"}`, nil), snap.CodeTaskNotCancelable)
	other := taskOf(check("message/send another", build("message/send",
		`{"message":{"messageId":"m1","role":"user","parts":[{"text":"x"}]}}`, nil), 0))
	check("tasks/cancel", build("tasks/cancel", `{"taskId":"`+other+`"}`, nil), 0)
	check("tasks/cancel again", build("tasks/cancel", `{"taskId":"`+other+`"}`, nil), 0)

	check("tasks/get of no task", build("tasks/get", `{"taskId":"nope"}`, nil), snap.CodeTaskNotFound)
	check("message/send to a terminal task", build("message/send",
		`{"taskId":"`+id+`","message":{"messageId":"m3","role":"user","parts":[{"text":"x"}]}}`, nil), snap.CodeInvalidPayload)
	check("message/send without parts", build("message/send", `{"message":{"messageId":"m1","role":"user","parts":[]}}`, nil), snap.CodeInvalidPayload)
	check("tasks/get historyLength 1001", build("tasks/get", `{"taskId":"`+id+`","historyLength":1001}`, nil), snap.CodeInvalidPayload)
	check("an unknown method", build("tasks/list", `{}`, nil), snap.CodeMethodNotFound)
	check("a stale timestamp", build("tasks/get", `{"taskId":"`+id+`"}`, func(m *snap.Message) { m.Timestamp -= 61 }), snap.CodeTimestampExpired)
	check("a version not supported", build("tasks/get", `{"taskId":"`+id+`"}`, func(m *snap.Message) { m.Version = "1.0" }), snap.CodeVersionNotSupported)
	dup := build("tasks/get", `{"taskId":"`+id+`"}`, nil)
	check("tasks/get", dup, 0)
	check("tasks/get replayed", dup, snap.CodeDuplicateMessage)
	forged := bytes.Replace(build("tasks/get", `{"taskId":"`+id+`"}`, nil), []byte(id), []byte("x"+id[1:]), 1)
	check("a forged signature", forged, snap.CodeSignatureInvalid)
	unsigned := build("tasks/get", `{"taskId":"`+id+`"}`, nil)
	unsigned = bytes.Replace(unsigned, []byte(`"sig":"`), []byte(`"x-sig":"`), 1)
	check("no signature", unsigned, snap.CodeSignatureMissing)
	check("another recipient", build("tasks/get", `{"taskId":"`+id+`"}`, func(m *snap.Message) { m.To = peer.Address(identity.Mainnet) }), snap.CodeInvalidPayload)
	check("not JSON", []byte(`{"id":`), snap.CodeInvalidMessage)
}
