package snap

import (
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// Type is the kind of a SNAP message.
type Type string

const (
	TypeRequest  Type = "request"  // asks for something; must be signed
	TypeResponse Type = "response" // the final answer to one request
	TypeEvent    Type = "event"    // an intermediate update of a stream
)

// Protocol limits of SNAP v0.1 (the SNAP specification's field constraints
// and size limits, and its JSON schemas).
const (
	MaxMessageSize   = 10 << 20 // whole serialized message, bytes
	MaxPayloadSize   = 1 << 20  // canonical payload, bytes
	MaxPayloadDepth  = 10       // the payload object is level 1
	MaxPayloadFields = 100      // top-level members of the payload
	MaxIDLength      = 128
	MaxMethodLength  = 64
	MaxTimestamp     = 1<<53 - 1
	SignatureHexLen  = 128
)

// MethodServiceCall is the agent-to-service method: the only request that
// may leave out to (see package servicecall).
const MethodServiceCall = "service/call"

// ProtocolVersion is the version snapnode speaks and writes.
const ProtocolVersion = "0.1"

// SupportedVersions returns the versions snapnode names as accepted (it
// accepts any 0.x, since minor versions only add): a new slice at each
// call, which the caller may keep and change.
func SupportedVersions() []string { return []string{ProtocolVersion} }

// Message is a SNAP envelope. Payload holds the JSON object as bytes so that
// it can be canonicalized exactly; after Parse or Sign it is the canonical
// (RFC 8785) form. To is empty when absent; Sig is empty when unsigned.
type Message struct {
	ID        string
	Version   string
	From      string
	To        string
	Type      Type
	Method    string
	Payload   []byte
	Timestamp int64
	Sig       string

	// canon is Payload when Payload is known to be canonical; it is only
	// trusted while it still aliases Payload, so reassigning Payload
	// forgets it.
	canon []byte
}

// canonicalPayload returns the canonical form of the payload, computing it
// only when the message was not parsed or signed with this payload.
func (m *Message) canonicalPayload() ([]byte, error) {
	if len(m.canon) > 0 && len(m.canon) == len(m.Payload) && &m.canon[0] == &m.Payload[0] {
		return m.canon, nil
	}
	if len(m.Payload) == 0 {
		return []byte("{}"), nil
	}
	return Canonicalize(m.Payload)
}

// setCanonical stores c as the payload and remembers that it is canonical.
func (m *Message) setCanonical(c []byte) {
	m.Payload = c
	m.canon = c
}

// AppendJSON appends the message's JSON form to b: the fields in the order
// of the spec, the payload canonical, to and sig omitted when empty.
func (m *Message) AppendJSON(b []byte) ([]byte, error) {
	payload, err := m.canonicalPayload()
	if err != nil {
		return b, err
	}
	str := func(b []byte, name, v string) []byte {
		b = append(b, '"')
		b = append(b, name...)
		b = append(b, `":`...)
		b, _ = jsontext.AppendQuote(b, v) // invalid UTF-8 becomes U+FFFD
		return append(b, ',')
	}
	b = append(b, '{')
	b = str(b, "id", m.ID)
	b = str(b, "version", m.Version)
	b = str(b, "from", m.From)
	if m.To != "" {
		b = str(b, "to", m.To)
	}
	b = str(b, "type", string(m.Type))
	b = str(b, "method", m.Method)
	b = append(b, `"payload":`...)
	b = append(b, payload...)
	b = append(b, `,"timestamp":`...)
	b = strconv.AppendInt(b, m.Timestamp, 10)
	if m.Sig != "" {
		b = append(b, `,"sig":`...)
		b, _ = jsontext.AppendQuote(b, m.Sig)
	}
	return append(b, '}'), nil
}

// MarshalJSON implements json.Marshaler with AppendJSON.
func (m *Message) MarshalJSON() ([]byte, error) {
	return m.AppendJSON(make([]byte, 0, 256+len(m.Payload)))
}

// UnmarshalJSON implements json.Unmarshaler with Parse: the message must pass
// every stateless check.
func (m *Message) UnmarshalJSON(b []byte) error {
	p, err := Parse(b)
	if err != nil {
		return err
	}
	*m = *p
	return nil
}
