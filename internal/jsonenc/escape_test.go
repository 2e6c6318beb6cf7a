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

// AppendString in the GoJSON form writes what Marshal writes for a
// string, valid or not; the Canonical form differs only where RFC 8785
// writes a character as it is.
func TestAppendString(t *testing.T) {
	for _, c := range []struct {
		s, canonical string
		valid        bool
	}{
		{"", `""`, true},
		{"plain <b>&</b>", `"plain <b>&</b>"`, true},
		{"tab\tquote\"back\\slash\x01\x1f", `"tab\tquote\"back\\slash\u0001\u001f"`, true},
		{"line\u2028para\u2029", "\"line\u2028para\u2029\"", true},
		{"é漢字🙂", `"é漢字🙂"`, true},
		{"bad\xffbyte\xc3", "\"bad\ufffdbyte\ufffd\"", false},
	} {
		want, err := jsonenc.Marshal(c.s)
		if err != nil {
			t.Fatal(err)
		}
		got, valid := jsonenc.AppendString(nil, c.s, jsonenc.GoJSON)
		if string(got) != string(want) || valid != c.valid {
			t.Errorf("GoJSON %q: %s, %v; want %s, %v", c.s, got, valid, want, c.valid)
		}
		got, valid = jsonenc.AppendString(nil, c.s, jsonenc.Canonical)
		if string(got) != c.canonical || valid != c.valid {
			t.Errorf("Canonical %q: %s, %v; want %s, %v", c.s, got, valid, c.canonical, c.valid)
		}
	}
}

func FuzzAppendStringAsMarshal(f *testing.F) {
	for _, s := range []string{"", "a\"b", "\u2028", "\xff", "<>&", "\x00\x7f"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := jsonenc.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := jsonenc.AppendString(nil, s, jsonenc.GoJSON); string(got) != string(want) {
			t.Errorf("%q: %s, want %s", s, got, want)
		}
	})
}
