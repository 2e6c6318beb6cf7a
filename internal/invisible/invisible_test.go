package invisible

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestEscapeJSON(t *testing.T) {
	tests := []struct{ in, want string }{
		{`{"a":"plain"}`, `{"a":"plain"}`},
		{`{"a":"é ü 漢字 😀 ❤"}`, `{"a":"é ü 漢字 😀 ❤"}`},
		{"{\"a\":\"x\u202ey\"}", `{"a":"x\u202ey"}`},                                             // right-to-left override
		{"{\"a\":\"\u2066\u2069\u200b\ufeff\u00ad\"}", `{"a":"\u2066\u2069\u200b\ufeff\u00ad"}`}, // isolates, zero-width, BOM, soft hyphen
		{"{\"a\":\"\u2028\u2029\"}", `{"a":"\u2028\u2029"}`},                                     // line and paragraph separators
		{"{\"a\":\"\U000e0041\"}", `{"a":"\udb40\udc41"}`},                                       // a tag, beyond the BMP
		{"{\"a\":\"\ue000\"}", `{"a":"\ue000"}`},                                                 // private use
		{"{\"a\":\"\u2764\ufe0f\"}", `{"a":"` + "\u2764" + `\ufe0f"}`},                           // a variation selector
		{"{\"a\":\"\u0085\u009b\"}", `{"a":"\u0085\u009b"}`},                                     // C1 controls
		{"{\"a\":\"\x7f\"}", `{"a":"\u007f"}`},                                                   // DEL
		{`{"a":"\u202e already"}`, `{"a":"\u202e already"}`},                                     // an escape stays as it is
		{"{\"a\":\"\xff\xfe\"}", "{\"a\":\"\xff\xfe\"}"},                                         // not UTF-8: left
	}
	for _, tt := range tests {
		if got := string(EscapeJSON([]byte(tt.in))); got != tt.want {
			t.Errorf("EscapeJSON(%+q) = %+q; want %+q", tt.in, got, tt.want)
		}
	}
	plain := []byte(`{"a":"plain"}`)
	if got := EscapeJSON(plain); &got[0] != &plain[0] {
		t.Error("EscapeJSON copied text with nothing to escape")
	}
}

// FuzzEscapeJSON: the escaped text of valid JSON is valid JSON with the
// same value, and holds no character Is reports beyond ASCII.
func FuzzEscapeJSON(f *testing.F) {
	for _, s := range []string{"plain", "x\u202ey", "\U000e0041\u2028", "é\u200b漢", "\x7f\u0085"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		in, err := json.Marshal(map[string]string{"k": s})
		if err != nil {
			t.Skip()
		}
		out := EscapeJSON(in)
		var a, b any
		if err := json.Unmarshal(in, &a); err != nil {
			t.Skip()
		}
		if err := json.Unmarshal(out, &b); err != nil {
			t.Fatalf("%q escaped to invalid JSON %q: %v", in, out, err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Fatalf("%q escaped to %q: %v, want %v", in, out, b, a)
		}
		for _, r := range string(out) {
			if r >= utf8.RuneSelf && Is(r) && r != utf8.RuneError {
				t.Fatalf("%q escaped to %q, which still holds %U", in, out, r)
			}
		}
	})
}

func TestEscapeText(t *testing.T) {
	tests := []struct{ in, want string }{
		{"plain\ttext\nline two\n", "plain\ttext\nline two\n"},         // lines and tabs kept
		{"é ü 漢字 😀 ❤", "é ü 漢字 😀 ❤"},                                   // graphic
		{"x\u202ey", `x\u202ey`},                                       // right-to-left override
		{"\U000e0049\U000e0047", `\udb40\udc49\udb40\udc47`},           // tags
		{"a\rb\x1b[31mc\x00d\x7f", `a\u000db\u001b[31mc\u0000d\u007f`}, // ASCII controls but LF and tab, and DEL
		{"dos\r\nlines\r\n\r", "dos\r\nlines\r\n" + `\u000d`},          // CRLF kept, a lone CR not
		{"\u2028\u0085", `\u2028\u0085`},                               // separators, C1
		{`back\slash \u202e`, `back\slash \u202e`},                     // a backslash stays
		{"\xff\xfe", "\xff\xfe"},                                       // not UTF-8: left
	}
	for _, tt := range tests {
		if got := EscapeText(tt.in); got != tt.want {
			t.Errorf("EscapeText(%+q) = %+q; want %+q", tt.in, got, tt.want)
		}
	}
}

// FuzzEscapeText: escaped text holds no character Is reports but the line
// feed and the tab (and bytes that are not UTF-8), and text with nothing
// to escape comes back the same.
func FuzzEscapeText(f *testing.F) {
	for _, s := range []string{"plain\n", "x\u202ey", "\U000e0041\u2028", "é\u200b漢\t", "\x7f\u0085\r"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := EscapeText(s)
		// Kept: LF, tab, a CR before a LF, and U+FFFD (where bytes are
		// not UTF-8).
		kept := func(t string, i int, r rune) bool {
			return r == '\n' || r == '\t' || r == utf8.RuneError || r == '\r' && strings.HasPrefix(t[i+1:], "\n") || !Is(r)
		}
		clean := true
		for i, r := range s {
			if !kept(s, i, r) {
				clean = false
			}
		}
		if clean && out != s {
			t.Fatalf("%q, with nothing to escape, came back as %q", s, out)
		}
		for i, r := range out {
			if !kept(out, i, r) {
				t.Fatalf("%q escaped to %q, which still holds %U", s, out, r)
			}
		}
	})
}

// A writer escapes what it is given and reports every byte written; a
// failed write reports none.
func TestWriter(t *testing.T) {
	var buf bytes.Buffer
	w := NewWriter(&buf)
	in := "{\"name\":\"gnp.\u202eexe\"}\n"
	if n, err := w.Write([]byte(in)); n != len(in) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(in))
	}
	if got := buf.String(); got != `{"name":"gnp.\u202eexe"}`+"\n" {
		t.Errorf("wrote %q", got)
	}
	if strings.ContainsRune(buf.String(), '\u202e') {
		t.Error("the override reached the output")
	}
	fail := NewWriter(failing{})
	if n, err := fail.Write([]byte(in)); n != 0 || err == nil {
		t.Errorf("failed Write = %d, %v; want 0 and the error", n, err)
	}
}

// A text writer escapes the controls a terminal acts on, keeping lines
// and tabs; a failed write reports none.
func TestTextWriter(t *testing.T) {
	var buf bytes.Buffer
	w := NewTextWriter(&buf)
	in := "err: HTTP 502: \x1b]0;title\a\x1b[2J\rok\tx \u202e\n"
	if n, err := w.Write([]byte(in)); n != len(in) || err != nil {
		t.Fatalf("Write = %d, %v; want %d, nil", n, err, len(in))
	}
	if got, want := buf.String(), `err: HTTP 502: \u001b]0;title\u0007\u001b[2J\u000dok`+"\tx "+`\u202e`+"\n"; got != want {
		t.Errorf("wrote %+q; want %+q", got, want)
	}
	fail := NewTextWriter(failing{})
	if n, err := fail.Write([]byte(in)); n != 0 || err == nil {
		t.Errorf("failed Write = %d, %v; want 0 and the error", n, err)
	}
}

type failing struct{}

func (failing) Write([]byte) (int, error) { return 0, errors.New("disk full") }

// TestIsDefaultIgnorable: the characters Unicode says a renderer shows
// as nothing (Default_Ignorable_Code_Point) are invisible, those that are
// not format characters among them: the combining grapheme joiner, the
// Hangul fillers and the Khmer inherent vowels, by which "pass͏word.txt"
// (a U+034F inside) read as "password.txt" wherever its text was shown
// with its invisible characters spelled out (the console, held diffs).
// Letters, marks and symbols that are seen are not.
func TestIsDefaultIgnorable(t *testing.T) {
	for _, r := range []rune{0x034F, 0x115F, 0x1160, 0x17B4, 0x17B5, 0x3164, 0xFFA0, 0x180B, 0x180E, 0xE0001, 0xE0100} {
		if !Is(r) {
			t.Errorf("Is(%U) = false: a default-ignorable character, shown as nothing", r)
		}
	}
	for _, r := range []rune{'a', 'é', 0x0301, 0x3131, 0xAC00, 0x1100, 0x17B6, 0x2800} {
		if Is(r) {
			t.Errorf("Is(%U) = true: a character that is seen", r)
		}
	}
}
