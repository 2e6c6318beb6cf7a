package snap

import (
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/snapnode/snapnode/internal/jsondec"
)

// ErrNotIJSON is returned for input that is not I-JSON (RFC 7493): invalid
// JSON, duplicate object member names, invalid UTF-8 or lone surrogates, or
// numbers beyond the range of an IEEE 754 double. RFC 8785 is only defined
// on I-JSON; on anything else two parsers may read one signed text two ways.
var ErrNotIJSON = errors.New("not I-JSON")

// canonicalOpts are the options of jsontext's RFC 8785 formatter. jsontext
// (the Go team's JSON v2 text layer) sorts names by UTF-16 code units,
// formats numbers as ECMAScript doubles and escapes strings as RFC 8785
// says; by default it also rejects duplicate names and invalid UTF-8,
// including lone surrogates. Only the number range is left to walkValue.
var canonicalOpts = []jsontext.Options{
	jsontext.CanonicalizeRawInts(true),
	jsontext.CanonicalizeRawFloats(true),
	jsontext.ReorderRawObjects(true),
}

// Canonicalize returns the JSON Canonicalization Scheme (RFC 8785) form of
// the single JSON value in raw, after checking that raw is I-JSON.
func Canonicalize(raw []byte) ([]byte, error) {
	out, err := AppendCanonical(make([]byte, 0, len(raw)), raw)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// AppendCanonical appends the canonical form of raw to b, as Canonicalize
// returns it, after the same check that raw is I-JSON.
func AppendCanonical(b, raw []byte) ([]byte, error) {
	dec := jsondec.Get(raw)
	defer jsondec.Put(dec)
	if _, err := walkValue(&dec.Decoder); err != nil {
		return b, fmt.Errorf("%w: %s", ErrNotIJSON, err.reason)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return b, fmt.Errorf("%w: data after the JSON value", ErrNotIJSON)
	}
	out, err := jsontext.AppendFormat(b, raw, canonicalOpts...)
	if err != nil {
		return b, fmt.Errorf("%w: %v", ErrNotIJSON, err)
	}
	return out, nil
}

// CanonicalAppender is implemented by payloads that write their own
// canonical (RFC 8785) JSON form, without reflection (a task's response:
// tasks.TaskResponse). The Server signs the bytes AppendCanonicalJSON
// appends as they are, so they must be exactly what Canonicalize makes of
// json.Marshal of the payload: anything else breaks the signature. On an
// error the Server takes that path instead.
type CanonicalAppender interface {
	AppendCanonicalJSON(b []byte) ([]byte, error)
}

// canonicalize formats raw, which the caller has walked with walkValue.
func canonicalize(raw []byte) ([]byte, error) {
	out, err := jsontext.AppendFormat(make([]byte, 0, len(raw)), raw, canonicalOpts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNotIJSON, err)
	}
	return out, nil
}

// syntaxError locates a reason the input is not I-JSON.
type syntaxError struct {
	field  string // dotted path, "" for the whole input
	reason string
}

// walkValue reads the next JSON value from dec token by token, checking that
// it is I-JSON, and returns its depth: 0 for a scalar, 1 for an object or
// array with only scalars inside, and so on.
func walkValue(dec *jsontext.Decoder) (depth int, _ *syntaxError) {
	base := dec.StackDepth()
	for {
		switch dec.PeekKind() {
		case '0':
			v, err := dec.ReadValue()
			if err != nil {
				return 0, syntaxErr(err)
			}
			if _, err := strconv.ParseFloat(string(v), 64); err != nil {
				return 0, &syntaxError{
					field:  pointerPath(dec.StackPointer()),
					reason: "number " + clip(string(v)) + " is outside the range of an IEEE 754 double",
				}
			}
		case '{', '[':
			if _, err := dec.ReadToken(); err != nil {
				return 0, syntaxErr(err)
			}
			depth = max(depth, dec.StackDepth()-base)
		case '"', 'n', 't', 'f':
			if _, err := dec.ReadValue(); err != nil {
				return 0, syntaxErr(err)
			}
		default: // '}', ']', or an error PeekKind could not name
			if _, err := dec.ReadToken(); err != nil {
				return 0, syntaxErr(err)
			}
		}
		if dec.StackDepth() == base {
			return depth, nil
		}
	}
}

// syntaxErr turns a jsontext error into a syntaxError naming the place.
func syntaxErr(err error) *syntaxError {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return &syntaxError{reason: "unexpected end of JSON input"}
	}
	var se *jsontext.SyntacticError
	if errors.As(err, &se) {
		reason := strings.TrimPrefix(se.Err.Error(), "jsontext: ")
		if errors.Is(se.Err, jsontext.ErrDuplicateName) {
			reason = "duplicate object member name"
		}
		return &syntaxError{field: pointerPath(se.JSONPointer), reason: reason}
	}
	return &syntaxError{reason: strings.TrimPrefix(err.Error(), "jsontext: ")}
}

// pointerPath turns a JSON pointer such as /payload/parts/0/text into the
// dotted form errors use, payload.parts[0].text.
func pointerPath(p jsontext.Pointer) string {
	if p == "" {
		return ""
	}
	var b strings.Builder
	for tok := range p.Tokens() {
		if tok != "" && strings.Trim(tok, "0123456789") == "" && b.Len() > 0 {
			b.WriteString("[" + tok + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(tok)
	}
	return b.String()
}
