package snap_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

func TestNewID(t *testing.T) {
	seen := make(map[string]bool)
	for range 1000 {
		id := snap.NewID()
		if !uuidV4.MatchString(id) {
			t.Fatalf("NewID() = %q, not a v4 UUID", id)
		}
		if seen[id] {
			t.Fatalf("NewID() repeated %q", id)
		}
		seen[id] = true
	}
}

func TestPrepare(t *testing.T) {
	const from = "bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397"
	now := time.Unix(1738627200, 0)
	tests := []struct {
		name string
		in   string
		from string
		// want holds the expected raw JSON of some members; "" means
		// the member must be absent. "<uuid>" means any v4 UUID.
		want map[string]string
		// exact, when set, is the whole expected output.
		exact string
	}{
		{
			name: "empty object",
			in:   `{}`,
			from: from,
			want: map[string]string{"id": "<uuid>", "version": `"0.1"`, "from": `"` + from + `"`,
				"type": `"request"`, "timestamp": "1738627200", "sig": ""},
		},
		{
			name: "present fields kept",
			in:   `{"id":"x1","version":"0.2","from":"tb1pbad","type":"event","timestamp":1.7e9,"method":"message/send","payload":{"b":1,"a":"<&>"}}`,
			from: from,
			exact: `{"id":"x1","version":"0.2","from":"tb1pbad","type":"event","timestamp":1.7e9,` +
				`"method":"message/send","payload":{"b":1,"a":"<&>"}}`,
		},
		{
			name:  "bytes and white space kept, members appended",
			in:    " {\n  \"method\" : \"message/send\",\n  \"x-extra\": [1, 2.50] ,\"payload\":{}\n} \n",
			from:  from,
			exact: " {\n  \"method\" : \"message/send\",\n  \"x-extra\": [1, 2.50] ,\"payload\":{}\n,\"id\":\"<uuid>\",\"version\":\"0.1\",\"from\":\"" + from + "\",\"type\":\"request\",\"timestamp\":1738627200} \n",
		},
		{
			name: "no from given",
			in:   `{"method":"message/send"}`,
			from: "",
			want: map[string]string{"from": "", "version": `"0.1"`, "method": `"message/send"`},
		},
		{
			name: "null is present, not absent",
			in:   `{"id":null}`,
			from: from,
			want: map[string]string{"id": "null"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := snap.Prepare([]byte(tt.in), tt.from, now)
			if err != nil {
				t.Fatal(err)
			}
			var top map[string]json.RawMessage
			if err := json.Unmarshal(out, &top); err != nil {
				t.Fatalf("output is not a JSON object: %v\n%s", err, out)
			}
			if tt.exact != "" {
				want := tt.exact
				if id, ok := top["id"]; ok && uuidV4.MatchString(trimQuotes(id)) {
					want = regexp.MustCompile(`<uuid>`).ReplaceAllLiteralString(want, trimQuotes(id))
				}
				if string(out) != want {
					t.Errorf("got  %s\nwant %s", out, want)
				}
			}
			for name, want := range tt.want {
				got, ok := top[name]
				switch {
				case want == "" && ok:
					t.Errorf("%s = %s, want absent", name, got)
				case want == "":
				case !ok:
					t.Errorf("%s absent, want %s", name, want)
				case want == "<uuid>":
					if !uuidV4.MatchString(trimQuotes(got)) {
						t.Errorf("%s = %s, want a v4 UUID", name, got)
					}
				case string(got) != want:
					t.Errorf("%s = %s, want %s", name, got, want)
				}
			}
		})
	}
}

func trimQuotes(b []byte) string {
	var s string
	if json.Unmarshal(b, &s) != nil {
		return ""
	}
	return s
}

func TestPrepareRejects(t *testing.T) {
	for _, in := range []string{``, `not json`, `[]`, `"s"`, `{"a":1,"a":2}`, `{"a":1} {}`, `{"a":1e999}`} {
		_, err := snap.Prepare([]byte(in), "", time.Unix(0, 0))
		var se *snap.Error
		if !errors.As(err, &se) || se.Code != snap.CodeInvalidMessage {
			t.Errorf("Prepare(%q) = %v, want a 1003 *snap.Error", in, err)
		}
	}
}

// TestPrepareSignValidate: what Prepare fills is enough for a message that
// parses, signs and validates.
func TestPrepareSignValidate(t *testing.T) {
	k, err := identity.FromHex("0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []identity.Network{identity.Mainnet, identity.Testnet} {
		now := time.Unix(1738627200, 0)
		raw, err := snap.Prepare([]byte(`{"method":"message/send","payload":{"message":{"role":"user"}},"x":1}`), k.Address(n), now)
		if err != nil {
			t.Fatal(err)
		}
		m, err := snap.Parse(raw)
		if err != nil {
			t.Fatalf("Parse(%s): %v", raw, err)
		}
		if m.Type != snap.TypeRequest || m.Version != snap.ProtocolVersion || m.From != k.Address(n) || m.Timestamp != now.Unix() {
			t.Errorf("unexpected message %+v", m)
		}
		if err := m.Sign(k); err != nil {
			t.Fatal(err)
		}
		signed, err := m.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		v := snap.NewValidator(snap.Config{Now: func() time.Time { return now }})
		got, err := v.Validate(context.Background(), signed)
		if err != nil {
			t.Fatalf("Validate: %v", err)
		}
		if !got.Signed {
			t.Error("not signed")
		}
	}
}

func TestPrepareCard(t *testing.T) {
	const id = "bc1p9vr5nzfrhhntjaulmer02vydas60ge8sry567kmxhcc0c0stxqgsgse397"
	tests := []struct{ in, want string }{
		{`{"name":"a"}`, `{"name":"a","identity":"` + id + `"}`},
		{`{}`, `{"identity":"` + id + `"}`},
		{`{"identity":"","name":"a"}`, `{"identity":"` + id + `","name":"a"}`},
		{`{"identity": null ,"name":"a"}`, `{"identity": "` + id + `" ,"name":"a"}`},
		{`{"identity":"tb1pother"}`, `{"identity":"tb1pother"}`},
		{`{"identity":5}`, `{"identity":5}`},
	}
	for _, tt := range tests {
		got, err := snap.PrepareCard([]byte(tt.in), id)
		if err != nil {
			t.Errorf("PrepareCard(%s): %v", tt.in, err)
			continue
		}
		if string(got) != tt.want {
			t.Errorf("PrepareCard(%s)\n got  %s\n want %s", tt.in, got, tt.want)
		}
	}
	for _, in := range []string{``, `nope`, `[]`, `"x"`, `{"identity":"","identity":"x"}`} {
		_, err := snap.PrepareCard([]byte(in), id)
		var se *snap.Error
		if !errors.As(err, &se) || se.Code != snap.CodeAgentCardInvalid {
			t.Errorf("PrepareCard(%q) = %v, want a 3002 *snap.Error", in, err)
		}
	}
}
