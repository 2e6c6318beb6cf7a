package snap_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/snap"
)

// The table of testdata/malformed.json: one valid signed request from agent
// A (key 0a×32) to agent B (key 0b×32), and cases that each break exactly
// one thing in it, with the SNAP code and data.field the validator must
// answer. Code 0 marks a case that must be accepted (the limits themselves).

const (
	mfTimestamp = 1738627200
	mfID        = "msg-0001"
	mfPayload   = `{"message":{"messageId":"m-1","role":"user","parts":[{"text":"hello"}]}}`
)

var (
	mfKeyA  = mfMustKey(strings.Repeat("0a", 32))
	mfKeyB  = mfMustKey(strings.Repeat("0b", 32))
	mfAddrA = mfKeyA.Address(identity.Mainnet)
	mfAddrB = mfKeyB.Address(identity.Mainnet)
)

func mfMustKey(h string) *identity.Key {
	k, err := identity.FromHex(h)
	if err != nil {
		panic(err)
	}
	return k
}

// mfCase is one entry of testdata/malformed.json.
type mfCase struct {
	Name string `json:"name"`
	// Message is either a JSON string, the whole raw input, or an
	// mfEdit applied to the base message.
	Message  json.RawMessage `json:"message"`
	Generate *mfGenerate     `json:"generate"`
	// Code is the expected SNAP code, 0 for accepted.
	Code int `json:"code"`
	// Field is the expected data.field ("" when the error names none).
	Field string `json:"field"`
	// Data holds further data members the error must carry, with their
	// exact JSON values.
	Data map[string]json.RawMessage `json:"data"`
	// Contains maps data members to substrings of their value.
	Contains map[string]string `json:"contains"`
	// Unsigned: an accepted case must come back with Signed == false
	// (otherwise Signed must be true).
	Unsigned bool `json:"unsigned"`
	// SameDigest: an accepted case must have the base message's digest,
	// showing that what it changed is not signed.
	SameDigest bool `json:"sameDigest"`
	// Twice: validate the input once (it must pass), then again with the
	// same validator; the second answer is the one checked.
	Twice bool `json:"twice"`
}

// mfMember is a top-level member: Value is JSON, or Raw the exact text of
// a value that is not I-JSON (and so cannot sit in the testdata as JSON).
type mfMember struct {
	Name  string          `json:"name"`
	Value json.RawMessage `json:"value"`
	Raw   *string         `json:"raw"`
}

func (m mfMember) text() string {
	if m.Raw != nil {
		return *m.Raw
	}
	return string(m.Value)
}

// mfEdit changes the base message. Members are edited first (prepend,
// set, delete, add), then the message is re-signed if asked, then the sig
// is mangled, then the text is serialized and edited as bytes.
type mfEdit struct {
	Prepend []mfMember `json:"prepend"` // members put before the others
	Set     []mfMember `json:"set"`     // replace a member in place, or append it
	Delete  []string   `json:"delete"`
	Add     []mfMember `json:"add"` // appended even when the name exists
	// Resign signs the edited message again: "a" with A's key, "b"
	// with B's (whatever from says).
	Resign   string `json:"resign"`
	UpperSig bool   `json:"upperSig"`
	TrimSig  int    `json:"trimSig"`
	PadSig   string `json:"padSig"`
	FlipSig  bool   `json:"flipSig"`
	Prefix   string `json:"prefix"`
	Suffix   string `json:"suffix"`
	Replace  []struct {
		Old    string `json:"old"`
		New    string `json:"new"`
		NewHex string `json:"newHex"` // bytes that are not UTF-8
		Last   bool   `json:"last"`   // the last occurrence, not the first
	} `json:"replace"`
}

// mfGenerate builds inputs too big to keep in testdata.
type mfGenerate struct {
	// PayloadSize sets the payload to {"x":"aaa…"} with exactly this
	// many bytes in canonical form.
	PayloadSize int `json:"payloadSize"`
	// MessageSize pads the message with an unknown member "x-pad" to
	// exactly this many bytes.
	MessageSize int `json:"messageSize"`
}

func mfQuote(s string) json.RawMessage {
	b, err := json.Marshal(s)
	if err != nil {
		panic(err)
	}
	return b
}

// mfBaseMembers returns the base request, signed by A with zero aux.
func mfBaseMembers(t *testing.T) []mfMember {
	t.Helper()
	ms := []mfMember{
		{Name: "id", Value: mfQuote(mfID)},
		{Name: "version", Value: mfQuote("0.1")},
		{Name: "from", Value: mfQuote(mfAddrA)},
		{Name: "to", Value: mfQuote(mfAddrB)},
		{Name: "type", Value: mfQuote("request")},
		{Name: "method", Value: mfQuote("message/send")},
		{Name: "payload", Value: json.RawMessage(mfPayload)},
		{Name: "timestamp", Value: json.RawMessage(strconv.Itoa(mfTimestamp))},
	}
	return mfResign(t, ms, mfKeyA)
}

// mfBaseDigest is the digest of the base message.
func mfBaseDigest(t *testing.T) [32]byte {
	t.Helper()
	m := &snap.Message{ID: mfID, From: mfAddrA, To: mfAddrB, Type: snap.TypeRequest,
		Method: "message/send", Payload: []byte(mfPayload), Timestamp: mfTimestamp}
	d, err := m.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func mfIndex(ms []mfMember, name string) int {
	for i, m := range ms {
		if m.Name == name {
			return i
		}
	}
	return -1
}

func mfSet(ms []mfMember, m mfMember) []mfMember {
	if i := mfIndex(ms, m.Name); i >= 0 {
		ms[i] = m
		return ms
	}
	return append(ms, m)
}

// mfResign sets sig to k's signature (zero aux) of the members' signature
// input. k need not be the key of from.
func mfResign(t *testing.T, ms []mfMember, k *identity.Key) []mfMember {
	t.Helper()
	str := func(name string) string {
		i := mfIndex(ms, name)
		if i < 0 {
			return ""
		}
		var s string
		if err := json.Unmarshal([]byte(ms[i].text()), &s); err != nil {
			t.Fatalf("resign: %s is not a string: %v", name, err)
		}
		return s
	}
	m := &snap.Message{ID: str("id"), From: str("from"), To: str("to"), Type: snap.Type(str("type")), Method: str("method")}
	if i := mfIndex(ms, "payload"); i >= 0 {
		m.Payload = []byte(ms[i].text())
	}
	if i := mfIndex(ms, "timestamp"); i >= 0 {
		ts, err := strconv.ParseInt(ms[i].text(), 10, 64)
		if err != nil {
			t.Fatalf("resign: timestamp %s: %v", ms[i].text(), err)
		}
		m.Timestamp = ts
	}
	d, err := m.Digest()
	if err != nil {
		t.Fatalf("resign: %v", err)
	}
	sig, err := k.SignWithAux(d, [32]byte{})
	if err != nil {
		t.Fatal(err)
	}
	return mfSet(ms, mfMember{Name: "sig", Value: mfQuote(hex.EncodeToString(sig[:]))})
}

func mfSerialize(ms []mfMember) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		b.Write(mfQuote(m.Name))
		b.WriteByte(':')
		b.WriteString(m.text())
	}
	b.WriteByte('}')
	return b.Bytes()
}

// mfSigEdit rewrites the sig member's string with f.
func mfSigEdit(t *testing.T, ms []mfMember, f func(string) string) []mfMember {
	t.Helper()
	i := mfIndex(ms, "sig")
	if i < 0 {
		t.Fatal("no sig to edit")
	}
	var s string
	if err := json.Unmarshal([]byte(ms[i].text()), &s); err != nil {
		t.Fatal(err)
	}
	ms[i] = mfMember{Name: "sig", Value: mfQuote(f(s))}
	return ms
}

// mfBuild returns the raw input of a case.
func mfBuild(t *testing.T, c *mfCase) []byte {
	t.Helper()
	msg := bytes.TrimSpace(c.Message)
	if len(msg) > 0 && msg[0] == '"' {
		var s string
		if err := json.Unmarshal(msg, &s); err != nil {
			t.Fatal(err)
		}
		return []byte(s)
	}
	var e mfEdit
	if len(msg) > 0 {
		dec := json.NewDecoder(bytes.NewReader(msg))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			t.Fatalf("case %q: bad edit: %v", c.Name, err)
		}
	}
	ms := mfBaseMembers(t)
	ms = append(append([]mfMember(nil), e.Prepend...), ms...)
	for _, m := range e.Set {
		ms = mfSet(ms, m)
	}
	for _, name := range e.Delete {
		i := mfIndex(ms, name)
		if i < 0 {
			t.Fatalf("delete: no member %q", name)
		}
		ms = append(ms[:i], ms[i+1:]...)
	}
	ms = append(ms, e.Add...)
	if g := c.Generate; g != nil && g.PayloadSize > 0 {
		// {"x":"…"} is 8 bytes around the string.
		p := `{"x":"` + strings.Repeat("a", g.PayloadSize-8) + `"}`
		ms = mfSet(ms, mfMember{Name: "payload", Value: json.RawMessage(p)})
	}
	switch e.Resign {
	case "":
	case "a":
		ms = mfResign(t, ms, mfKeyA)
	case "b":
		ms = mfResign(t, ms, mfKeyB)
	default:
		t.Fatalf("resign %q", e.Resign)
	}
	if e.UpperSig {
		ms = mfSigEdit(t, ms, strings.ToUpper)
	}
	if e.TrimSig > 0 {
		ms = mfSigEdit(t, ms, func(s string) string { return s[:len(s)-e.TrimSig] })
	}
	if e.PadSig != "" {
		ms = mfSigEdit(t, ms, func(s string) string { return s + e.PadSig })
	}
	if e.FlipSig {
		ms = mfSigEdit(t, ms, func(s string) string {
			// Flip a digit of s (the scalar half), keeping it hex.
			b := []byte(s)
			if b[100] == '0' {
				b[100] = '1'
			} else {
				b[100] = '0'
			}
			return string(b)
		})
	}
	raw := mfSerialize(ms)
	raw = append([]byte(e.Prefix), raw...)
	raw = append(raw, e.Suffix...)
	for _, r := range e.Replace {
		repl := []byte(r.New)
		if r.NewHex != "" {
			var err error
			if repl, err = hex.DecodeString(r.NewHex); err != nil {
				t.Fatal(err)
			}
		}
		i := bytes.Index(raw, []byte(r.Old))
		if r.Last {
			i = bytes.LastIndex(raw, []byte(r.Old))
		}
		if i < 0 {
			t.Fatalf("replace: %q not found in %s", r.Old, raw)
		}
		raw = append(raw[:i:i], append(repl, raw[i+len(r.Old):]...)...)
	}
	if g := c.Generate; g != nil && g.MessageSize > 0 {
		// ,"x-pad":"…" before the closing brace.
		n := g.MessageSize - len(raw) - len(`,"x-pad":""`)
		if n < 0 || raw[len(raw)-1] != '}' {
			t.Fatalf("cannot pad to %d bytes", g.MessageSize)
		}
		pad := make([]byte, 0, g.MessageSize)
		pad = append(pad, raw[:len(raw)-1]...)
		pad = append(pad, `,"x-pad":"`...)
		pad = append(pad, bytes.Repeat([]byte{'a'}, n)...)
		pad = append(pad, `"}`...)
		raw = pad
		if len(raw) != g.MessageSize {
			t.Fatalf("padded to %d bytes, want %d", len(raw), g.MessageSize)
		}
	}
	return raw
}

func mfLoad(t *testing.T) []mfCase {
	t.Helper()
	b, err := os.ReadFile("testdata/malformed.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []mfCase
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cases); err != nil {
		t.Fatal(err)
	}
	return cases
}

func mfValidator() *snap.Validator {
	return snap.NewValidator(snap.Config{
		Now:    func() time.Time { return time.Unix(mfTimestamp, 0) },
		Self:   mfAddrB,
		Replay: snap.NewMemoryReplayStore(0),
	})
}

// mfJSONEqual compares a Go value from error data with the JSON of the
// table, both read back as generic JSON.
func mfJSONEqual(got any, want json.RawMessage) (bool, string) {
	gb, err := json.Marshal(got)
	if err != nil {
		return false, fmt.Sprintf("unmarshalable %T", got)
	}
	var g, w any
	if err := json.Unmarshal(gb, &g); err != nil {
		return false, err.Error()
	}
	if err := json.Unmarshal(want, &w); err != nil {
		return false, err.Error()
	}
	return reflect.DeepEqual(g, w), string(gb)
}

func TestMalformedMessages(t *testing.T) {
	cases := mfLoad(t)
	rejected := 0
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.Name] {
			t.Fatalf("case name %q used twice", c.Name)
		}
		seen[c.Name] = true
		if c.Code != 0 {
			rejected++
		}
	}
	if rejected < 90 {
		t.Fatalf("only %d malformed cases, want at least 90", rejected)
	}
	baseDigest := mfBaseDigest(t)

	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			t.Parallel()
			raw := mfBuild(t, &c)
			v := mfValidator()
			ctx := context.Background()
			if c.Twice {
				if _, err := v.Validate(ctx, raw); err != nil {
					t.Fatalf("first Validate: %v", err)
				}
			}
			got, err := v.Validate(ctx, raw)
			if c.Code == 0 {
				if err != nil {
					t.Fatalf("Validate = %v, want accepted\ninput: %.600s", err, raw)
				}
				if got.Signed == c.Unsigned {
					t.Errorf("Signed = %v, want %v", got.Signed, !c.Unsigned)
				}
				if c.SameDigest && got.Digest != baseDigest {
					t.Errorf("digest %x differs from the base message's %x", got.Digest, baseDigest)
				}
				return
			}
			if err == nil {
				t.Fatalf("accepted, want %d (field %q)\ninput: %.600s", c.Code, c.Field, raw)
			}
			var se *snap.Error
			if !errors.As(err, &se) {
				t.Fatalf("error %v (%T) is not a *snap.Error", err, err)
			}
			t.Logf("%.300v", se)
			if int(se.Code) != c.Code {
				t.Errorf("code %d, want %d: %v", se.Code, c.Code, se)
			}
			if se.Field() != c.Field {
				t.Errorf("data.field %q, want %q: %v", se.Field(), c.Field, se)
			}
			var need []string
			switch se.Code {
			case snap.CodeInvalidPayload:
				need = []string{"field", "constraint", "expected", "received"}
			case snap.CodeIdentityInvalid:
				need = []string{"field", "value", "reason"}
			case snap.CodeTimestampExpired:
				need = []string{"provided", "serverTime", "maxDrift"}
			case snap.CodeVersionNotSupported:
				need = []string{"requested", "supported"}
			}
			for _, k := range need {
				if _, ok := se.Data[k]; !ok {
					t.Errorf("data has no %q: %v", k, se)
				}
			}
			for k, want := range c.Data {
				gotV, ok := se.Data[k]
				if !ok {
					t.Errorf("data has no %q: %v", k, se)
					continue
				}
				if eq, g := mfJSONEqual(gotV, want); !eq {
					t.Errorf("data.%s = %s, want %s", k, g, want)
				}
			}
			for k, sub := range c.Contains {
				if s := fmt.Sprint(se.Data[k]); !strings.Contains(s, sub) {
					t.Errorf("data.%s = %q, want it to contain %q", k, s, sub)
				}
			}
		})
	}
}

// The 10 MB limit applies to the raw input before anything else: an
// oversized input of garbage is still a size error, not a syntax error.
func TestMalformedOversizedGarbage(t *testing.T) {
	raw := bytes.Repeat([]byte{'x'}, snap.MaxMessageSize+1)
	_, err := mfValidator().Validate(context.Background(), raw)
	var se *snap.Error
	if !errors.As(err, &se) || se.Code != snap.CodeInvalidPayload || se.Field() != "message" {
		t.Fatalf("Validate = %v, want 1004 field message", err)
	}
	if c, _ := se.Data["constraint"].(string); c != "maxSize" {
		t.Errorf("constraint %v, want maxSize", se.Data["constraint"])
	}
}
