package relay

import (
	"crypto/sha256"
	"strconv"
	"sync"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/jsonenc"
)

// maxPooledSerialization bounds the buffers kept for serializing events:
// a larger one is used once and left to the garbage collector.
const maxPooledSerialization = 64 << 10

var serializationBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

// EventID returns the NIP-01 id of ev: the SHA-256 of its serialization
// [0,pubkey,created_at,kind,tags,content], byte for byte what go-nostr's
// Event.Serialize produces, written into a reused buffer with the strings
// that need no escaping copied whole.
func EventID(ev *nostr.Event) [32]byte {
	bp := serializationBuffers.Get().(*[]byte)
	b := appendSerialized((*bp)[:0], ev)
	id := sha256.Sum256(b)
	if cap(b) <= maxPooledSerialization {
		*bp = b
		serializationBuffers.Put(bp)
	}
	return id
}

// appendSerialized appends ev's NIP-01 serialization to dst. As go-nostr
// does, the pubkey goes in as it is (a valid one is 64 hex characters).
func appendSerialized(dst []byte, ev *nostr.Event) []byte {
	dst = append(dst, `[0,"`...)
	dst = append(dst, ev.PubKey...)
	dst = append(dst, `",`...)
	dst = strconv.AppendInt(dst, int64(ev.CreatedAt), 10)
	dst = append(dst, ',')
	dst = strconv.AppendInt(dst, int64(ev.Kind), 10)
	dst = append(dst, ",["...)
	for i, tag := range ev.Tags {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, '[')
		for j, s := range tag {
			if j > 0 {
				dst = append(dst, ',')
			}
			dst = appendEscaped(dst, s)
		}
		dst = append(dst, ']')
	}
	dst = append(dst, "],"...)
	dst = appendEscaped(dst, ev.Content)
	return append(dst, ']')
}

// appendEscaped appends s as a JSON string escaped as NIP-01 says: the
// quotation mark, the reverse solidus and the control characters, with
// the short forms \b \t \n \f \r, and nothing else.
func appendEscaped(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		start = i + 1
		dst = jsonenc.AppendASCIIEscape(dst, c)
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
