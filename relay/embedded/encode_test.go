package embedded

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/jsonenc"
)

// encodeCases are events and messages whose JSON must read back as they
// were: escapes, non-ASCII text, empty and absent tags.
func encodeCases() []*nostr.Event {
	base := func(content string, tags nostr.Tags) *nostr.Event {
		return &nostr.Event{ID: strings.Repeat("ab", 32), PubKey: strings.Repeat("cd", 32), CreatedAt: 1700000000,
			Kind: 21339, Tags: tags, Content: content, Sig: strings.Repeat("ef", 64)}
	}
	return []*nostr.Event{
		base("plain", nostr.Tags{{"p", strings.Repeat("12", 32)}, {"e", "x", "wss://r"}}),
		base("quote \" backslash \\ newline \n tab \t nul \x00 del \x7f <&> é 🙂 \u2028", nostr.Tags{{"t", "<script>"}}),
		base("", nostr.Tags{}),
		base("", nil),
		base("", nostr.Tags{{}, {""}}),
	}
}

// Each event goes out as JSON that decodes back to the same event.
func TestEncodeEventRoundTrips(t *testing.T) {
	for _, ev := range encodeCases() {
		b, err := encodeEvent(ev)
		if err != nil {
			t.Fatal(err)
		}
		var back nostr.Event
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		if want := ev.Tags; want == nil {
			ev = &nostr.Event{ID: ev.ID, PubKey: ev.PubKey, CreatedAt: ev.CreatedAt, Kind: ev.Kind, Tags: nostr.Tags{}, Content: ev.Content, Sig: ev.Sig}
		}
		if back.ID != ev.ID || back.PubKey != ev.PubKey || back.CreatedAt != ev.CreatedAt || back.Kind != ev.Kind ||
			back.Content != ev.Content || back.Sig != ev.Sig || len(back.Tags) != len(ev.Tags) {
			t.Fatalf("%s decodes to %+v, want %+v", b, back, ev)
		}
		for i := range ev.Tags {
			if strings.Join(back.Tags[i], "\x00") != strings.Join(ev.Tags[i], "\x00") || back.Tags[i] == nil {
				t.Fatalf("tag %d: %q, want %q", i, back.Tags[i], ev.Tags[i])
			}
		}
		if !strings.Contains(string(b), `"tags":[`) {
			t.Fatalf("%s: tags must be an array", b)
		}
	}
	for _, m := range []message{
		{label: labelOK, ref: strings.Repeat("ab", 32), ok: true, text: ""},
		{label: labelOK, ref: "x", ok: false, text: "invalid: \"bad\" <tag> \n"},
		{label: labelEOSE, ref: "sub \"1\""},
		{label: labelClosed, ref: "s", text: "rate-limited: é"},
		{label: labelNotice, text: "error: \x01"},
	} {
		b, err := m.json()
		if err != nil {
			t.Fatal(err)
		}
		var arr []any
		if err := json.Unmarshal(b, &arr); err != nil || arr[0] != m.label {
			t.Fatalf("%s: %v", b, err)
		}
		switch m.label {
		case labelOK:
			if arr[1] != m.ref || arr[2] != m.ok || arr[3] != m.text || len(arr) != 4 {
				t.Fatalf("%s, want %+v", b, m)
			}
		case labelEOSE:
			if arr[1] != m.ref || len(arr) != 2 {
				t.Fatalf("%s, want %+v", b, m)
			}
		case labelClosed:
			if arr[1] != m.ref || arr[2] != m.text || len(arr) != 3 {
				t.Fatalf("%s, want %+v", b, m)
			}
		default:
			if arr[1] != m.text || len(arr) != 2 {
				t.Fatalf("%s, want %+v", b, m)
			}
		}
	}
}

// An event and the OK and EOSE a requester gets are encoded without
// reflection: one allocation each, the encoded bytes.
func TestEncodeAllocations(t *testing.T) {
	ev := encodeCases()[0]
	ev.Content = strings.Repeat("sealed+/=", 150)
	ok := message{label: labelOK, ref: ev.ID, ok: true}
	eose := message{label: labelEOSE, ref: "sub-1"}
	if n := testing.AllocsPerRun(100, func() { encodeEvent(ev); ok.json(); eose.json() }); n > 3 {
		t.Fatalf("%.0f allocations, want at most 3", n)
	}
}

// wireEvent is the event as encoding/json writes it: the reference the
// relay's own encoder must match byte for byte.
type wireEvent struct {
	ID        string     `json:"id"`
	PubKey    string     `json:"pubkey"`
	CreatedAt int64      `json:"created_at"`
	Kind      int        `json:"kind"`
	Tags      [][]string `json:"tags"`
	Content   string     `json:"content"`
	Sig       string     `json:"sig"`
}

func FuzzEncodeEvent(f *testing.F) {
	for _, ev := range encodeCases() {
		var t0, t1 string
		if len(ev.Tags) > 0 && len(ev.Tags[0]) > 1 {
			t0, t1 = ev.Tags[0][0], ev.Tags[0][1]
		}
		f.Add(ev.ID, int64(ev.CreatedAt), ev.Kind, ev.Content, t0, t1, true)
	}
	f.Add("\xff\xfe", int64(-3), -1, "bad \xc3 utf-8 \u2029", "\x1f", "\u2028", false)
	f.Fuzz(func(t *testing.T, id string, created int64, kind int, content, tag0, tag1 string, withTags bool) {
		ev := &nostr.Event{ID: id, PubKey: tag1, CreatedAt: nostr.Timestamp(created), Kind: kind, Content: content, Sig: tag0}
		if withTags {
			ev.Tags = nostr.Tags{{tag0, tag1}, nil, {}, {content}}
		}
		tags := make([][]string, len(ev.Tags))
		for i, tg := range ev.Tags {
			tags[i] = tg
		}
		want, err := jsonenc.Marshal(wireEvent{ev.ID, ev.PubKey, int64(ev.CreatedAt), ev.Kind, tags, ev.Content, ev.Sig})
		if err != nil {
			t.Skip()
		}
		got, err := encodeEvent(ev)
		if err != nil || string(got) != string(want) {
			t.Fatalf("encodeEvent\n got %s (%v)\nwant %s", got, err, want)
		}
		for _, m := range []message{
			{label: labelOK, ref: id, ok: withTags, text: content},
			{label: labelEOSE, ref: tag0},
			{label: labelClosed, ref: tag0, text: tag1},
			{label: labelNotice, text: content},
		} {
			var ref []any
			switch m.label {
			case labelOK:
				ref = []any{labelOK, m.ref, m.ok, m.text}
			case labelEOSE:
				ref = []any{labelEOSE, m.ref}
			case labelClosed:
				ref = []any{labelClosed, m.ref, m.text}
			default:
				ref = []any{labelNotice, m.text}
			}
			want, _ := jsonenc.Marshal(ref)
			if got, _ := m.json(); string(got) != string(want) {
				t.Fatalf("%s\n got %s\nwant %s", m.label, got, want)
			}
		}
	})
}
