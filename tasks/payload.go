package tasks

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/snapnode/snapnode/snap"
)

// SendRequest is the payload of a message/send (and message/stream) request.
type SendRequest struct {
	Message        Message `json:"message"`
	TaskID         string  `json:"taskId,omitempty"`
	IdempotencyKey string  `json:"idempotencyKey,omitempty"`
}

// GetRequest is the payload of a tasks/get request. A nil HistoryLength
// asks for the whole history.
type GetRequest struct {
	TaskID        string `json:"taskId"`
	HistoryLength *int   `json:"historyLength,omitempty"`
}

// CancelRequest is the payload of a tasks/cancel request.
type CancelRequest struct {
	TaskID string `json:"taskId"`
}

// TaskResponse is the payload of a successful response to message/send,
// tasks/get and tasks/cancel.
type TaskResponse struct {
	Task *Task `json:"task"`
}

var (
	_ snap.Shrinker    = (*TaskResponse)(nil)
	_ snap.TaskCarrier = (*TaskResponse)(nil)
)

// TaskID returns the id of the task the response carries.
func (r *TaskResponse) TaskID() string {
	if r.Task == nil {
		return ""
	}
	return r.Task.ID
}

// Shrink makes the response smaller for a transport that cannot carry it
// whole: it drops the older half of the task's history (the last message
// goes last). It reports false when there is no history left to drop; the
// artifacts, which are the task's results, are never dropped.
func (r *TaskResponse) Shrink() bool {
	if r.Task == nil || len(r.Task.History) == 0 {
		return false
	}
	r.Task = r.Task.TrimHistory(len(r.Task.History) / 2)
	return true
}

// The payload is the root of every field path in errors.
const root = "payload"

// ParseSendRequest decodes and validates a message/send payload against the
// request schema and seed 003. Member names match case-sensitively, and
// members the schema does not define are ignored. Every failure is a
// *snap.Error 1004 whose field is a dotted path from "payload", such as
// "payload.message.parts[0].text": structure and JSON types are checked
// over the whole payload first, then lengths, patterns and formats.
func ParseSendRequest(payload []byte) (*SendRequest, error) {
	r, e := parseSend(payload)
	if e != nil {
		return nil, e
	}
	return r, nil
}

// ParseGetRequest decodes and validates a tasks/get payload: taskId
// required, historyLength an integer in 0…1000. Failures are as for
// ParseSendRequest.
func ParseGetRequest(payload []byte) (*GetRequest, error) {
	top, e := object(payload, root)
	if e != nil {
		return nil, e
	}
	var r GetRequest
	id, e := requiredString(top, "taskId", root)
	if e != nil {
		return nil, e
	}
	r.TaskID = id
	if v, ok := top["historyLength"]; ok {
		n, e := historyLength(v, root+".historyLength")
		if e != nil {
			return nil, e
		}
		r.HistoryLength = &n
	}
	if e := snap.CheckID(root+".taskId", r.TaskID); e != nil {
		return nil, e
	}
	return &r, nil
}

// ParseCancelRequest decodes and validates a tasks/cancel payload: taskId
// required. Failures are as for ParseSendRequest.
func ParseCancelRequest(payload []byte) (*CancelRequest, error) {
	top, e := object(payload, root)
	if e != nil {
		return nil, e
	}
	id, e := requiredString(top, "taskId", root)
	if e != nil {
		return nil, e
	}
	if e := snap.CheckID(root+".taskId", id); e != nil {
		return nil, e
	}
	return &CancelRequest{TaskID: id}, nil
}

func parseSend(payload []byte) (*SendRequest, *snap.Error) {
	top, e := object(payload, root)
	if e != nil {
		return nil, e
	}
	var r SendRequest

	// Structure and types.
	mv, ok := top["message"]
	if !ok {
		return nil, required(root + ".message")
	}
	if r.Message, e = decodeMessage(mv, root+".message"); e != nil {
		return nil, e
	}
	_, hasTask := top["taskId"]
	if r.TaskID, e = optionalString(top, "taskId", root); e != nil {
		return nil, e
	}
	_, hasKey := top["idempotencyKey"]
	if r.IdempotencyKey, e = optionalString(top, "idempotencyKey", root); e != nil {
		return nil, e
	}

	// Constraints.
	if e := validateMessage(&r.Message, root+".message"); e != nil {
		return nil, e
	}
	if hasTask {
		if e := snap.CheckID(root+".taskId", r.TaskID); e != nil {
			return nil, e
		}
	}
	if hasKey {
		if e := snap.CheckID(root+".idempotencyKey", r.IdempotencyKey); e != nil {
			return nil, e
		}
	}
	return &r, nil
}

// decodeMessage reads an InnerMessage's structure and types; constraints are
// validateMessage's.
func decodeMessage(v jsontext.Value, path string) (Message, *snap.Error) {
	var m Message
	obj, e := object(v, path)
	if e != nil {
		return m, e
	}
	id, e := requiredString(obj, "messageId", path)
	if e != nil {
		return m, e
	}
	role, e := requiredString(obj, "role", path)
	if e != nil {
		return m, e
	}
	m.MessageID, m.Role = id, Role(role)
	pv, ok := obj["parts"]
	if !ok {
		return m, required(path + ".parts")
	}
	items, e := array(pv, path+".parts")
	if e != nil {
		return m, e
	}
	if len(items) > MaxParts {
		// Checked here too, so that an oversized array is not decoded.
		return m, snap.FieldError(path+".parts", "maxItems", MaxParts, len(items))
	}
	m.Parts = make([]Part, len(items))
	for i, iv := range items {
		if m.Parts[i], e = decodePart(iv, fmt.Sprintf("%s.parts[%d]", path, i)); e != nil {
			return m, e
		}
	}
	return m, nil
}

// decodePart reads a Part's structure and types. A present member is set
// even when empty, so that the exactly-one rule sees it.
func decodePart(v jsontext.Value, path string) (Part, *snap.Error) {
	var p Part
	obj, e := object(v, path)
	if e != nil {
		return p, e
	}
	for _, f := range []struct {
		name string
		dst  **string
	}{{"text", &p.Text}, {"raw", &p.Raw}, {"url", &p.URL}} {
		fv, ok := obj[f.name]
		if !ok {
			continue
		}
		s, e := str(fv, path+"."+f.name)
		if e != nil {
			return p, e
		}
		*f.dst = &s
	}
	if dv, ok := obj["data"]; ok {
		if dv.Kind() != '{' {
			return p, typeError(path+".data", "object", dv)
		}
		d := dv.Clone()
		if err := d.Compact(); err != nil {
			return p, snap.FieldError(path+".data", "syntax", "I-JSON", err.Error())
		}
		p.Data = []byte(d)
	}
	if mv, ok := obj["mediaType"]; ok {
		s, e := str(mv, path+".mediaType")
		if e != nil {
			return p, e
		}
		if s == "" {
			// Present but empty: MediaType "" would read as absent.
			return p, snap.FieldError(path+".mediaType", "format", snap.MediaTypeFormat, s)
		}
		p.MediaType = s
	}
	return p, nil
}

// historyLength reads an integer in 0…MaxHistoryLength.
func historyLength(v jsontext.Value, path string) (int, *snap.Error) {
	n, err := boundedInt(v, path, MaxHistoryLength)
	return int(n), err
}

// boundedInt reads an integer in 0…max. A number with a zero fraction
// (1.0, 1e2) is an integer, as in JSON Schema and after RFC 8785.
func boundedInt(v jsontext.Value, path string, max int64) (int64, *snap.Error) {
	if v.Kind() != '0' {
		return 0, typeError(path, "integer", v)
	}
	lit := string(v)
	f, err := strconv.ParseFloat(lit, 64)
	switch {
	case err != nil && strings.HasPrefix(lit, "-"):
		return 0, snap.FieldError(path, "minimum", 0, lit)
	case err != nil:
		return 0, snap.FieldError(path, "maximum", max, lit)
	case f != math.Trunc(f):
		return 0, snap.FieldError(path, "type", "integer", lit)
	case f < 0:
		return 0, snap.FieldError(path, "minimum", 0, lit)
	case f > float64(max):
		return 0, snap.FieldError(path, "maximum", max, lit)
	}
	return int64(f), nil
}

// object decodes a JSON object into its members. Duplicate names, invalid
// UTF-8 and other syntax errors anywhere inside are reported at their path.
func object(v []byte, path string) (map[string]jsontext.Value, *snap.Error) {
	if len(v) == 0 && path == root {
		v = []byte("{}") // an absent payload, as snap reads it
	}
	val := jsontext.Value(v)
	if k := val.Kind(); k != '{' {
		return nil, typeError(path, "object", val)
	}
	var out map[string]jsontext.Value
	if err := jsonv2.Unmarshal(v, &out); err != nil {
		return nil, syntaxError(path, err)
	}
	return out, nil
}

func array(v jsontext.Value, path string) ([]jsontext.Value, *snap.Error) {
	if v.Kind() != '[' {
		return nil, typeError(path, "array", v)
	}
	var out []jsontext.Value
	if err := jsonv2.Unmarshal(v, &out); err != nil {
		return nil, syntaxError(path, err)
	}
	return out, nil
}

func str(v jsontext.Value, path string) (string, *snap.Error) {
	if v.Kind() != '"' {
		return "", typeError(path, "string", v)
	}
	var s string
	if err := jsonv2.Unmarshal(v, &s); err != nil {
		return "", syntaxError(path, err)
	}
	return s, nil
}

func requiredString(obj map[string]jsontext.Value, name, path string) (string, *snap.Error) {
	v, ok := obj[name]
	if !ok {
		return "", required(path + "." + name)
	}
	return str(v, path+"."+name)
}

func optionalString(obj map[string]jsontext.Value, name, path string) (string, *snap.Error) {
	v, ok := obj[name]
	if !ok {
		return "", nil
	}
	return str(v, path+"."+name)
}

func required(field string) *snap.Error {
	return snap.FieldError(field, "required", "present", nil)
}

func typeError(field, want string, v jsontext.Value) *snap.Error {
	return snap.FieldError(field, "type", want, snap.KindName(v.Kind()))
}

// syntaxError reports JSON that is not I-JSON, at the path of the offending
// value when the decoder names it.
func syntaxError(path string, err error) *snap.Error {
	field := path
	var se *jsontext.SyntacticError
	if errors.As(err, &se) && se.JSONPointer != "" {
		field = path + pointerPath(string(se.JSONPointer))
	}
	return snap.FieldError(field, "syntax", "I-JSON (valid UTF-8, no duplicate names)", err.Error())
}

// pointerPath turns a JSON pointer such as /message/parts/0 into the dotted
// form .message.parts[0].
func pointerPath(p string) string {
	var b strings.Builder
	for _, tok := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		if _, err := strconv.Atoi(tok); err == nil && tok != "" {
			b.WriteString("[" + tok + "]")
			continue
		}
		b.WriteString("." + tok)
	}
	return b.String()
}
