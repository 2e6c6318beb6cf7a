package snap

import (
	"bytes"
	"fmt"
	"io"
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/jsondec"
	"github.com/snapnode/snapnode/internal/lowerhex"
)

// Stage is one step of the stateless half of validation. The stages run in
// this order and the first failure wins (the validation order of the SNAP
// specification's field constraints).
type Stage int

const (
	// StageSyntax: JSON, a JSON object, I-JSON (no duplicate names, no
	// lone surrogates, numbers within double range), at most 10 MB.
	StageSyntax Stage = iota + 1
	// StageStructure: every required field is present.
	StageStructure
	// StageTypes: every known field has its JSON type.
	StageTypes
	// StageConstraints: lengths, patterns, enums, the payload's size,
	// depth and member count, the timestamp's range. A malformed from or
	// to fails here with 2005.
	StageConstraints
	// StageSemantics: the version's major is supported (else 5004);
	// addresses decode with a valid checksum, witness version 1, zero
	// padding and a program on the curve; from and to share a network.
	StageSemantics
)

// The envelope fields in the order they are checked within each stage.
const (
	fID = iota
	fVersion
	fFrom
	fTo
	fType
	fMethod
	fPayload
	fTimestamp
	fSig
	nFields
)

var fieldNames = [nFields]string{"id", "version", "from", "to", "type", "method", "payload", "timestamp", "sig"}

var fieldKinds = [nFields]jsontext.Kind{'"', '"', '"', '"', '"', '"', '{', '0', '"'}

func fieldIndex(name string) int {
	for i, n := range fieldNames {
		if n == name {
			return i
		}
	}
	return -1
}

// Parse runs every stateless stage on raw and returns the message with its
// payload in canonical form. Authentication (timestamp, signature, replay,
// recipient) is the Validator's.
func Parse(raw []byte) (*Message, error) {
	return parse(raw, StageSemantics, nil)
}

// ParseThrough runs the stages up to and including last. It serves tests
// that check what a stage accepts, such as the published schema cases,
// which reach no further than constraints.
func ParseThrough(raw []byte, last Stage) (*Message, error) {
	return parse(raw, last, nil)
}

type rawField struct {
	present bool
	kind    jsontext.Kind
	val     jsontext.Value // aliases the input
}

// envelope is the result of the syntax stage.
type envelope struct {
	f            [nFields]rawField
	payloadDepth int
}

// KindName names a JSON kind ('"', '0', '{', …) as SNAP errors write the
// JSON types: "string", "number", "object", "array", "boolean", "null".
func KindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "string"
	case '0':
		return "number"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	}
	return "invalid"
}

func invalidMessage(se *syntaxError) *Error {
	// The path may hold member names of the peer's choosing, of any
	// length: clipped, as FieldError clips.
	data := map[string]any{"reason": se.reason, "field": clip(se.field)}
	if se.field == "" {
		data["field"] = "message"
	}
	return &Error{Code: CodeInvalidMessage, Message: "invalid message: " + se.reason, Data: data}
}

// readEnvelope is the syntax stage: one pass over the input that checks it
// is one I-JSON object, keeps the known top-level fields and walks the
// payload for its depth.
func readEnvelope(raw []byte) (*envelope, *Error) {
	if len(raw) > MaxMessageSize {
		return nil, FieldError("message", "maxSize", MaxMessageSize, len(raw))
	}
	dec := jsondec.Get(raw)
	defer jsondec.Put(dec)
	tok, err := dec.ReadToken()
	if err != nil {
		se := syntaxErr(err)
		se.reason = "not JSON: " + se.reason
		return nil, invalidMessage(se)
	}
	if tok.Kind() != '{' {
		// Still tell a scalar or array apart from garbage.
		if tok.Kind() == '[' || tok.Kind() == '"' || tok.Kind() == '0' || tok.Kind() == 'n' || tok.Kind() == 't' || tok.Kind() == 'f' {
			return nil, invalidMessage(&syntaxError{reason: "a SNAP message must be a JSON object, got " + KindName(tok.Kind())})
		}
		return nil, invalidMessage(&syntaxError{reason: "not JSON"})
	}
	env := &envelope{}
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return nil, invalidMessage(syntaxErr(err))
		}
		i := fieldIndex(name.String())
		if i < 0 {
			// Unknown fields are ignored and never signed, but they
			// must still be I-JSON.
			if _, se := walkValue(&dec.Decoder); se != nil {
				return nil, invalidMessage(se)
			}
			continue
		}
		f := &env.f[i]
		f.present = true
		f.kind = dec.PeekKind()
		start := dec.InputOffset()
		depth, se := walkValue(&dec.Decoder)
		if se != nil {
			return nil, invalidMessage(se)
		}
		f.val = bytes.TrimLeft(raw[start:dec.InputOffset()], " \t\r\n:")
		if i == fPayload {
			env.payloadDepth = depth
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, invalidMessage(syntaxErr(err))
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, invalidMessage(&syntaxError{reason: "data after the JSON object"})
	}
	return env, nil
}

func parse(raw []byte, last Stage, keys *keyCache) (*Message, error) {
	env, e := readEnvelope(raw)
	if e != nil {
		return nil, e
	}
	m, _, err := parseEnvelope(env, last, keys)
	return m, err
}

// parseEnvelope runs the stages after syntax through last, and also
// returns the decoded sender address when semantics ran.
func parseEnvelope(env *envelope, last Stage, keys *keyCache) (*Message, *cachedKey, error) {
	if last < StageStructure {
		return &Message{}, nil, nil
	}
	f := &env.f

	// Structure: required fields. sig is checked with the signature,
	// where its absence on a request is 2002.
	for _, i := range [...]int{fID, fVersion, fFrom, fType, fMethod, fPayload, fTimestamp} {
		if !f[i].present {
			return nil, nil, FieldError(fieldNames[i], "required", KindName(fieldKinds[i]), nil)
		}
	}
	if last < StageTypes {
		return &Message{}, nil, nil
	}

	// Types.
	for i := range nFields {
		if f[i].present && f[i].kind != fieldKinds[i] {
			return nil, nil, FieldError(fieldNames[i], "type", KindName(fieldKinds[i]), KindName(f[i].kind))
		}
	}
	if last < StageConstraints {
		return &Message{}, nil, nil
	}

	// Constraints.
	m := &Message{}
	str := func(i int) string {
		if !f[i].present {
			return ""
		}
		// The syntax stage validated the string, so unquoting cannot fail.
		b, _ := jsontext.AppendUnquote(nil, f[i].val)
		return string(b)
	}
	m.ID = str(fID)
	if err := CheckID("id", m.ID); err != nil {
		return nil, nil, err
	}
	m.Version = str(fVersion)
	if !isVersion(m.Version) {
		return nil, nil, FieldError("version", "pattern", `^\d+\.\d+$`, m.Version)
	}
	m.From = str(fFrom)
	if err := checkAddressSyntax("from", m.From); err != nil {
		return nil, nil, err
	}
	m.To = str(fTo)
	if f[fTo].present {
		if err := checkAddressSyntax("to", m.To); err != nil {
			return nil, nil, err
		}
	}
	m.Type = Type(str(fType))
	switch m.Type {
	case TypeRequest, TypeResponse, TypeEvent:
	default:
		return nil, nil, FieldError("type", "enum", []string{"request", "response", "event"}, string(m.Type))
	}
	m.Method = str(fMethod)
	if err := checkMethod(m.Method); err != nil {
		return nil, nil, err
	}
	if env.payloadDepth > MaxPayloadDepth {
		return nil, nil, FieldError("payload", "maxDepth", MaxPayloadDepth, env.payloadDepth)
	}
	if n := countMembers(f[fPayload].val); n > MaxPayloadFields {
		return nil, nil, FieldError("payload", "maxProperties", MaxPayloadFields, n)
	}
	canon, err := canonicalize(f[fPayload].val)
	if err != nil {
		return nil, nil, invalidMessage(&syntaxError{field: "payload", reason: err.Error()})
	}
	if len(canon) > MaxPayloadSize {
		return nil, nil, FieldError("payload", "maxSize", MaxPayloadSize, len(canon))
	}
	m.setCanonical(canon)
	ts, e := parseTimestamp(f[fTimestamp].val)
	if e != nil {
		return nil, nil, e
	}
	m.Timestamp = ts
	m.Sig = str(fSig)
	if f[fSig].present && !lowerhex.Valid(m.Sig, SignatureHexLen) {
		return nil, nil, FieldError("sig", "pattern", "^[0-9a-f]{128}$", m.Sig)
	}
	if last < StageSemantics {
		return m, nil, nil
	}

	// Semantics.
	if !supportedVersion(m.Version) {
		return nil, nil, &Error{
			Code:    CodeVersionNotSupported,
			Message: fmt.Sprintf("version %s is not supported", clip(m.Version)),
			Data:    map[string]any{"requested": clip(m.Version), "supported": SupportedVersions()},
		}
	}
	from, e := keys.lookup("from", m.From)
	if e != nil {
		return nil, nil, e
	}
	if m.To != "" {
		to, e := keys.lookup("to", m.To)
		if e != nil {
			return nil, nil, e
		}
		if to.addr.Network != from.addr.Network {
			return nil, nil, identityInvalid("to", m.To,
				fmt.Sprintf("network mismatch: from is %v, to is %v", from.addr.Network, to.addr.Network))
		}
	}
	return m, from, nil
}

// countMembers returns the number of top-level members of the JSON object
// obj, which the syntax stage has validated.
func countMembers(obj []byte) int {
	dec := jsondec.Get(obj)
	defer jsondec.Put(dec)
	if _, err := dec.ReadToken(); err != nil {
		return 0
	}
	n := 0
	for dec.PeekKind() != '}' {
		if _, err := dec.ReadToken(); err != nil {
			return n
		}
		if err := dec.SkipValue(); err != nil {
			return n
		}
		n++
	}
	return n
}

// parseTimestamp accepts any JSON number whose double value is an integer in
// 0…2^53−1: JavaScript senders may write 1770163200 as 1.7701632e9, and sign
// the plain decimal of the double.
func parseTimestamp(v []byte) (int64, *Error) {
	f, err := strconv.ParseFloat(string(v), 64)
	if err != nil || f != math.Trunc(f) {
		return 0, FieldError("timestamp", "integer", "integer Unix seconds", jsontext.Value(v).Clone())
	}
	if f < 0 {
		return 0, FieldError("timestamp", "minimum", 0, jsontext.Value(v).Clone())
	}
	if f > MaxTimestamp {
		return 0, FieldError("timestamp", "maximum", int64(MaxTimestamp), jsontext.Value(v).Clone())
	}
	return int64(f), nil
}

// CheckID applies the id rule shared by message, task, context and
// artifact ids and idempotency keys: 1–128 characters of
// ^[a-zA-Z0-9_-]+$. It fails with 1004 naming field.
func CheckID(field, s string) *Error {
	switch {
	case len(s) == 0:
		return FieldError(field, "minLength", 1, s)
	case utf8.RuneCountInString(s) > MaxIDLength:
		return FieldError(field, "maxLength", MaxIDLength, s)
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			return FieldError(field, "pattern", "^[a-zA-Z0-9_-]+$", s)
		}
	}
	return nil
}

// ValidMethod reports whether s is a well-formed method name:
// ^[a-z]+/[a-z_]+$, of 1 to MaxMethodLength characters. A server answers
// a request whose method is not with an error of method "snap/error",
// since it cannot echo it.
func ValidMethod(s string) bool { return checkMethod(s) == nil }

// checkMethod applies ^[a-z]+/[a-z_]+$ and 1…64 characters.
func checkMethod(s string) *Error {
	switch {
	case len(s) == 0:
		return FieldError("method", "minLength", 1, s)
	case utf8.RuneCountInString(s) > MaxMethodLength:
		return FieldError("method", "maxLength", MaxMethodLength, s)
	}
	slash := -1
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '/' && slash < 0 && i > 0:
			slash = i
		case 'a' <= c && c <= 'z':
		case c == '_' && slash > 0:
		default:
			return FieldError("method", "pattern", "^[a-z]+/[a-z_]+$", s)
		}
	}
	if slash < 0 || slash == len(s)-1 {
		return FieldError("method", "pattern", "^[a-z]+/[a-z_]+$", s)
	}
	return nil
}

// isVersion matches ^\d+\.\d+$ (ASCII digits only).
func isVersion(s string) bool {
	dot := -1
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '.' && dot < 0 && i > 0:
			dot = i
		case '0' <= c && c <= '9':
		default:
			return false
		}
	}
	return dot > 0 && dot < len(s)-1
}

// supportedVersion accepts every 0.x version: minor versions only add
// optional fields and methods.
func supportedVersion(v string) bool {
	for i := 0; i < len(v) && v[i] != '.'; i++ {
		if v[i] != '0' {
			return false
		}
	}
	return true
}

func identityInvalid(field, value, reason string) *Error {
	return &Error{
		Code:    CodeIdentityInvalid,
		Message: fmt.Sprintf("invalid %s: %s", field, reason),
		Data:    map[string]any{"field": field, "value": clip(value), "reason": reason},
	}
}

// checkAddressSyntax is the constraints-stage address check: the rules a
// pattern can express (lowercase, prefix, length, alphabet). It fails with
// 2005, as every address failure does.
func checkAddressSyntax(field, s string) *Error {
	if err := identity.CheckAddressSyntax(s); err != nil {
		return addressError(field, s, err)
	}
	return nil
}
