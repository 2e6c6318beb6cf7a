package snap

import "encoding/json"

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
