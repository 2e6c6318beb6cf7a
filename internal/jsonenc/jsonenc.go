// Package jsonenc encodes JSON the way snapnode publishes and signs it:
// without HTML escaping, so that the bytes sent, measured and hashed are
// the characters of the value ("<", ">" and "&" stay as they are).
package jsonenc

import (
	"bytes"
	"encoding/json"
)

// Marshal is json.Marshal without HTML escaping.
func Marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}
