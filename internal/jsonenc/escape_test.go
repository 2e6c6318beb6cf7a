package jsonenc_test

import (
	"encoding/json"
	"testing"

	"github.com/snapnode/snapnode/internal/jsonenc"
)

// Every byte AppendASCIIEscape takes is escaped as encoding/json escapes
// it inside a string.
func TestAppendASCIIEscapeAsEncodingJSON(t *testing.T) {
	bytes := []byte{'"', '\\'}
	for c := range byte(0x20) {
		bytes = append(bytes, c)
	}
	for _, c := range bytes {
		want, err := json.Marshal(string([]byte{c}))
		if err != nil {
			t.Fatal(err)
		}
		got := append(append([]byte{'"'}, jsonenc.AppendASCIIEscape(nil, c)...), '"')
		if string(got) != string(want) {
			t.Errorf("byte %#02x: %s, want %s", c, got, want)
		}
	}
}
