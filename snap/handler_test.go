package snap_test

import (
	"testing"

	"github.com/snapnode/snapnode/snap"
)

func TestIsStreamRequest(t *testing.T) {
	for _, c := range []struct {
		name string
		raw  string
		want bool
	}{
		{"message/stream request", `{"id":"1","type":"request","method":"message/stream","payload":{}}`, true},
		{"tasks/resubscribe request", `{"method":"tasks/resubscribe","type":"request"}`, true},
		{"method before a large payload", `{"type":"request","method":"message/stream","payload":{"a":[1,2,{"b":"c"}]}}`, true},
		{"message/send", `{"type":"request","method":"message/send","payload":{"method":"message/stream"}}`, false},
		{"an event of a stream", `{"type":"event","method":"message/stream"}`, false},
		{"a response of a stream", `{"type":"response","method":"message/stream"}`, false},
		{"no type", `{"method":"message/stream"}`, false},
		{"method not a string", `{"type":"request","method":1}`, false},
		{"nested only", `{"payload":{"type":"request","method":"message/stream"}}`, false},
		{"not an object", `["request","message/stream"]`, false},
		{"truncated", `{"type":"request","method":"message/str`, false},
		{"empty", ``, false},
	} {
		if got := snap.IsStreamRequest([]byte(c.raw)); got != c.want {
			t.Errorf("%s: IsStreamRequest(%s) = %v, want %v", c.name, c.raw, got, c.want)
		}
	}
}

// FuzzIsStreamRequest: on any message that parses, the routing decision
// is the one its validated type and method make.
func FuzzIsStreamRequest(f *testing.F) {
	for _, s := range []string{
		`{"id":"1","version":"0.1","from":"x","type":"request","method":"message/stream","payload":{},"timestamp":1}`,
		`{"type":"request","method":"tasks/resubscribe"}`,
		`{"type":"event","method":"message/stream"}`,
		`{"method":"message/send","type":"request","payload":{"method":"message/stream"}}`,
		`[`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		got := snap.IsStreamRequest(raw)
		m, err := snap.Parse(raw)
		if err != nil {
			return
		}
		if want := m.Type == snap.TypeRequest && snap.IsStreamMethod(m.Method); got != want {
			t.Fatalf("IsStreamRequest = %v for a %s of %s", got, m.Type, m.Method)
		}
	})
}
