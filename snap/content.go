package snap

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/url"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// Limits of SNAP v0.1 on the content of inner messages and artifacts.
// Sizes are bytes; 1 MB is 2^20 bytes.
const (
	MaxParts           = 100        // parts per message and per artifact
	MaxTextSize        = 10 << 20   // text part, bytes of UTF-8
	MaxRawSize         = 10 << 20   // raw part, decoded bytes
	MaxRawLength       = 14_000_000 // raw part, base64 characters (schema maxLength)
	MaxDataSize        = 1 << 20    // data part, bytes of compact JSON
	MaxURLLength       = 2048       // url part
	MaxMediaTypeLength = 128        // mediaType
)

// Role is the author of an inner message.
type Role string

// The roles of SNAP v0.1.
const (
	RoleUser  Role = "user"
	RoleAgent Role = "agent"
)

// InnerMessage is one turn of a task's conversation (InnerMessage in the
// SNAP schema), as message/send carries it; not the signed envelope
// Message.
type InnerMessage struct {
	MessageID string `json:"messageId"`
	Role      Role   `json:"role"`
	Parts     []Part `json:"parts"`
}

// Part is a unit of content. Exactly one of Text, Raw, URL and Data is set;
// the pointers tell an empty text from an absent one.
//
// Raw is base64 (standard alphabet) and requires MediaType. Data is a JSON
// object, kept as its bytes.
type Part struct {
	Text      *string         `json:"text,omitzero"`
	Raw       *string         `json:"raw,omitzero"`
	URL       *string         `json:"url,omitzero"`
	Data      json.RawMessage `json:"data,omitzero"`
	MediaType string          `json:"mediaType,omitempty"`
}

// TextPart returns a text part.
func TextPart(text string) Part { return Part{Text: &text} }

// RawPart returns a part holding base64 content of the given media type.
func RawPart(base64, mediaType string) Part { return Part{Raw: &base64, MediaType: mediaType} }

// URLPart returns a part referring to content at url.
func URLPart(url string) Part { return Part{URL: &url} }

// DataPart returns a part holding the JSON object obj.
func DataPart(obj json.RawMessage) Part { return Part{Data: obj} }

// Clone returns a deep copy of m.
func (m InnerMessage) Clone() InnerMessage {
	m.Parts = CloneAll(m.Parts)
	return m
}

// Clone returns a deep copy of p.
func (p Part) Clone() Part {
	p.Text = clonePtr(p.Text)
	p.Raw = clonePtr(p.Raw)
	p.URL = clonePtr(p.URL)
	if p.Data != nil {
		p.Data = slices.Clone(p.Data)
	}
	return p
}

func clonePtr(s *string) *string {
	if s == nil {
		return nil
	}
	v := *s
	return &v
}

// CloneAll returns a deep copy of xs, each element copied by its Clone
// method (nil stays nil): for parts, messages, artifacts.
func CloneAll[T interface{ Clone() T }](xs []T) []T {
	if xs == nil {
		return nil
	}
	out := make([]T, len(xs))
	for i, x := range xs {
		out[i] = x.Clone()
	}
	return out
}

// Validate checks m against the InnerMessage schema: messageId, role,
// 1–100 parts and every part. A failure is a *Error 1004 whose field is a
// path under "message".
func (m *InnerMessage) Validate() error {
	if e := CheckInnerMessage("message", m); e != nil {
		return e
	}
	return nil
}

// Validate checks p: exactly one content field, its limits and the media
// type. A failure is a *Error 1004 whose field is a path under "part".
func (p *Part) Validate() error {
	if e := checkPart("part", p); e != nil {
		return e
	}
	return nil
}

// CheckInnerMessage checks m as Validate does, naming fields under path.
func CheckInnerMessage(path string, m *InnerMessage) *Error {
	if e := CheckID(path+".messageId", m.MessageID); e != nil {
		return e
	}
	if m.Role != RoleUser && m.Role != RoleAgent {
		return FieldError(path+".role", "enum", []string{string(RoleUser), string(RoleAgent)}, string(m.Role))
	}
	return CheckParts(path+".parts", m.Parts)
}

// CheckParts checks 1–100 parts and each of them, naming fields under
// path (path[i]).
func CheckParts(path string, parts []Part) *Error {
	switch n := len(parts); {
	case n < 1:
		return FieldError(path, "minItems", 1, n)
	case n > MaxParts:
		return FieldError(path, "maxItems", MaxParts, n)
	}
	for i := range parts {
		if e := checkPart(fmt.Sprintf("%s[%d]", path, i), &parts[i]); e != nil {
			return e
		}
	}
	return nil
}

// contentFields names the content members of a part; exactly one is set.
func contentFields() []string { return []string{"text", "raw", "url", "data"} }

func checkPart(path string, p *Part) *Error {
	fields := contentFields()
	present := make([]string, 0, 1)
	for i, set := range []bool{p.Text != nil, p.Raw != nil, p.URL != nil, p.Data != nil} {
		if set {
			present = append(present, fields[i])
		}
	}
	if len(present) != 1 {
		return FieldError(path, "oneOf", fields, present)
	}
	switch {
	case p.Text != nil:
		s := *p.Text
		if len(s) > MaxTextSize {
			return FieldError(path+".text", "maxLength", MaxTextSize, len(s))
		}
		if !utf8.ValidString(s) {
			return FieldError(path+".text", "format", "UTF-8", len(s))
		}
	case p.Raw != nil:
		if p.MediaType == "" {
			return FieldError(path+".mediaType", "required", "present", nil)
		}
		if e := checkRaw(*p.Raw, path+".raw"); e != nil {
			return e
		}
	case p.URL != nil:
		u := *p.URL
		if len(u) > MaxURLLength {
			return FieldError(path+".url", "maxLength", MaxURLLength, len(u))
		}
		if !isAbsoluteURI(u) {
			return FieldError(path+".url", "format", "absolute URI", u)
		}
	case p.Data != nil:
		v := jsontext.Value(p.Data)
		if v.Kind() != '{' || !v.IsValid() {
			return FieldError(path+".data", "type", "object", KindName(v.Kind()))
		}
		if n := compactLen(p.Data); n > MaxDataSize {
			return FieldError(path+".data", "maxSize", MaxDataSize, n)
		}
	}
	if p.MediaType != "" {
		if len(p.MediaType) > MaxMediaTypeLength {
			return FieldError(path+".mediaType", "maxLength", MaxMediaTypeLength, p.MediaType)
		}
		if !IsMediaType(p.MediaType) {
			return FieldError(path+".mediaType", "format", MediaTypeFormat, p.MediaType)
		}
	}
	return nil
}

// checkRaw requires standard base64 (padding optional) that decodes to at
// most MaxRawSize bytes.
func checkRaw(s, field string) *Error {
	if len(s) > MaxRawLength {
		return FieldError(field, "maxLength", MaxRawLength, len(s))
	}
	enc := base64.StdEncoding
	if len(s)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	// Go's decoder skips CR and LF; base64 in JSON has no reason to hold
	// them, and a peer's decoder might not skip them.
	if strings.ContainsAny(s, "\r\n") {
		return FieldError(field, "format", "base64", s)
	}
	if enc.DecodedLen(len(s)) > MaxRawSize+2 {
		return FieldError(field, "maxSize", MaxRawSize, enc.DecodedLen(len(s)))
	}
	// Decode as a stream: validate and count without holding the content.
	n, err := io.Copy(io.Discard, base64.NewDecoder(enc.Strict(), strings.NewReader(s)))
	if err != nil {
		return FieldError(field, "format", "base64", s)
	}
	if n > MaxRawSize {
		return FieldError(field, "maxSize", MaxRawSize, n)
	}
	return nil
}

// isAbsoluteURI reports whether s is an RFC 3986 URI with a scheme: ASCII
// without spaces, controls or the characters RFC 3986 excludes, and
// accepted by net/url.
func isAbsoluteURI(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"<>\^`+"`{|}", c) >= 0 {
			return false
		}
	}
	u, err := url.Parse(s)
	return err == nil && u.Scheme != "" && (u.Opaque != "" || u.Host != "" || u.Path != "")
}

// compactLen returns the length of v without insignificant whitespace.
func compactLen(b []byte) int {
	v := jsontext.Value(b).Clone()
	if err := v.Compact(); err != nil {
		return len(b)
	}
	return len(v)
}
