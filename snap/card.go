package snap

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/jsonenc"
	"github.com/snapnode/snapnode/internal/lowerhex"
	"github.com/snapnode/snapnode/internal/secp"
)

// MaxCardSize is the largest serialized Agent Card, in bytes.
const MaxCardSize = 64 << 10

// Card is a SNAP Agent Card: who an agent is and how to reach it.
type Card struct {
	Name               string        `json:"name"`
	Description        string        `json:"description"`
	Version            string        `json:"version"`
	Identity           string        `json:"identity"`
	Endpoints          []Endpoint    `json:"endpoints,omitempty"`
	NostrRelays        []string      `json:"nostrRelays,omitempty"`
	ProtocolVersion    string        `json:"protocolVersion,omitempty"`
	SupportedVersions  []string      `json:"supportedVersions,omitempty"`
	Capabilities       *Capabilities `json:"capabilities,omitempty"`
	Skills             []Skill       `json:"skills"`
	DefaultInputModes  []string      `json:"defaultInputModes"`
	DefaultOutputModes []string      `json:"defaultOutputModes"`
	Trust              *Trust        `json:"trust,omitempty"`
	Provider           *Provider     `json:"provider,omitempty"`
	IconURL            string        `json:"iconUrl,omitempty"`
	DocumentationURL   string        `json:"documentationUrl,omitempty"`
}

// Endpoint is a transport endpoint; callers try them in order.
type Endpoint struct {
	Protocol string `json:"protocol"` // "http" or "wss"
	URL      string `json:"url"`
}

// Capabilities are optional feature flags.
type Capabilities struct {
	Streaming         bool       `json:"streaming,omitempty"`
	PushNotifications bool       `json:"pushNotifications,omitempty"`
	RateLimit         *RateLimit `json:"rateLimit,omitempty"`
}

// RateLimit advertises the agent's request limit (agent-card.md; the
// published schema omits it).
type RateLimit struct {
	MaxRequests   int `json:"maxRequests"`
	WindowSeconds int `json:"windowSeconds"`
}

// Skill is one capability an agent offers.
type Skill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Tags        []string `json:"tags"`
	Examples    []string `json:"examples,omitempty"`
	InputModes  []string `json:"inputModes,omitempty"`
	OutputModes []string `json:"outputModes,omitempty"`
}

// Trust anchors the identity to a domain (DNS TXT _snap.<domain>).
type Trust struct {
	Domain string `json:"domain"`
}

// Provider is the organization operating the agent.
type Provider struct {
	Organization string `json:"organization,omitempty"`
	URL          string `json:"url,omitempty"`
}

func cardError(field, constraint string, expected, received any) *Error {
	e := FieldError(field, constraint, expected, received).withCode(CodeAgentCardInvalid)
	e.Message = fmt.Sprintf("invalid agent card: %s: %s", field, constraint)
	return e
}

// Validate checks every Agent Card rule of the SNAP specification's field
// constraints and the card schema: lengths, patterns, counts, unique skill
// ids, URLs, and the 64 KB size. It fails with 3002 AgentCardInvalid naming
// the field.
func (c *Card) Validate() error {
	if e := c.validate(); e != nil {
		return e
	}
	b, err := marshalCard(c)
	if err != nil {
		return cardError("card", "json", "serializable", err.Error())
	}
	if len(b) > MaxCardSize {
		return cardError("card", "maxSize", MaxCardSize, len(b))
	}
	return nil
}

func (c *Card) validate() *Error {
	if e := textRule("name", c.Name, 1, 128); e != nil {
		return e
	}
	if e := textRule("description", c.Description, 1, 1024); e != nil {
		return e
	}
	if !isSemver(c.Version) {
		return cardError("version", "pattern", `^\d+\.\d+\.\d+$`, c.Version)
	}
	// Like from and to, the identity must also lift to a curve point:
	// an x that is not on secp256k1 is the key of no agent.
	if a, err := identity.ParseAddress(c.Identity); err != nil {
		return cardError("identity", "p2tr", "valid P2TR address", c.Identity)
	} else if _, err := a.PublicKey(); err != nil {
		return cardError("identity", "p2tr", "valid P2TR address", c.Identity)
	}
	if len(c.Endpoints) > 10 {
		return cardError("endpoints", "maxItems", 10, len(c.Endpoints))
	}
	for i, ep := range c.Endpoints {
		f := fmt.Sprintf("endpoints[%d]", i)
		if ep.Protocol != "http" && ep.Protocol != "wss" {
			return cardError(f+".protocol", "enum", []string{"http", "wss"}, ep.Protocol)
		}
		if e := urlRule(f+".url", ep.URL, true); e != nil {
			return e
		}
	}
	if len(c.NostrRelays) > 10 {
		return cardError("nostrRelays", "maxItems", 10, len(c.NostrRelays))
	}
	for i, r := range c.NostrRelays {
		if e := relayRule(fmt.Sprintf("nostrRelays[%d]", i), r); e != nil {
			return e
		}
	}
	if c.ProtocolVersion != "" && !isVersion(c.ProtocolVersion) {
		return cardError("protocolVersion", "pattern", `^\d+\.\d+$`, c.ProtocolVersion)
	}
	if len(c.SupportedVersions) > 20 {
		return cardError("supportedVersions", "maxItems", 20, len(c.SupportedVersions))
	}
	for i, v := range c.SupportedVersions {
		if !isVersion(v) {
			return cardError(fmt.Sprintf("supportedVersions[%d]", i), "pattern", `^\d+\.\d+$`, v)
		}
	}
	if c.Capabilities != nil && c.Capabilities.RateLimit != nil {
		rl := c.Capabilities.RateLimit
		if rl.MaxRequests < 1 {
			return cardError("capabilities.rateLimit.maxRequests", "minimum", 1, rl.MaxRequests)
		}
		if rl.WindowSeconds < 1 {
			return cardError("capabilities.rateLimit.windowSeconds", "minimum", 1, rl.WindowSeconds)
		}
	}
	switch n := len(c.Skills); {
	case n < 1:
		return cardError("skills", "minItems", 1, n)
	case n > 100:
		return cardError("skills", "maxItems", 100, n)
	}
	seen := make(map[string]bool, len(c.Skills))
	for i, s := range c.Skills {
		if e := s.validate(fmt.Sprintf("skills[%d]", i)); e != nil {
			return e
		}
		if seen[s.ID] {
			return cardError(fmt.Sprintf("skills[%d].id", i), "unique", "an id no other skill has", s.ID)
		}
		seen[s.ID] = true
	}
	if e := modesRule("defaultInputModes", c.DefaultInputModes, 1); e != nil {
		return e
	}
	if e := modesRule("defaultOutputModes", c.DefaultOutputModes, 1); e != nil {
		return e
	}
	if c.Trust != nil {
		if e := textRule("trust.domain", c.Trust.Domain, 1, 253); e != nil {
			return e
		}
	}
	if c.Provider != nil {
		if e := textRule("provider.organization", c.Provider.Organization, 0, 256); e != nil {
			return e
		}
		if c.Provider.URL != "" {
			if e := urlRule("provider.url", c.Provider.URL, false); e != nil {
				return e
			}
		}
	}
	if c.IconURL != "" {
		if e := urlRule("iconUrl", c.IconURL, false); e != nil {
			return e
		}
	}
	if c.DocumentationURL != "" {
		if e := urlRule("documentationUrl", c.DocumentationURL, false); e != nil {
			return e
		}
	}
	return nil
}

func (s *Skill) validate(f string) *Error {
	if e := slugRule(f+".id", s.ID, 64); e != nil {
		return e
	}
	if e := textRule(f+".name", s.Name, 1, 128); e != nil {
		return e
	}
	if e := textRule(f+".description", s.Description, 1, 1024); e != nil {
		return e
	}
	switch n := len(s.Tags); {
	case n < 1:
		return cardError(f+".tags", "minItems", 1, n)
	case n > 20:
		return cardError(f+".tags", "maxItems", 20, n)
	}
	for i, t := range s.Tags {
		if e := slugRule(fmt.Sprintf("%s.tags[%d]", f, i), t, 32); e != nil {
			return e
		}
	}
	if len(s.Examples) > 10 {
		return cardError(f+".examples", "maxItems", 10, len(s.Examples))
	}
	for i, ex := range s.Examples {
		if e := textRule(fmt.Sprintf("%s.examples[%d]", f, i), ex, 0, 256); e != nil {
			return e
		}
	}
	if e := modesRule(f+".inputModes", s.InputModes, 0); e != nil {
		return e
	}
	return modesRule(f+".outputModes", s.OutputModes, 0)
}

// textRule bounds a string's length in characters (code points, as JSON
// Schema counts).
func textRule(field, s string, minLen, maxLen int) *Error {
	n := utf8.RuneCountInString(s)
	switch {
	case n < minLen:
		return cardError(field, "minLength", minLen, s)
	case n > maxLen:
		return cardError(field, "maxLength", maxLen, s)
	}
	return nil
}

// slugRule applies ^[a-z0-9-]+$ with a maximum length.
func slugRule(field, s string, maxLen int) *Error {
	if e := textRule(field, s, 1, maxLen); e != nil {
		return e
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return cardError(field, "pattern", "^[a-z0-9-]+$", s)
		}
	}
	return nil
}

func modesRule(field string, modes []string, minItems int) *Error {
	switch n := len(modes); {
	case n < minItems:
		return cardError(field, "minItems", minItems, n)
	case n > 20:
		return cardError(field, "maxItems", 20, n)
	}
	for i, m := range modes {
		if !IsMediaType(m) {
			return cardError(fmt.Sprintf("%s[%d]", field, i), "format", MediaTypeFormat, m)
		}
	}
	return nil
}

// MediaTypeFormat says what IsMediaType accepts; it is the expected value
// of the errors that refuse a media type.
const MediaTypeFormat = "media type: type/subtype with optional parameters (RFC 6838, RFC 2045), printable ASCII, at most 128 characters"

// IsMediaType reports whether s is a media type: type/subtype, in any
// letter case, optionally followed by parameters, as in
// "text/plain; charset=utf-8"; at most 128 characters. The syntax is
// mime.ParseMediaType's (RFC 2045 and RFC 6838); on top of it s must be
// printable ASCII without surrounding space, so that a value that reads
// the same is stored the same, and no line break rides along.
func IsMediaType(s string) bool {
	if len(s) == 0 || len(s) > 128 || strings.TrimSpace(s) != s {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e {
			return false
		}
	}
	mt, _, err := mime.ParseMediaType(s)
	if err != nil {
		return false
	}
	typ, sub, ok := strings.Cut(mt, "/")
	return ok && typ != "" && sub != ""
}

// urlRule checks an absolute URL of at most 2048 characters; web endpoints
// must be http(s) or ws(s) with a host.
func urlRule(field, s string, endpoint bool) *Error {
	if len(s) > 2048 {
		return cardError(field, "maxLength", 2048, s)
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme == "" || (endpoint && u.Host == "") {
		return cardError(field, "format", "absolute URI", s)
	}
	if endpoint {
		switch u.Scheme {
		case "http", "https", "ws", "wss":
		default:
			return cardError(field, "format", "http, https, ws or wss URL", s)
		}
	}
	return nil
}

// relayRule requires wss:// relays, and allows ws:// only on a loopback
// host: the embedded relay of a node with no configuration listens on
// ws://127.0.0.1, and nothing else may be advertised unencrypted.
func relayRule(field, s string) *Error {
	if e := urlRule(field, s, true); e != nil {
		return e
	}
	u, _ := url.Parse(s)
	switch u.Scheme {
	case "wss":
		return nil
	case "ws":
		h := u.Hostname()
		if ip := net.ParseIP(h); h == "localhost" || ip != nil && ip.IsLoopback() {
			return nil
		}
	}
	return cardError(field, "pattern", "^wss:// (ws:// on loopback only)", s)
}

// marshalCard serializes a card as it is published: no HTML escaping, so
// the size measured is the size sent.
func marshalCard(c *Card) ([]byte, error) { return jsonenc.Marshal(c) }

// typeName names the JSON type a card field wants, from a decoding error.
func typeName(se *jsonv2.SemanticError) string {
	if se.GoType == nil {
		return "valid value"
	}
	return goTypeName(se.GoType)
}

// goTypeName names the JSON type of a card field of Go type t.
func goTypeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Slice:
		return "array"
	case reflect.Struct, reflect.Pointer:
		return "object"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64:
		return "integer"
	}
	return t.String()
}

// nullRule refuses a null where the card defines a value. The schema
// gives every card field a type and null is none of them, but decoding
// reads a null as the field left out (or as ""), so a card the schema
// rejects would pass. Members the card does not define, extensions among
// them, are not looked at. raw is known to be I-JSON.
func nullRule(raw []byte) *Error {
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil // the end
		}
		if tok.Kind() != 'n' {
			continue
		}
		ptr := dec.StackPointer()
		if t := cardFieldType(ptr); t != nil {
			return cardError(pointerPath(ptr), "type", goTypeName(t), "null")
		}
	}
}

// cardFieldType returns the Go type of the card value at ptr, or nil when
// ptr is not within a field the card defines.
func cardFieldType(ptr jsontext.Pointer) reflect.Type {
	t := reflect.TypeFor[Card]()
	for tok := range ptr.Tokens() {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Slice:
			t = t.Elem()
		case reflect.Struct:
			f, ok := jsonField(t, tok)
			if !ok {
				return nil
			}
			t = f.Type
		default:
			return nil
		}
	}
	return t
}

// jsonField returns the field of struct type t that JSON names name.
func jsonField(t reflect.Type, name string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("json"), ","); tag == name {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func isSemver(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 3 {
		return false
	}
	for _, p := range parts {
		if p == "" || strings.Trim(p, "0123456789") != "" {
			return false
		}
	}
	return true
}

// ParseCard decodes and validates a serialized Agent Card. Fields the card
// does not define are ignored, as for envelopes, so a card from a newer
// minor version still parses; they stay in raw, which is what a signature
// covers.
func ParseCard(raw []byte) (*Card, error) {
	if len(raw) > MaxCardSize {
		return nil, cardError("card", "maxSize", MaxCardSize, len(raw))
	}
	if _, err := Canonicalize(raw); err != nil {
		return nil, cardError("card", "i-json", "an I-JSON object", err.Error())
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, cardError("card", "type", "object", err.Error())
	}
	for _, f := range []string{"name", "description", "version", "identity", "skills", "defaultInputModes", "defaultOutputModes"} {
		if _, ok := top[f]; !ok {
			return nil, cardError(f, "required", "present", nil)
		}
	}
	for _, f := range []string{"endpoints", "nostrRelays", "supportedVersions"} {
		if v, ok := top[f]; ok && bytes.Equal(bytes.TrimSpace(v), []byte("[]")) {
			return nil, cardError(f, "minItems", 1, 0)
		}
	}
	if e := nullRule(raw); e != nil {
		return nil, e
	}
	// JSON v2 decoding: names match case-sensitively (v1 would fill Name
	// from "NAME"), and a type error carries the JSON pointer of the value.
	var c Card
	if err := jsonv2.Unmarshal(raw, &c); err != nil {
		var se *jsonv2.SemanticError
		if errors.As(err, &se) && se.JSONPointer != "" {
			return nil, cardError(pointerPath(se.JSONPointer), "type", typeName(se), KindName(se.JSONKind))
		}
		return nil, cardError("card", "json", "a card object", err.Error())
	}
	if e := c.validate(); e != nil {
		return nil, e
	}
	return &c, nil
}

// SignedCard is the well-known card document served at
// /.well-known/snap-agent.json: the card, a BIP-340 signature by the card's
// identity over SHA-256(JCS(card) ‖ "|" ‖ timestamp), the x-only output key
// Q in hex and the signing time in Unix seconds.
type SignedCard struct {
	Card      json.RawMessage `json:"card"`
	Sig       string          `json:"sig"`
	PublicKey string          `json:"publicKey"`
	Timestamp int64           `json:"timestamp"`
}

func cardDigest(canonicalCard []byte, ts int64) [32]byte {
	h := sha256.New()
	h.Write(canonicalCard)
	h.Write([]byte{'|'})
	h.Write(strconv.AppendInt(nil, ts, 10))
	var d [32]byte
	h.Sum(d[:0])
	return d
}

// SignCard validates c and signs it with k at time ts. The card's identity
// must be k's address.
func SignCard(c *Card, k *identity.Key, ts time.Time) (*SignedCard, error) {
	return signCard(c, k, ts, nil)
}

// SignCardWithAux is SignCard with fixed BIP-340 auxiliary data.
func SignCardWithAux(c *Card, k *identity.Key, ts time.Time, aux [32]byte) (*SignedCard, error) {
	return signCard(c, k, ts, &aux)
}

func signCard(c *Card, k *identity.Key, ts time.Time, aux *[32]byte) (*SignedCard, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	a, _ := identity.ParseAddress(c.Identity) // Validate checked it
	if a.Key != k.OutputKey() {
		return nil, fmt.Errorf("snap: sign card: identity %s: %w", c.Identity, ErrWrongKey)
	}
	raw, err := marshalCard(c)
	if err != nil {
		return nil, fmt.Errorf("snap: sign card: %w", err)
	}
	canon, err := canonicalize(raw)
	if err != nil {
		return nil, fmt.Errorf("snap: sign card: %w", err)
	}
	sig, err := signDigest(k, cardDigest(canon, ts.Unix()), aux)
	if err != nil {
		return nil, fmt.Errorf("snap: sign card: %w", err)
	}
	q := k.OutputKey()
	return &SignedCard{Card: raw, Sig: sig, PublicKey: hex.EncodeToString(q[:]), Timestamp: ts.Unix()}, nil
}

// VerifySignedCard checks a well-known card document as the spec requires:
// the card is valid (3002), the signature over JCS(card) ‖ "|" ‖ timestamp
// verifies against publicKey (2001), and publicKey is the output key of the
// card's identity (2003). It returns the card.
func VerifySignedCard(raw []byte) (*Card, *SignedCard, error) {
	if _, err := Canonicalize(raw); err != nil {
		return nil, nil, cardError("signedCard", "i-json", "an I-JSON object", err.Error())
	}
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return nil, nil, cardError("signedCard", "type", "object", err.Error())
	}
	for _, f := range []string{"card", "sig", "publicKey", "timestamp"} {
		if _, ok := top[f]; !ok {
			return nil, nil, cardError(f, "required", "present", nil)
		}
	}
	var sc SignedCard
	sc.Card = top["card"]
	if err := json.Unmarshal(top["sig"], &sc.Sig); err != nil || !lowerhex.Valid(sc.Sig, SignatureHexLen) {
		return nil, nil, cardError("sig", "pattern", "^[0-9a-f]{128}$", string(top["sig"]))
	}
	if err := json.Unmarshal(top["publicKey"], &sc.PublicKey); err != nil || !lowerhex.Valid(sc.PublicKey, 64) {
		return nil, nil, cardError("publicKey", "pattern", "^[0-9a-f]{64}$", string(top["publicKey"]))
	}
	ts, e := parseTimestamp(top["timestamp"])
	if e != nil {
		return nil, nil, e.withCode(CodeAgentCardInvalid)
	}
	sc.Timestamp = ts
	card, err := ParseCard(sc.Card)
	if err != nil {
		return nil, nil, err
	}
	canon, err := canonicalize(sc.Card)
	if err != nil {
		return nil, nil, cardError("card", "i-json", "an I-JSON object", err.Error())
	}
	var pk [32]byte
	hex.Decode(pk[:], []byte(sc.PublicKey))
	pub, err := secp.ParsePublicKey(pk)
	if err != nil {
		return nil, nil, cardError("publicKey", "curve", "an x-only secp256k1 key", sc.PublicKey)
	}
	if !verifySignature(pub, cardDigest(canon, sc.Timestamp), sc.Sig) {
		return nil, nil, &Error{Code: CodeSignatureInvalid, Message: "card signature does not verify against publicKey",
			Data: map[string]any{"field": "sig", "reason": "BIP-340 verification failed"}}
	}
	a, _ := identity.ParseAddress(card.Identity) // ParseCard checked it
	if a.Key != pk {
		return nil, nil, &Error{Code: CodeIdentityMismatch, Message: "publicKey is not the key of the card's identity",
			Data: map[string]any{"from": card.Identity, "signer": sc.PublicKey}}
	}
	return card, &sc, nil
}
