package tasks

import (
	"encoding/json"
	"errors"

	"github.com/snapnode/snapnode/internal/jsonenc"
	"github.com/snapnode/snapnode/snap"
)

var _ snap.CanonicalAppender = (*TaskResponse)(nil)

// errInvalidUTF8 stops the canonical encoder where encoding/json (through
// Status's jsonv2 marshaling) would fail: the Server then takes that path
// and answers as it always did.
var errInvalidUTF8 = errors.New("tasks: invalid UTF-8 in a status")

// AppendCanonicalJSON appends the canonical (RFC 8785) JSON form of r to
// b, member by member in canonical order, without reflection: the bytes
// snap.Canonicalize makes of json.Marshal(r), which the Server signs as
// they are (snap.CanonicalAppender). Where json.Marshal would fail, or
// canonicalization would refuse the result (a data part that is not
// I-JSON), it fails too, and the Server takes the reflective path.
func (r *TaskResponse) AppendCanonicalJSON(b []byte) ([]byte, error) {
	b = append(b, `{"task":`...)
	b, err := appendTask(b, r.Task)
	if err != nil {
		return b, err
	}
	return append(b, '}'), nil
}

// appendTask appends t's canonical form; its members, in the order of
// their names' UTF-16 code units, are artifacts, contextId, history, id,
// metadata, status.
func appendTask(b []byte, t *Task) ([]byte, error) {
	if t == nil {
		return append(b, "null"...), nil
	}
	var err error
	b = append(b, '{')
	if len(t.Artifacts) > 0 {
		b = append(b, `"artifacts":`...)
		if b, err = appendList(b, t.Artifacts, appendArtifact); err != nil {
			return b, err
		}
		b = append(b, ',')
	}
	if t.ContextID != "" {
		b = append(b, `"contextId":`...)
		b, _ = appendString(b, t.ContextID)
		b = append(b, ',')
	}
	if len(t.History) > 0 {
		b = append(b, `"history":`...)
		if b, err = appendList(b, t.History, appendMessage); err != nil {
			return b, err
		}
		b = append(b, ',')
	}
	b = append(b, `"id":`...)
	b, _ = appendString(b, t.ID)
	if len(t.Metadata) > 0 {
		// Node-local, and stripped from what peers get: the reflective
		// encoder is good enough for it.
		raw, err := json.Marshal(t.Metadata)
		if err != nil {
			return b, err
		}
		b = append(b, `,"metadata":`...)
		if b, err = snap.AppendCanonical(b, raw); err != nil {
			return b, err
		}
	}
	b = append(b, `,"status":`...)
	if b, err = appendStatus(b, &t.Status); err != nil {
		return b, err
	}
	return append(b, '}'), nil
}

// appendStatus appends {message?, state, timestamp}, as Status.MarshalJSON
// writes them, canonical.
func appendStatus(b []byte, s *Status) ([]byte, error) {
	ok := true
	b = append(b, '{')
	if s.Message != "" {
		b = append(b, `"message":`...)
		b, ok = appendString(b, s.Message)
		b = append(b, ',')
	}
	b = append(b, `"state":`...)
	b, okState := appendString(b, string(s.State))
	if !ok || !okState {
		return b, errInvalidUTF8
	}
	b = append(b, `,"timestamp":"`...)
	b = s.Timestamp.UTC().AppendFormat(b, TimestampLayout)
	return append(b, `"}`...), nil
}

// appendMessage appends {messageId, parts, role}.
func appendMessage(b []byte, m *Message) ([]byte, error) {
	b = append(b, `{"messageId":`...)
	b, _ = appendString(b, m.MessageID)
	b = append(b, `,"parts":`...)
	b, err := appendParts(b, m.Parts)
	if err != nil {
		return b, err
	}
	b = append(b, `,"role":`...)
	b, _ = appendString(b, string(m.Role))
	return append(b, '}'), nil
}

// appendArtifact appends {artifactId, name?, parts}.
func appendArtifact(b []byte, a *Artifact) ([]byte, error) {
	b = append(b, `{"artifactId":`...)
	b, _ = appendString(b, a.ArtifactID)
	if a.Name != "" {
		b = append(b, `,"name":`...)
		b, _ = appendString(b, a.Name)
	}
	b = append(b, `,"parts":`...)
	b, err := appendParts(b, a.Parts)
	if err != nil {
		return b, err
	}
	return append(b, '}'), nil
}

// appendParts appends a list of parts, null when nil (encoding/json's
// form of a nil slice).
func appendParts(b []byte, parts []Part) ([]byte, error) {
	if parts == nil {
		return append(b, "null"...), nil
	}
	return appendList(b, parts, appendPart)
}

// appendList appends items as a JSON array, each written by appendItem.
func appendList[T any](b []byte, items []T, appendItem func([]byte, *T) ([]byte, error)) ([]byte, error) {
	b = append(b, '[')
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = appendItem(b, &items[i]); err != nil {
			return b, err
		}
	}
	return append(b, ']'), nil
}

// appendPart appends {data?, mediaType?, raw?, text?, url?}.
func appendPart(b []byte, p *Part) ([]byte, error) {
	b = append(b, '{')
	sep := false
	member := func(b []byte, name string) []byte {
		if sep {
			b = append(b, ',')
		}
		sep = true
		b = append(b, '"')
		b = append(b, name...)
		return append(b, `":`...)
	}
	if p.Data != nil {
		b = member(b, "data")
		var err error
		if b, err = snap.AppendCanonical(b, p.Data); err != nil {
			return b, err
		}
	}
	if p.MediaType != "" {
		b = member(b, "mediaType")
		b, _ = appendString(b, p.MediaType)
	}
	if p.Raw != nil {
		b = member(b, "raw")
		b, _ = appendString(b, *p.Raw)
	}
	if p.Text != nil {
		b = member(b, "text")
		b, _ = appendString(b, *p.Text)
	}
	if p.URL != nil {
		b = member(b, "url")
		b, _ = appendString(b, *p.URL)
	}
	return append(b, '}'), nil
}

// appendString appends s as an RFC 8785 string (jsonenc.Canonical); ok
// is false when s is not valid UTF-8, each bad byte written as U+FFFD, as
// encoding/json writes it.
func appendString(b []byte, s string) (_ []byte, ok bool) {
	return jsonenc.AppendString(b, s, jsonenc.Canonical)
}
