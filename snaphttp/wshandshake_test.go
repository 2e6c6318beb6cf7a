package snaphttp_test

import (
	"encoding/json"
	"io"
	"net/http"
	"testing"
)

// A WebSocket upgrade the server cannot take is refused with 400 and a
// body that names the header at fault and what it must hold, as every
// other refusal names its field: before, its data held the status alone,
// and only the library's message (in English, of its own wording) said
// which header it was.
func TestWebSocketHandshakeRefusalsNameTheHeader(t *testing.T) {
	e := start(t, nil, nil)
	for _, c := range []struct {
		name, version, key, field string
	}{
		{"no version", "", "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version"},
		{"version 8", "8", "dGhlIHNhbXBsZSBub25jZQ==", "Sec-WebSocket-Version"},
		{"no key", "13", "", "Sec-WebSocket-Key"},
		{"a key of 15 bytes", "13", "dGhlIHNhbXBsZSBub25j", "Sec-WebSocket-Key"},
		{"a key not base64", "13", "not base64 at all!!!!!==", "Sec-WebSocket-Key"},
	} {
		req, _ := http.NewRequest("GET", e.base+"/snap", nil)
		req.Header.Set("Connection", "Upgrade")
		req.Header.Set("Upgrade", "websocket")
		if c.version != "" {
			req.Header.Set("Sec-WebSocket-Version", c.version)
		}
		if c.key != "" {
			req.Header.Set("Sec-WebSocket-Key", c.key)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var body errorAnswer
		if err := json.Unmarshal(b, &body); err != nil {
			t.Fatalf("%s: %v: %s", c.name, err, b)
		}
		d := body.Error.Data
		if resp.StatusCode != http.StatusBadRequest || body.Error.Code != 1003 || d["field"] != c.field || d["reason"] == nil || d["reason"] == "" {
			t.Errorf("%s: %d %s; want 400, code 1003 and data naming the field %s and the reason", c.name, resp.StatusCode, b, c.field)
		}
		if c.field == "Sec-WebSocket-Version" && resp.Header.Get("Sec-WebSocket-Version") != "13" {
			t.Errorf("%s: Sec-WebSocket-Version %q, want 13 (RFC 6455, 4.4)", c.name, resp.Header.Get("Sec-WebSocket-Version"))
		}
	}
}
