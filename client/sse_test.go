package client

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func readAllEvents(body string, max int) ([]string, error) {
	r := newSSEReader(strings.NewReader(body), max)
	var out []string
	for {
		d, err := r.next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, string(d))
	}
}

func TestSSEReader(t *testing.T) {
	cases := []struct {
		name, body string
		want       []string
		err        error
	}{
		{"SDK framing", "data: {\"a\":1}\n\ndata: {\"b\":2}\n\n", []string{`{"a":1}`, `{"b":2}`}, nil},
		{"CRLF", "data: x\r\n\r\n", []string{"x"}, nil},
		{"CR", "data: x\r\rdata: y\r\r", []string{"x", "y"}, nil},
		{"mixed line ends", "data: a\rdata: b\n\r\ndata: c\r\n\r", []string{"a\nb", "c"}, nil},
		{"CR then CRLF is two lines", ": c\r\r\ndata: x\r\n\r\n", []string{"x"}, nil},
		{"no space", "data:x\n\n", []string{"x"}, nil},
		{"two spaces keep one", "data:  x\n\n", []string{" x"}, nil},
		{"multi-line data", "data: a\ndata: b\n\n", []string{"a\nb"}, nil},
		{"comments and fields", ": hi\nevent: e\nid: 7\nretry: 5\ndata: x\n\n", []string{"x"}, nil},
		{"event without data", "event: ping\n\ndata: x\n\n", []string{"x"}, nil},
		{"empty data", "data\n\n", []string{""}, nil},
		{"unterminated last event", "data: x\n\ndata: y\n", []string{"x"}, nil},
		{"unterminated line", "data: x\n\ndata: y", []string{"x"}, nil},
		{"at the limit", "data: 0123456789\n\n", []string{"0123456789"}, nil},
		{"too large", "data: 01234567890\n\n", nil, ErrEventTooLarge},
		{"too large over lines", "data: 01234\ndata: 56789\n\n", nil, ErrEventTooLarge}, // 11 with the LF
		// The event-stream format ignores one byte order mark at the
		// start of the stream, and only there.
		{"byte order mark", "\ufeffdata: x\n\n", []string{"x"}, nil},
		{"byte order mark later", "data: x\n\n\ufeffdata: y\n\n", []string{"x"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := readAllEvents(tc.body, 10)
			if !errors.Is(err, tc.err) || fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("%q, %v; want %q, %v", got, err, tc.want, tc.err)
			}
		})
	}
	// A line longer than the reader's buffer is still read whole.
	long := strings.Repeat("y", 40_000)
	got, err := readAllEvents("data: "+long+"\n\n", 50_000)
	if err != nil || len(got) != 1 || got[0] != long {
		t.Errorf("long line: %d events, %v", len(got), err)
	}
	if _, err := readAllEvents("data: "+long+"\n\n", 30_000); !errors.Is(err, ErrEventTooLarge) {
		t.Errorf("long line over the limit: %v", err)
	}
}

// FuzzSSEReader: the reader never panics, never returns more than its
// limit, and what a server writes (one data line per event) reads back as it was.
func FuzzSSEReader(f *testing.F) {
	for _, s := range []string{"data: {}\n\n", "data: a\r\ndata: b\r\n\r\n", ": c\n\nid: 1\ndata\n\n", "data: x", "\n\n\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		const max = 1 << 10
		r := newSSEReader(bytes.NewReader(body), max)
		for range len(body) + 1 {
			d, err := r.next()
			if err != nil {
				break
			}
			if len(d) > max {
				t.Fatalf("event of %d bytes over the limit %d", len(d), max)
			}
		}
		// A frame of one line of data reads back exactly.
		if len(body) <= max && !bytes.ContainsAny(body, "\r\n") {
			frame := append(append([]byte("data: "), body...), "\n\n"...)
			got, err := newSSEReader(bytes.NewReader(frame), max).next()
			if err != nil || !bytes.Equal(got, body) {
				t.Fatalf("frame of %q read back as %q, %v", body, got, err)
			}
		}
	})
}
