package snap

import (
	"bytes"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"

	"github.com/snapnode/snapnode/internal/jsondec"
)

// NewID returns a random (version 4) UUID, the message id form the spec
// recommends; it matches the id pattern ^[a-zA-Z0-9_-]+$.
func NewID() string { return uuid.NewString() }

// Prepare fills the envelope fields a sender usually leaves to its tooling,
// each only when absent from the JSON object raw: version (ProtocolVersion),
// from (the from argument; skipped when from is ""), id (NewID), type
// ("request") and timestamp (now, in Unix seconds). Present fields are kept
// as they are, even when invalid, so that Parse reports them; unknown fields
// and the bytes of every present member are kept too.
//
// raw must pass the syntax stage (one I-JSON object); otherwise Prepare
// returns that stage's *Error (1003), so a duplicate member is reported
// rather than silently resolved. The result is not otherwise validated:
// pass it to Parse.
func Prepare(raw []byte, from string, now time.Time) ([]byte, error) {
	if _, err := ParseThrough(raw, StageSyntax); err != nil {
		return nil, err
	}
	fill := []member{
		{"id", jsonString(NewID())},
		{"version", jsonString(ProtocolVersion)},
	}
	if from != "" {
		fill = append(fill, member{"from", jsonString(from)})
	}
	fill = append(fill,
		member{"type", jsonString(string(TypeRequest))},
		member{"timestamp", strconv.AppendInt(nil, now.Unix(), 10)},
	)
	return fillObject(raw, fill, false)
}

// PrepareCard sets the identity of a serialized Agent Card to identity when
// the card has none: identity absent, null or "". Any other identity is
// kept, so ParseCard or SignCard reports a wrong one. Input that is not an
// I-JSON object fails with 3002 AgentCardInvalid, as in ParseCard.
func PrepareCard(raw []byte, identity string) ([]byte, error) {
	if len(raw) > MaxCardSize {
		return nil, cardError("card", "maxSize", MaxCardSize, len(raw))
	}
	if _, err := Canonicalize(raw); err != nil {
		return nil, cardError("card", "i-json", "an I-JSON object", err.Error())
	}
	if k := jsontext.Value(bytes.TrimSpace(raw)).Kind(); k != '{' {
		return nil, cardError("card", "type", "object", KindName(k))
	}
	return fillObject(raw, []member{{"identity", jsonString(identity)}}, true)
}

// member is one name and its JSON value.
type member struct {
	name  string
	value []byte
}

func jsonString(s string) []byte {
	b, _ := jsontext.AppendQuote(nil, s) // invalid UTF-8 becomes U+FFFD
	return b
}

// fillObject returns obj, an I-JSON object without duplicate names, with
// each member of fill appended when obj lacks it and, when replaceEmpty,
// put in place of a present value that is null or "". All other bytes are
// kept as they are.
func fillObject(obj []byte, fill []member, replaceEmpty bool) ([]byte, error) {
	type span struct{ start, end int }
	dec := jsondec.Get(obj)
	defer jsondec.Put(dec)
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	spans := make(map[string]span)
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		name := tok.String() // before the token is voided
		start := int(dec.InputOffset())
		if err := dec.SkipValue(); err != nil {
			return nil, err
		}
		end := int(dec.InputOffset())
		for start < end && strings.IndexByte(" \t\r\n:", obj[start]) >= 0 {
			start++
		}
		spans[name] = span{start, end}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, err
	}
	closing := int(dec.InputOffset()) - 1 // the '}'

	type edit struct {
		span
		text []byte
	}
	var edits []edit
	var tail []byte
	for _, m := range fill {
		sp, ok := spans[m.name]
		switch {
		case !ok:
			if len(spans) > 0 || len(tail) > 0 {
				tail = append(tail, ',')
			}
			tail = append(tail, jsonString(m.name)...)
			tail = append(tail, ':')
			tail = append(tail, m.value...)
		case replaceEmpty:
			if v := string(obj[sp.start:sp.end]); v == "null" || v == `""` {
				edits = append(edits, edit{sp, m.value})
			}
		}
	}
	if len(tail) > 0 {
		edits = append(edits, edit{span{closing, closing}, tail})
	}
	slices.SortFunc(edits, func(a, b edit) int { return a.start - b.start })
	out := make([]byte, 0, len(obj)+len(tail)+64)
	at := 0
	for _, e := range edits {
		out = append(out, obj[at:e.start]...)
		out = append(out, e.text...)
		at = e.end
	}
	return append(out, obj[at:]...), nil
}
