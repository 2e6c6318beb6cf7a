package snap

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The wire codec of the task methods: each request payload is decoded and
// validated once, by the transport's router (see Params), into the typed
// params the task service takes. Every failure is a *Error 1004 whose
// field is a dotted path from "payload", such as
// "payload.message.parts[0].text".

// Bounds of the task methods' params.
const (
	// MaxHistoryLength is the largest historyLength of tasks/get.
	MaxHistoryLength = 1000
	// MaxAfterVersion is the largest afterVersion of tasks/resubscribe:
	// the largest integer a JSON number holds exactly.
	MaxAfterVersion = 1<<53 - 1
)

// SendParams are the params of a message/send (and message/stream)
// request.
type SendParams struct {
	Message        InnerMessage `json:"message"`
	TaskID         string       `json:"taskId,omitempty"`
	IdempotencyKey string       `json:"idempotencyKey,omitempty"`
}

// GetParams are the params of a tasks/get request. A nil HistoryLength
// asks for the whole history.
type GetParams struct {
	TaskID        string `json:"taskId"`
	HistoryLength *int   `json:"historyLength,omitempty"`
}

// CancelParams are the params of a tasks/cancel request.
type CancelParams struct {
	TaskID string `json:"taskId"`
}

// ResubscribeParams are the params of a tasks/resubscribe request.
// AfterVersion (snapnode's extension) is the version of the last task
// event the requester saw; nil replays every stored event.
type ResubscribeParams struct {
	TaskID       string `json:"taskId"`
	AfterVersion *int64 `json:"afterVersion,omitempty"`
}

// The payload is the root of every field path in errors.
const root = "payload"

// ParseSendParams decodes and validates a message/send payload against the
// request schema and the content limits (MaxParts and the others). Member
// names match case-sensitively, and members the schema does not define
// are ignored. Every failure is a *Error 1004 whose field is a dotted
// path from "payload", such as "payload.message.parts[0].text": structure
// and JSON types are checked over the whole payload first, then lengths,
// patterns and formats.
func ParseSendParams(payload []byte) (*SendParams, error) {
	r, e := parseSend(payload)
	if e != nil {
		return nil, e
	}
	return r, nil
}

// ParseGetParams decodes and validates a tasks/get payload: taskId
// required, historyLength an integer in 0…1000. Failures are as for
// ParseSendParams.
func ParseGetParams(payload []byte) (*GetParams, error) {
	top, id, e := taskPayload(payload)
	if e != nil {
		return nil, e
	}
	r := GetParams{TaskID: id}
	if r.HistoryLength, e = optionalInt[int](top, "historyLength", MaxHistoryLength); e != nil {
		return nil, e
	}
	if e := CheckID(root+".taskId", r.TaskID); e != nil {
		return nil, e
	}
	return &r, nil
}

// ParseCancelParams decodes and validates a tasks/cancel payload: taskId
// required. Failures are as for ParseSendParams.
func ParseCancelParams(payload []byte) (*CancelParams, error) {
	_, id, e := taskPayload(payload)
	if e != nil {
		return nil, e
	}
	if e := CheckID(root+".taskId", id); e != nil {
		return nil, e
	}
	return &CancelParams{TaskID: id}, nil
}

// taskPayload decodes the payload of a method on one task (tasks/get,
// tasks/cancel, tasks/resubscribe): an object with the string taskId,
// whose length and pattern (CheckID) its caller checks after the other
// members' types, as every payload's structure comes before its formats.
func taskPayload(payload []byte) (top map[string]jsontext.Value, taskID string, e *Error) {
	if top, e = object(payload, root); e != nil {
		return nil, "", e
	}
	if taskID, e = requiredString(top, "taskId", root); e != nil {
		return nil, "", e
	}
	return top, taskID, nil
}

func parseSend(payload []byte) (*SendParams, *Error) {
	top, e := object(payload, root)
	if e != nil {
		return nil, e
	}
	var r SendParams

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
	if e := CheckInnerMessage(root+".message", &r.Message); e != nil {
		return nil, e
	}
	if hasTask {
		if e := CheckID(root+".taskId", r.TaskID); e != nil {
			return nil, e
		}
	}
	if hasKey {
		if e := CheckID(root+".idempotencyKey", r.IdempotencyKey); e != nil {
			return nil, e
		}
	}
	return &r, nil
}

// decodeMessage reads an InnerMessage's structure and types; constraints are
// validateMessage's.
func decodeMessage(v jsontext.Value, path string) (InnerMessage, *Error) {
	var m InnerMessage
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
		return m, FieldError(path+".parts", "maxItems", MaxParts, len(items))
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
func decodePart(v jsontext.Value, path string) (Part, *Error) {
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
			return p, FieldError(path+".data", "syntax", "I-JSON", err.Error())
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
			return p, FieldError(path+".mediaType", "format", MediaTypeFormat, s)
		}
		p.MediaType = s
	}
	return p, nil
}

// optionalInt reads the member name of the params top, when present, as
// an integer in 0…max; nil when absent.
func optionalInt[N int | int64](top map[string]jsontext.Value, name string, max int64) (*N, *Error) {
	v, ok := top[name]
	if !ok {
		return nil, nil
	}
	n, e := boundedInt(v, root+"."+name, max)
	if e != nil {
		return nil, e
	}
	i := N(n)
	return &i, nil
}

// boundedInt reads an integer in 0…max. A number with a zero fraction
// (1.0, 1e2) is an integer, as in JSON Schema and after RFC 8785. A
// number out of range is echoed as the number it is (as the envelope's
// timestamp is), one with a fraction is a type failure whose received is
// the JSON type, and a literal beyond a double's range, which has no
// number to echo, is echoed as its text.
func boundedInt(v jsontext.Value, path string, max int64) (int64, *Error) {
	if v.Kind() != '0' {
		return 0, typeError(path, "integer", v)
	}
	lit := string(v)
	f, err := strconv.ParseFloat(lit, 64)
	switch {
	case err != nil && strings.HasPrefix(lit, "-"):
		return 0, FieldError(path, "minimum", 0, lit)
	case err != nil:
		return 0, FieldError(path, "maximum", max, lit)
	case f != math.Trunc(f):
		return 0, typeError(path, "integer", v)
	case f < 0:
		return 0, FieldError(path, "minimum", 0, f)
	case f > float64(max):
		return 0, FieldError(path, "maximum", max, f)
	}
	return int64(f), nil
}

// object decodes a JSON object into its members. Duplicate names, invalid
// UTF-8 and other syntax errors anywhere inside are reported at their path.
func object(v []byte, path string) (map[string]jsontext.Value, *Error) {
	if len(v) == 0 && path == root {
		v = []byte("{}") // an absent payload, as snap reads it
	}
	val := jsontext.Value(v)
	if k := val.Kind(); k != '{' {
		return nil, typeError(path, "object", val)
	}
	var out map[string]jsontext.Value
	if err := jsonv2.Unmarshal(v, &out); err != nil {
		return nil, paramSyntaxError(path, err)
	}
	return out, nil
}

func array(v jsontext.Value, path string) ([]jsontext.Value, *Error) {
	if v.Kind() != '[' {
		return nil, typeError(path, "array", v)
	}
	var out []jsontext.Value
	if err := jsonv2.Unmarshal(v, &out); err != nil {
		return nil, paramSyntaxError(path, err)
	}
	return out, nil
}

func str(v jsontext.Value, path string) (string, *Error) {
	if v.Kind() != '"' {
		return "", typeError(path, "string", v)
	}
	var s string
	if err := jsonv2.Unmarshal(v, &s); err != nil {
		return "", paramSyntaxError(path, err)
	}
	return s, nil
}

func requiredString(obj map[string]jsontext.Value, name, path string) (string, *Error) {
	v, ok := obj[name]
	if !ok {
		return "", required(path + "." + name)
	}
	return str(v, path+"."+name)
}

func optionalString(obj map[string]jsontext.Value, name, path string) (string, *Error) {
	v, ok := obj[name]
	if !ok {
		return "", nil
	}
	return str(v, path+"."+name)
}

func required(field string) *Error {
	return FieldError(field, "required", "present", nil)
}

func typeError(field, want string, v jsontext.Value) *Error {
	return FieldError(field, "type", want, KindName(v.Kind()))
}

// paramSyntaxError reports JSON that is not I-JSON, at the path of the
// offending value when the decoder names it.
func paramSyntaxError(path string, err error) *Error {
	field := path
	var se *jsontext.SyntacticError
	if errors.As(err, &se) && se.JSONPointer != "" {
		rel := pointerPath(se.JSONPointer)
		// An index first (inside an array) joins as path[i].
		head, tail, _ := strings.Cut(rel, ".")
		if _, err := strconv.Atoi(head); err == nil {
			rel = "[" + head + "]"
			if tail != "" {
				rel += "." + tail
			}
			field = path + rel
		} else {
			field = path + "." + rel
		}
	}
	return FieldError(field, "syntax", "I-JSON (valid UTF-8, no duplicate names)", err.Error())
}

// ParseResubscribeParams decodes and validates a tasks/resubscribe
// payload: taskId required, afterVersion an integer in 0…MaxAfterVersion.
// Other members are ignored, as SNAP's receivers must ignore the fields
// they do not define, and as the other methods' params do: the reference
// SDK types this payload as tasks/get's, with its historyLength. Failures
// are as for ParseSendParams.
func ParseResubscribeParams(payload []byte) (*ResubscribeParams, error) {
	top, id, e := taskPayload(payload)
	if e != nil {
		return nil, e
	}
	r := &ResubscribeParams{TaskID: id}
	if r.AfterVersion, e = optionalInt[int64](top, "afterVersion", MaxAfterVersion); e != nil {
		return nil, e
	}
	if e := CheckID(root+".taskId", r.TaskID); e != nil {
		return nil, e
	}
	return r, nil
}

// Params adapts h, which takes the params of its request, to a
// HandlerFunc: the payload is decoded and validated once, by decode
// (ParseSendParams and the others), and a payload that fails is answered
// with decode's *Error without calling h.
func Params[P any](decode func([]byte) (P, error), h func(ctx context.Context, req *Verified, p P) (any, error)) HandlerFunc {
	return func(ctx context.Context, req *Verified) (any, error) {
		p, err := decode(req.Payload)
		if err != nil {
			return nil, err
		}
		return h(ctx, req, p)
	}
}

// StreamParams is Params for a streaming method.
func StreamParams[P any](decode func([]byte) (P, error), h func(ctx context.Context, req *Verified, p P, emit func(any) error) (any, error)) StreamHandlerFunc {
	return func(ctx context.Context, req *Verified, emit func(any) error) (any, error) {
		p, err := decode(req.Payload)
		if err != nil {
			return nil, err
		}
		return h(ctx, req, p, emit)
	}
}
