package embedded

import (
	"strconv"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/jsonenc"
)

// The relay's messages and events are written by hand, byte for byte what
// encoding/json without HTML escaping writes (jsonenc.Marshal; jsonStringLen
// measures the same form), without reflection or intermediate values.

// encodeEvent is ev as the JSON object the relay stores and sends.
func encodeEvent(ev *nostr.Event) ([]byte, error) {
	n := 128 + len(ev.ID) + len(ev.PubKey) + len(ev.Sig) + len(ev.Content)
	for _, t := range ev.Tags {
		for _, s := range t {
			n += len(s) + 3
		}
		n += 3
	}
	b := make([]byte, 0, n)
	b = append(b, `{"id":`...)
	b = appendJSONString(b, ev.ID)
	b = append(b, `,"pubkey":`...)
	b = appendJSONString(b, ev.PubKey)
	b = append(b, `,"created_at":`...)
	b = strconv.AppendInt(b, int64(ev.CreatedAt), 10)
	b = append(b, `,"kind":`...)
	b = strconv.AppendInt(b, int64(ev.Kind), 10)
	b = append(b, `,"tags":[`...)
	for i, t := range ev.Tags {
		if i > 0 {
			b = append(b, ',')
		}
		if t == nil {
			b = append(b, "null"...)
			continue
		}
		b = append(b, '[')
		for j, s := range t {
			if j > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, s)
		}
		b = append(b, ']')
	}
	b = append(b, `],"content":`...)
	b = appendJSONString(b, ev.Content)
	b = append(b, `,"sig":`...)
	b = appendJSONString(b, ev.Sig)
	return append(b, '}'), nil
}

// json is m as NIP-01 JSON (EVENT aside: see wsTransport.write).
func (m *message) json() ([]byte, error) {
	b := make([]byte, 0, 32+len(m.ref)+len(m.text))
	b = append(b, `["`...)
	b = append(b, m.label...)
	b = append(b, `",`...)
	switch m.label {
	case labelOK:
		b = appendJSONString(b, m.ref)
		b = append(b, ',')
		b = strconv.AppendBool(b, m.ok)
		b = append(b, ',')
		b = appendJSONString(b, m.text)
	case labelEOSE:
		b = appendJSONString(b, m.ref)
	case labelClosed:
		b = appendJSONString(b, m.ref)
		b = append(b, ',')
		b = appendJSONString(b, m.text)
	default:
		b = b[:2]
		b = append(b, labelNotice...)
		b = append(b, `",`...)
		b = appendJSONString(b, m.text)
	}
	return append(b, ']'), nil
}

// appendJSONString appends s as encoding/json writes a string without HTML
// escaping: the short escapes, other control characters as \u00XX,
// invalid UTF-8 as \ufffd, and U+2028 and U+2029 escaped.
func appendJSONString(b []byte, s string) []byte {
	b, _ = jsonenc.AppendString(b, s, jsonenc.GoJSON)
	return b
}
