package proposal

import (
	"errors"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// decodeStrict reads one JSON value as maps, slices, strings, float64,
// bools and nils, refusing what two parsers could read two ways: duplicate
// member names (also when spelled with escapes), invalid UTF-8 and lone
// surrogates, numbers beyond a float64, and anything after the value.
func decodeStrict(data []byte) (any, *Error) {
	var v any
	err := json.Unmarshal(data, &v) // v2 defaults: no duplicate names, valid UTF-8 only
	if err == nil {
		return v, nil
	}
	var syn *jsontext.SyntacticError
	var sem *json.SemanticError
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName) && errors.As(err, &syn):
		e := validation(string(syn.JSONPointer), "duplicateName", "Field "+string(syn.JSONPointer)+" appears more than once; the input must have one reading.")
		e.Err = err
		return nil, e
	case !utf8.Valid(data):
		e := validation(pointerOf(err), "invalidUTF8", "The input is not valid UTF-8.")
		e.Err = err
		return nil, e
	case errors.As(err, &sem):
		e := validation(string(sem.JSONPointer), "number", "Field "+string(sem.JSONPointer)+" is a number beyond the range of a double.")
		e.Err = err
		return nil, e
	default:
		e := validation(pointerOf(err), "jsonSyntax", "The input is not a single well-formed JSON value.")
		e.Err = err
		return nil, e
	}
}

// decodeObject is decodeStrict for an input that must be one JSON object
// (a proposal, a descriptor): anything else is ErrValidation, rule type.
func decodeObject(data []byte) (map[string]any, error) {
	v, derr := decodeStrict(data)
	if derr != nil {
		return nil, derr
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, validation("", "type", "The input must be a JSON object.")
	}
	return obj, nil
}

func pointerOf(err error) string {
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) {
		return string(syn.JSONPointer)
	}
	return ""
}

// asciiFold lowers ASCII letters only, so that "any case" means the 26
// letters and nothing that Unicode case folding would add (ſ, K).
func asciiFold(s string) string {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= 'A' && c <= 'Z' {
			b := []byte(s)
			for j := i; j < len(b); j++ {
				if b[j] >= 'A' && b[j] <= 'Z' {
					b[j] += 'a' - 'A'
				}
			}
			return string(b)
		}
	}
	return s
}
