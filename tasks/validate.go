package tasks

import (
	"encoding/base64"
	"fmt"
	"io"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/snapnode/snapnode/snap"
)

// Limits of SNAP v0.1 on tasks and their content (seed 003, the SNAP schemas,
// SPEC-NOTES 1.9 and 1.20). Sizes are bytes; 1 MB is 2^20 bytes, as in snap.
const (
	MaxIDLength        = 128        // task, context, message and artifact ids, idempotency keys
	MaxParts           = 100        // parts per message and per artifact
	MaxArtifacts       = 100        // artifacts per task
	MaxTextSize        = 10 << 20   // text part, bytes of UTF-8
	MaxRawSize         = 10 << 20   // raw part, decoded bytes
	MaxRawLength       = 14_000_000 // raw part, base64 characters (schema maxLength)
	MaxDataSize        = 1 << 20    // data part, bytes of compact JSON
	MaxURLLength       = 2048       // url part
	MaxMediaTypeLength = 128        // mediaType
	MaxArtifactName    = 256        // artifact name, characters
	MaxStatusMessage   = 1024       // status message, characters
	MaxHistoryLength   = 1000       // historyLength of tasks/get
)

// contentFields names the content members of a part; exactly one is set.
func contentFields() []string { return []string{"text", "raw", "url", "data"} }

// Validate checks m against the InnerMessage schema and seed 003: messageId,
// role, 1–100 parts and every part. A failure is a *snap.Error 1004 whose
// field is a path under "message".
func (m *Message) Validate() error {
	if e := validateMessage(m, "message"); e != nil {
		return e
	}
	return nil
}

// Validate checks a against the Artifact schema and seed 003. A failure is
// a *snap.Error 1004 whose field is a path under "artifact".
func (a *Artifact) Validate() error {
	if e := validateArtifact(a, "artifact"); e != nil {
		return e
	}
	return nil
}

// Validate checks p: exactly one content field, its limits and the media
// type. A failure is a *snap.Error 1004 whose field is a path under "part".
func (p *Part) Validate() error {
	if e := validatePart(p, "part"); e != nil {
		return e
	}
	return nil
}

// Validate checks t against the Task schema: ids, status (state, timestamp,
// note), at most 100 artifacts, and every message and artifact. A failure
// is a *snap.Error 1004 whose field is a path under "task".
func (t *Task) Validate() error {
	if e := validateTask(t, "task"); e != nil {
		return e
	}
	return nil
}

func validateTask(t *Task, path string) *snap.Error {
	if e := snap.CheckID(path+".id", t.ID); e != nil {
		return e
	}
	if t.ContextID != "" {
		if e := snap.CheckID(path+".contextId", t.ContextID); e != nil {
			return e
		}
	}
	if !t.Status.State.Valid() {
		return snap.FieldError(path+".status.state", "enum", stateNames(), string(t.Status.State))
	}
	if t.Status.Timestamp.IsZero() {
		return snap.FieldError(path+".status.timestamp", "required", "present", nil)
	}
	if y := t.Status.Timestamp.UTC().Year(); y < 0 || y > 9999 {
		return snap.FieldError(path+".status.timestamp", "format", "an RFC 3339 time between years 0000 and 9999", y)
	}
	if n := utf8.RuneCountInString(t.Status.Message); n > MaxStatusMessage {
		return snap.FieldError(path+".status.message", "maxLength", MaxStatusMessage, n)
	}
	for i := range t.History {
		if e := validateMessage(&t.History[i], fmt.Sprintf("%s.history[%d]", path, i)); e != nil {
			return e
		}
	}
	if n := len(t.Artifacts); n > MaxArtifacts {
		return snap.FieldError(path+".artifacts", "maxItems", MaxArtifacts, n)
	}
	for i := range t.Artifacts {
		if e := validateArtifact(&t.Artifacts[i], fmt.Sprintf("%s.artifacts[%d]", path, i)); e != nil {
			return e
		}
	}
	return nil
}

func stateNames() []string {
	out := make([]string, 0, 6)
	for _, s := range States() {
		out = append(out, string(s))
	}
	return out
}

func validateMessage(m *Message, path string) *snap.Error {
	if e := snap.CheckID(path+".messageId", m.MessageID); e != nil {
		return e
	}
	if m.Role != RoleUser && m.Role != RoleAgent {
		return snap.FieldError(path+".role", "enum", []string{string(RoleUser), string(RoleAgent)}, string(m.Role))
	}
	return validateParts(m.Parts, path+".parts")
}

func validateArtifact(a *Artifact, path string) *snap.Error {
	if e := snap.CheckID(path+".artifactId", a.ArtifactID); e != nil {
		return e
	}
	if a.Name != "" {
		if !utf8.ValidString(a.Name) {
			return snap.FieldError(path+".name", "format", "UTF-8", a.Name)
		}
		if n := utf8.RuneCountInString(a.Name); n > MaxArtifactName {
			return snap.FieldError(path+".name", "maxLength", MaxArtifactName, a.Name)
		}
	}
	return validateParts(a.Parts, path+".parts")
}

func validateParts(parts []Part, path string) *snap.Error {
	switch n := len(parts); {
	case n < 1:
		return snap.FieldError(path, "minItems", 1, n)
	case n > MaxParts:
		return snap.FieldError(path, "maxItems", MaxParts, n)
	}
	for i := range parts {
		if e := validatePart(&parts[i], fmt.Sprintf("%s[%d]", path, i)); e != nil {
			return e
		}
	}
	return nil
}

func validatePart(p *Part, path string) *snap.Error {
	fields := contentFields()
	present := make([]string, 0, 1)
	for i, set := range []bool{p.Text != nil, p.Raw != nil, p.URL != nil, p.Data != nil} {
		if set {
			present = append(present, fields[i])
		}
	}
	if len(present) != 1 {
		return snap.FieldError(path, "oneOf", fields, present)
	}
	switch {
	case p.Text != nil:
		s := *p.Text
		if len(s) > MaxTextSize {
			return snap.FieldError(path+".text", "maxLength", MaxTextSize, len(s))
		}
		if !utf8.ValidString(s) {
			return snap.FieldError(path+".text", "format", "UTF-8", len(s))
		}
	case p.Raw != nil:
		if p.MediaType == "" {
			return snap.FieldError(path+".mediaType", "required", "present", nil)
		}
		if e := checkRaw(*p.Raw, path+".raw"); e != nil {
			return e
		}
	case p.URL != nil:
		u := *p.URL
		if len(u) > MaxURLLength {
			return snap.FieldError(path+".url", "maxLength", MaxURLLength, len(u))
		}
		if !isAbsoluteURI(u) {
			return snap.FieldError(path+".url", "format", "absolute URI", u)
		}
	case p.Data != nil:
		v := jsontext.Value(p.Data)
		if v.Kind() != '{' || !v.IsValid() {
			return snap.FieldError(path+".data", "type", "object", snap.KindName(v.Kind()))
		}
		if n := compactLen(p.Data); n > MaxDataSize {
			return snap.FieldError(path+".data", "maxSize", MaxDataSize, n)
		}
	}
	if p.MediaType != "" {
		if len(p.MediaType) > MaxMediaTypeLength {
			return snap.FieldError(path+".mediaType", "maxLength", MaxMediaTypeLength, p.MediaType)
		}
		if !snap.IsMediaType(p.MediaType) {
			return snap.FieldError(path+".mediaType", "format", snap.MediaTypeFormat, p.MediaType)
		}
	}
	return nil
}

// checkRaw requires standard base64 (padding optional) that decodes to at
// most MaxRawSize bytes.
func checkRaw(s, field string) *snap.Error {
	if len(s) > MaxRawLength {
		return snap.FieldError(field, "maxLength", MaxRawLength, len(s))
	}
	enc := base64.StdEncoding
	if len(s)%4 != 0 {
		enc = base64.RawStdEncoding
	}
	// Go's decoder skips CR and LF; base64 in JSON has no reason to hold
	// them, and a peer's decoder might not skip them.
	if strings.ContainsAny(s, "\r\n") {
		return snap.FieldError(field, "format", "base64", s)
	}
	if enc.DecodedLen(len(s)) > MaxRawSize+2 {
		return snap.FieldError(field, "maxSize", MaxRawSize, enc.DecodedLen(len(s)))
	}
	// Decode as a stream: validate and count without holding the content.
	n, err := io.Copy(io.Discard, base64.NewDecoder(enc.Strict(), strings.NewReader(s)))
	if err != nil {
		return snap.FieldError(field, "format", "base64", s)
	}
	if n > MaxRawSize {
		return snap.FieldError(field, "maxSize", MaxRawSize, n)
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
