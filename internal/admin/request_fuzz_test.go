package admin

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// FuzzReadRequest feeds readRequest what a client of the socket may
// send, its first line padded (when pad is set) to within a few bytes of
// MaxMessage. It never panics; a first line over MaxMessage is refused
// as too large, and only that one; a request read, sent again as Call
// sends it, reads the same.
func FuzzReadRequest(f *testing.F) {
	for _, s := range []string{`{"op":"held"}`, `{"op":"approve","task":"t1","diff":"` + strings.Repeat("a", 64) + `"}` + "\n",
		`{"op":"deny","task":"t","reason":"no\u2028"}` + "\n" + `{"op":"rollback"}`, `{"op":"held","limit":1e3}`,
		`{"OP":"held","with_diff":true,"after":"x"}`, `{"op":"held"} trailing`, "\n", "", `{"op":"\xff"}`, `{"op":"held","op":"deny"}`} {
		f.Add([]byte(s), int8(0))
	}
	f.Add([]byte(`{"op":"held"}`+"\n"), int8(0))
	f.Add([]byte(`{"op":"held"}`), int8(1))
	f.Add([]byte(`{"op":"held"}`+"\n"), int8(-1))
	f.Fuzz(func(t *testing.T, data []byte, pad int8) {
		if pad != 0 {
			// Spaces before the JSON to make its first line MaxMessage
			// + pad bytes long.
			n := max(0, MaxMessage+int(pad)-lineLen(data))
			data = append(bytes.Repeat([]byte{' '}, n), data...)
		}
		req, err := readRequest(bytes.NewReader(data))
		if over := lineLen(data) > MaxMessage; over != errors.Is(err, errRequestTooLarge) {
			t.Fatalf("a first line of %d bytes: %v", lineLen(data), err)
		}
		if err != nil {
			return
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		again, err := readRequest(bytes.NewReader(append(b, '\n')))
		if err != nil || again != req {
			t.Fatalf("%+v sent again reads %+v, %v", req, again, err)
		}
	})
}

// lineLen is the length of data's first line, its newline aside.
func lineLen(data []byte) int {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return i
	}
	return len(data)
}
