package snap

import (
	"bytes"
	"encoding/json"
)

// ResponseError returns the error a response payload carries (its
// "error" member), or nil when it carries none: a SNAP error travels as a
// response whose payload is {"error": {...}}.
func ResponseError(payload []byte) *Error {
	var p struct {
		Error *Error `json:"error"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return nil
	}
	return p.Error
}

// ErrorCode returns the code of the error m carries, 0 when it carries
// none. Only a payload that begins as an error's does ({"error": …}: the
// canonical form has no other member) is decoded.
func (m *Message) ErrorCode() Code {
	if !bytes.HasPrefix(m.Payload, []byte(`{"error":`)) {
		return 0
	}
	var p struct {
		Error struct {
			Code Code `json:"code"`
		} `json:"error"`
	}
	_ = json.Unmarshal(m.Payload, &p)
	return p.Error.Code
}
