package snap

import (
	"encoding/json"
	"slices"
)

// Abridger is implemented by a Handler (*Server) that can answer in
// brief a request it handled whose response its transport made but
// cannot send whole: it had no memory free to write it in time (an HTTP
// transport's bound on the answers written at once). The request was
// handled, and its effects (a task made) stand: the brief answer must
// say so, never "busy, retry", which a peer would take for a request
// not handled and send again.
type Abridger interface {
	Abridge(resp *Message, why *Error) *Message
}

var _ Abridger = (*Server)(nil)

// Abridge returns, signed, a short answer in place of resp, a response
// of this server's (resp.To and resp.Method are echoed). A response that
// carries a task (message/send, message/stream, tasks/get, tasks/cancel)
// carries it abridged: its id, contextId and status only, beside
// "abridged": {"omitted": the task's members left out (history,
// artifacts, …), "note": why's message}, so that its requester learns
// the task exists and what it is doing, and reads the rest with
// tasks/get. Any other response is replaced by why, which should say
// that the request was handled.
func (s *Server) Abridge(resp *Message, why *Error) *Message {
	if p, ok := abridgedTask(resp.Payload, why.Message); ok {
		if m, err := s.sign(TypeResponse, resp.To, resp.Method, p, 0); err == nil {
			return m
		}
	}
	return s.reply(resp.To, resp.Method, nil, why, limit{})
}

// abridgedTask is the payload of a response that carries a task,
// abridged (see Server.Abridge), or false when payload carries none.
func abridgedTask(payload []byte, note string) (map[string]any, bool) {
	var top map[string]json.RawMessage
	if json.Unmarshal(payload, &top) != nil || top["task"] == nil || top["error"] != nil {
		return nil, false
	}
	var task map[string]json.RawMessage
	if json.Unmarshal(top["task"], &task) != nil || task["id"] == nil {
		return nil, false
	}
	kept := make(map[string]json.RawMessage, 3)
	omitted := []string{}
	for k, v := range task {
		switch k {
		case "id", "contextId", "status":
			kept[k] = v
		default:
			omitted = append(omitted, k)
		}
	}
	slices.Sort(omitted)
	p := map[string]any{"task": kept, "abridged": map[string]any{"omitted": omitted, "note": note}}
	if d, ok := top["deduplicated"]; ok {
		p["deduplicated"] = d
	}
	return p, true
}
