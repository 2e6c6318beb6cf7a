package snap_test

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// Abridge answers, signed and addressed as the response it replaces, a
// task with its id, contextId and status only, naming what it left out,
// and any other response with the error it is given, echoing its method.
func TestAbridge(t *testing.T) {
	s, _ := newServer(t, 0)
	why := &snap.Error{Code: snap.CodeInternal, Message: "left out; tasks/get returns it", Data: map[string]any{"handled": true}}
	resp := &snap.Message{Method: "message/send", Payload: []byte(
		`{"deduplicated":true,"task":{"artifacts":[{"artifactId":"a","parts":[{"text":"big"}]}],"contextId":"c","history":[],"id":"t-1","metadata":{"k":1},"status":{"state":"completed","timestamp":"2026-01-01T00:00:00Z"}}}`)}
	resp.To = keyA.Address(identity.Mainnet)
	m := s.Abridge(resp, why)
	if m.To != resp.To || m.Method != resp.Method || m.Type != snap.TypeResponse || m.Sig == "" {
		t.Fatalf("abridged %+v, want a signed response to %s echoing %s", m, resp.To, resp.Method)
	}
	var p struct {
		Task         map[string]json.RawMessage `json:"task"`
		Deduplicated bool                       `json:"deduplicated"`
		Abridged     struct {
			Omitted []string `json:"omitted"`
			Note    string   `json:"note"`
		} `json:"abridged"`
	}
	if err := json.Unmarshal(m.Payload, &p); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range p.Task {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if !slices.Equal(keys, []string{"contextId", "id", "status"}) || string(p.Task["id"]) != `"t-1"` || !p.Deduplicated {
		t.Errorf("abridged payload %s, want the task's id, contextId and status, deduplicated kept", m.Payload)
	}
	if !slices.Equal(p.Abridged.Omitted, []string{"artifacts", "history", "metadata"}) || p.Abridged.Note != why.Message {
		t.Errorf("abridged %+v, want omitted [artifacts history metadata] and the note %q", p.Abridged, why.Message)
	}

	resp.Payload = []byte(`{"reply":"a service's"}`)
	resp.Method = "service/call"
	m = s.Abridge(resp, why)
	if e := snap.ResponseError(m.Payload); m.Method != "service/call" || m.To != resp.To || e == nil || e.Code != snap.CodeInternal || e.Data["handled"] != true {
		t.Errorf("abridged %s (%s to %s), want why echoing service/call", m.Payload, m.Method, m.To)
	}
}
