package snap

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/snapnode/snapnode/internal/textcut"
	"strconv"
	"time"

	"github.com/snapnode/snapnode/internal/ratelimit"
)

// Code is a SNAP error code. A Code is itself an error, so a typed *Error can
// be tested with errors.Is(err, snap.CodeSignatureInvalid).
type Code int

// The error codes of SNAP v0.1. Ranges: 1xxx task and message, 2xxx
// authentication, 3xxx discovery, 4xxx transport, 5xxx system.
const (
	CodeTaskNotFound            Code = 1001
	CodeTaskNotCancelable       Code = 1002
	CodeInvalidMessage          Code = 1003
	CodeInvalidPayload          Code = 1004
	CodeContentTypeNotSupported Code = 1005
	CodePushNotification        Code = 1006
	CodeMethodNotFound          Code = 1007

	CodeSignatureInvalid  Code = 2001
	CodeSignatureMissing  Code = 2002
	CodeIdentityMismatch  Code = 2003
	CodeTimestampExpired  Code = 2004
	CodeIdentityInvalid   Code = 2005
	CodeDuplicateMessage  Code = 2006
	CodeAgentNotFound     Code = 3001
	CodeAgentCardInvalid  Code = 3002
	CodeAgentCardExpired  Code = 3003
	CodeRelayConnection   Code = 3004
	CodeSkillNotFound     Code = 3005
	CodeTransportUnavail  Code = 4001
	CodeConnectionTimeout Code = 4002
	CodeConnectionRefused Code = 4003
	CodeTLS               Code = 4004
	CodeWebSocket         Code = 4005
	CodeNostrDelivery     Code = 4006

	CodeInternal            Code = 5001
	CodeRateLimitExceeded   Code = 5002
	CodeServiceUnavailable  Code = 5003
	CodeVersionNotSupported Code = 5004
	CodeMaintenance         Code = 5005
)

var codeNames = map[Code]string{
	CodeTaskNotFound:            "TaskNotFound",
	CodeTaskNotCancelable:       "TaskNotCancelable",
	CodeInvalidMessage:          "InvalidMessage",
	CodeInvalidPayload:          "InvalidPayload",
	CodeContentTypeNotSupported: "ContentTypeNotSupported",
	CodePushNotification:        "PushNotification",
	CodeMethodNotFound:          "MethodNotFound",
	CodeSignatureInvalid:        "SignatureInvalid",
	CodeSignatureMissing:        "SignatureMissing",
	CodeIdentityMismatch:        "IdentityMismatch",
	CodeTimestampExpired:        "TimestampExpired",
	CodeIdentityInvalid:         "IdentityInvalid",
	CodeDuplicateMessage:        "DuplicateMessage",
	CodeAgentNotFound:           "AgentNotFound",
	CodeAgentCardInvalid:        "AgentCardInvalid",
	CodeAgentCardExpired:        "AgentCardExpired",
	CodeRelayConnection:         "RelayConnection",
	CodeSkillNotFound:           "SkillNotFound",
	CodeTransportUnavail:        "TransportUnavailable",
	CodeConnectionTimeout:       "ConnectionTimeout",
	CodeConnectionRefused:       "ConnectionRefused",
	CodeTLS:                     "TLSError",
	CodeWebSocket:               "WebSocketError",
	CodeNostrDelivery:           "NostrDeliveryError",
	CodeInternal:                "Internal",
	CodeRateLimitExceeded:       "RateLimitExceeded",
	CodeServiceUnavailable:      "ServiceUnavailable",
	CodeVersionNotSupported:     "VersionNotSupported",
	CodeMaintenance:             "Maintenance",
}

// Codes returns every code SNAP v0.1 defines, in ascending order.
func Codes() []Code {
	out := make([]Code, 0, len(codeNames))
	for c := Code(1000); c < 6000; c++ {
		if _, ok := codeNames[c]; ok {
			out = append(out, c)
		}
	}
	return out
}

// String returns the code's name in the spec, such as "SignatureInvalid".
func (c Code) String() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return "Code(" + strconv.Itoa(int(c)) + ")"
}

// Error makes a Code usable as an errors.Is target.
func (c Code) Error() string { return fmt.Sprintf("snap error %d (%s)", int(c), c.String()) }

// Retryable reports whether a requester may retry after this code, as the
// spec's retry table says: never for 1xxx and 2xxx, 5004 and 5005; with
// back-off for 4xxx, 5001, 5002 and 5003; 3xxx only for relay trouble.
func (c Code) Retryable() bool {
	switch {
	case c == CodeRelayConnection:
		return true
	case c >= 4000 && c < 5000:
		return true
	case c == CodeInternal, c == CodeRateLimitExceeded, c == CodeServiceUnavailable:
		return true
	}
	return false
}

// Error is a SNAP protocol error: the {code, message, data} object carried in
// a response's payload.error. Validation returns *Error values whose Data
// names the field and the rule that failed.
type Error struct {
	Code    Code           `json:"code"`
	Message string         `json:"message"`
	Data    map[string]any `json:"data,omitempty"`
}

// CodeOf returns the code of the *Error in err's chain, 0 when there is
// none: a caller that acts on one code (a task not found) asks it so.
func CodeOf(err error) Code {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Code
	}
	return 0
}

func (e *Error) Error() string {
	if len(e.Data) == 0 {
		return fmt.Sprintf("snap %d %s: %s", int(e.Code), e.Code.String(), e.Message)
	}
	d, _ := json.Marshal(e.Data)
	return fmt.Sprintf("snap %d %s: %s %s", int(e.Code), e.Code.String(), e.Message, d)
}

// Is reports whether target is e's Code, or an *Error with the same code.
func (e *Error) Is(target error) bool {
	switch t := target.(type) {
	case Code:
		return e.Code == t
	case *Error:
		return e.Code == t.Code
	}
	return false
}

// Field returns Data["field"], or "" when the error names no field.
func (e *Error) Field() string {
	s, _ := e.Data["field"].(string)
	return s
}

// NewError returns an *Error with the given code, message and data.
func NewError(code Code, message string, data map[string]any) *Error {
	return &Error{Code: code, Message: message, Data: data}
}

// maxReceived bounds how much of an offending value an error echoes back.
const maxReceived = 256

// clip shortens s to at most maxReceived bytes on a rune boundary, marking
// the cut with "…".
func clip(s string) string {
	return textcut.Shorten(s, maxReceived, "…")
}

// FieldError returns the 1004 InvalidPayload error for a field that breaks a
// rule: data {field, constraint, expected, received}. A string received is
// clipped to 256 bytes, and so is field, which may hold a member name the
// peer chose (of any length): the message stays within the error schema's
// 1024 characters and the answer within its transport.
func FieldError(field, constraint string, expected, received any) *Error {
	if s, ok := received.(string); ok {
		received = clip(s)
	}
	field = clip(field)
	return &Error{
		Code:    CodeInvalidPayload,
		Message: fmt.Sprintf("invalid %s: %s", field, constraint),
		Data: map[string]any{
			"field":      field,
			"constraint": constraint,
			"expected":   expected,
			"received":   received,
		},
	}
}

// withCode returns a copy of e carrying another code; card validation reuses
// the field rules of messages under 3002.
func (e *Error) withCode(c Code) *Error {
	return &Error{Code: c, Message: e.Message, Data: e.Data}
}

// LimitReached is the refusal of a request past a bound on how many of
// something are held at once (live tasks, queued jobs, open streams):
// code 5002 when the bound is the requester's share, 5003 when it is the
// node's, with data {"retryAfter": seconds to wait, "limit": the bound,
// "scope": whose bound it is (requester, node, newcomers…)}.
func LimitReached(code Code, message string, retryAfter, limit int, scope string) *Error {
	return NewError(code, message, map[string]any{"retryAfter": retryAfter, "limit": limit, "scope": scope})
}

// RateLimited is the 5002 refusal of a request made too soon by l: data
// {"retryAfter": whole seconds to wait, at least 1, "scope": what was
// limited (identity, key, address)}, and, when l can state it (it has a
// method Window() (limit int, window string), as internal/ratelimit's
// Limiter does), the fields of SNAP's error catalogue: "limit" requests
// in "window" ("1s", "1m").
func RateLimited(wait time.Duration, scope string, l Limiter) *Error {
	data := map[string]any{"retryAfter": ratelimit.RetryAfterSeconds(wait), "scope": scope}
	if w, ok := l.(interface{ Window() (int, string) }); ok {
		if limit, window := w.Window(); limit > 0 {
			data["limit"], data["window"] = limit, window
		}
	}
	return &Error{Code: CodeRateLimitExceeded, Message: "rate limit exceeded; retry after the given seconds", Data: data}
}
