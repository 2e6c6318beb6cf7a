package tasks

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/snap"
)

// State is the state of a task in the SNAP specification's task state
// machine (see CanTransition).
type State string

// The task states of SNAP v0.1.
const (
	StateSubmitted     State = "submitted"      // received, queued for a worker
	StateWorking       State = "working"        // being processed
	StateInputRequired State = "input_required" // waiting for the requester
	StateCompleted     State = "completed"      // finished successfully (terminal)
	StateFailed        State = "failed"         // finished with an error (terminal)
	StateCanceled      State = "canceled"       // canceled (terminal)
)

// States returns every state, in the order of the spec's enum.
func States() []State {
	return []State{StateSubmitted, StateWorking, StateInputRequired, StateCompleted, StateFailed, StateCanceled}
}

// Valid reports whether s is one of the six states.
func (s State) Valid() bool {
	switch s {
	case StateSubmitted, StateWorking, StateInputRequired, StateCompleted, StateFailed, StateCanceled:
		return true
	}
	return false
}

// Terminal reports whether s is completed, failed or canceled: a state that
// never changes again.
func (s State) Terminal() bool {
	return s == StateCompleted || s == StateFailed || s == StateCanceled
}

// Role is the author of an inner message.
type Role = snap.Role

// The roles of SNAP v0.1.
const (
	RoleUser  = snap.RoleUser
	RoleAgent = snap.RoleAgent
)

// Task is a SNAP task: a unit of work spanning one or more message turns.
// Its JSON form is the task of the SNAP schema (types/task.schema.json).
//
// Owner, Version, IdempotencyKey and CreatedAt are the node's bookkeeping:
// they are kept by the Store and never serialized. Metadata is node-local
// too: it is serialized (so that stores may persist it as JSON), but the
// Service's protocol handlers strip it from responses, since the task
// schema admits no such member.
type Task struct {
	ID        string         `json:"id"`
	ContextID string         `json:"contextId,omitempty"`
	Status    Status         `json:"status"`
	History   []Message      `json:"history,omitempty"`
	Artifacts []Artifact     `json:"artifacts,omitempty"`
	Metadata  map[string]any `json:"metadata,omitempty"`

	// Owner is the P2TR address of the requester that created the task.
	Owner string `json:"-"`
	// Version counts accepted changes: 1 after Create, +1 per successful
	// Update, AppendHistory or AppendArtifact. It is the expected version
	// of optimistic concurrency and the version of task events.
	Version int64 `json:"-"`
	// IdempotencyKey is the key of the message/send request that created
	// the task, if any.
	IdempotencyKey string `json:"-"`
	// CreatedAt is when the task was created; List orders by it.
	CreatedAt time.Time `json:"-"`
}

// Status is a task's current state, when it was entered and an optional
// human-readable note (at most 1024 characters).
type Status struct {
	State     State
	Timestamp time.Time
	Message   string
}

// TimestampLayout is how status timestamps are written: RFC 3339 in UTC with
// a Z and only the fractional digits needed, which matches the ISO 8601
// pattern of the SNAP schema.
const TimestampLayout = time.RFC3339Nano

type statusJSON struct {
	State     State  `json:"state"`
	Timestamp string `json:"timestamp"`
	Message   string `json:"message,omitempty"`
}

// MarshalJSON writes {state, timestamp, message?} with the timestamp in UTC.
func (s Status) MarshalJSON() ([]byte, error) {
	return jsonv2.Marshal(statusJSON{State: s.State, Timestamp: s.Timestamp.UTC().Format(TimestampLayout), Message: s.Message})
}

// UnmarshalJSON reads {state, timestamp, message?}; the timestamp may carry
// any offset and is kept in UTC. An absent timestamp is read as the zero
// time, which Validate refuses: the SNAP schema requires it, yet the
// specification's own examples of a message/stream's final response and
// of a deduplicated answer leave it out, and a peer's task is read for
// its state and content all the same.
func (s *Status) UnmarshalJSON(b []byte) error {
	var w struct {
		State     State   `json:"state"`
		Timestamp *string `json:"timestamp"`
		Message   string  `json:"message,omitempty"`
	}
	if err := jsonv2.Unmarshal(b, &w); err != nil {
		return err
	}
	var ts time.Time
	if w.Timestamp != nil {
		t, err := time.Parse(time.RFC3339Nano, *w.Timestamp)
		if err != nil {
			return fmt.Errorf("tasks: status timestamp: %w", err)
		}
		ts = t.UTC()
	}
	*s = Status{State: w.State, Timestamp: ts, Message: w.Message}
	return nil
}

// Message is an inner message: one turn of a task's conversation, as
// message/send carries it (snap.InnerMessage; not the signed envelope
// snap.Message).
type Message = snap.InnerMessage

// Part is a unit of content (snap.Part): exactly one of Text, Raw, URL and
// Data is set.
type Part = snap.Part

// TextPart returns a text part.
func TextPart(text string) Part { return snap.TextPart(text) }

// RawPart returns a part holding base64 content of the given media type.
func RawPart(base64, mediaType string) Part { return snap.RawPart(base64, mediaType) }

// URLPart returns a part referring to content at url.
func URLPart(url string) Part { return snap.URLPart(url) }

// DataPart returns a part holding the JSON object obj.
func DataPart(obj json.RawMessage) Part { return snap.DataPart(obj) }

// Artifact is an output of a task.
type Artifact struct {
	ArtifactID string `json:"artifactId"`
	Name       string `json:"name,omitempty"`
	Parts      []Part `json:"parts"`
}

// Clone returns a deep copy of t: nothing in the copy aliases t, except the
// strings, which are immutable.
func (t *Task) Clone() *Task {
	if t == nil {
		return nil
	}
	c := *t
	c.History = snap.CloneAll(t.History)
	c.Artifacts = snap.CloneAll(t.Artifacts)
	c.Metadata = cloneMap(t.Metadata)
	return &c
}

// TrimHistory returns a copy of t that keeps only the last n messages of
// its history (none when n ≤ 0), so that a transport can shrink a response
// that is too large. The messages themselves are shared with t.
func (t *Task) TrimHistory(n int) *Task {
	if t == nil {
		return nil
	}
	c := *t
	switch {
	case n <= 0:
		c.History = nil
	case n < len(t.History):
		c.History = slices.Clone(t.History[len(t.History)-n:])
	default:
		c.History = slices.Clone(t.History)
	}
	return &c
}

// Clone returns a deep copy of a.
func (a Artifact) Clone() Artifact {
	a.Parts = snap.CloneAll(a.Parts)
	return a
}

// cloneMap deep-copies the JSON-like values of metadata: maps, slices and
// raw JSON are copied, other values (strings, numbers, booleans) are kept.
func cloneMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = cloneValue(v)
	}
	return out
}

func cloneValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		return cloneMap(x)
	case []any:
		if x == nil {
			return x
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneValue(e)
		}
		return out
	case json.RawMessage:
		return slices.Clone(x)
	case []byte:
		return slices.Clone(x)
	case []string:
		return slices.Clone(x)
	}
	return v
}
