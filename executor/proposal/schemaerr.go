package proposal

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// violation is one leaf failure of a schema validation, pinned to the
// exact field (for required and additionalProperties, the missing or extra
// member rather than its object).
type violation struct {
	tokens []string // JSON pointer tokens
	rule   string
	kind   jsonschema.ErrorKind
	url    string // absolute schema location of the failing keyword's schema
}

// fromSchema turns a validation failure into the one *Error to report:
// the first violation in a fixed order (fields in the order the proposal and
// descriptor schemas list them, unknown fields after known ones, array items
// by index; at one field, type before required before the rest), so the same
// input always names the same field.
func fromSchema(err error) *Error {
	var ve *jsonschema.ValidationError
	if !errors.As(err, &ve) {
		return &Error{Code: ErrValidation, Message: "The input could not be validated.", Rule: "schema", Err: err}
	}
	var vs []violation
	collect(ve, &vs)
	if len(vs) == 0 { // a failure with no leaf cannot happen; report the root
		return &Error{Code: ErrValidation, Message: "The input breaks the schema.", Rule: "schema", Err: err}
	}
	first := slices.MinFunc(vs, compareViolations)
	field := pointer(first.tokens)
	e := validation(field, first.rule, first.message(field))
	e.Err = err
	return e
}

func collect(ve *jsonschema.ValidationError, out *[]violation) {
	if len(ve.Causes) > 0 {
		for _, c := range ve.Causes {
			collect(c, out)
		}
		return
	}
	loc := ve.InstanceLocation
	switch k := ve.ErrorKind.(type) {
	case *kind.Required:
		for _, m := range k.Missing {
			*out = append(*out, violation{tokens: withToken(loc, m), rule: "required", kind: k, url: ve.SchemaURL})
		}
		return
	case *kind.AdditionalProperties:
		for _, p := range k.Properties {
			*out = append(*out, violation{tokens: withToken(loc, p), rule: "additionalProperties", kind: k, url: ve.SchemaURL})
		}
		return
	case *kind.FalseSchema:
		*out = append(*out, violation{tokens: loc, rule: "false", kind: k, url: ve.SchemaURL})
		return
	}
	rule := "schema"
	if kp := ve.ErrorKind.KeywordPath(); len(kp) > 0 {
		rule = kp[0]
	}
	*out = append(*out, violation{tokens: loc, rule: rule, kind: ve.ErrorKind, url: ve.SchemaURL})
}

func withToken(loc []string, tok string) []string {
	return append(slices.Clip(loc), tok)
}

// pointer writes tokens as an RFC 6901 JSON pointer.
func pointer(tokens []string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		t = strings.ReplaceAll(t, "~", "~0")
		b.WriteString(strings.ReplaceAll(t, "/", "~1"))
	}
	return b.String()
}

// fieldOrder ranks member names: a proposal's fields in the order of the
// proposal field constraints (schema_version, action, reasoning, id, args)
// and its args, then the action descriptor's
// (schemas/action-descriptor.v1.json) in its own order. Unknown names rank
// after all of these.
var fieldOrder = func() map[string]int {
	names := []string{
		"schema_version", "descriptor_version", "action_id", "created_at", "created_by", "intent_summary",
		"action_type", "action", "risk_level", "reasoning", "id", "args",
		"path", "content", "response", "source", "destination",
		"scope", "resources", "preconditions", "effects", "sandbox", "rollback", "confirmation", "audit",
		"operation", "children",
		"filesystem", "network", "ui", "paths", "recursive", "required",
		"max_cpu_ms", "max_memory_mb", "max_disk_mb", "max_duration_ms",
		"paths_exist", "network_available", "user_idle",
		"create", "modify", "delete", "system_state_change",
		"sandbox_type", "allow_network", "max_runs",
		"supported", "rollback_type", "rollback_scope",
		"reason", "cooldown_on_repeat", "log", "log_level", "retain_days",
	}
	m := make(map[string]int, len(names))
	for i, n := range names {
		m[n] = i
	}
	return m
}()

var ruleOrder = map[string]int{
	"type": 0, "required": 1, "additionalProperties": 2, "false": 3, "const": 4, "enum": 5,
	"minLength": 6, "maxLength": 7, "pattern": 8, "minimum": 9, "maximum": 10,
	"minItems": 11, "maxItems": 12, "uniqueItems": 13,
}

func compareViolations(a, b violation) int {
	for i := 0; i < len(a.tokens) && i < len(b.tokens); i++ {
		if c := compareTokens(a.tokens[i], b.tokens[i]); c != 0 {
			return c
		}
	}
	if c := cmp.Compare(len(a.tokens), len(b.tokens)); c != 0 {
		return c
	}
	ra, oka := ruleOrder[a.rule]
	rb, okb := ruleOrder[b.rule]
	switch {
	case oka && okb && ra != rb:
		return cmp.Compare(ra, rb)
	case oka != okb:
		if oka {
			return -1
		}
		return 1
	}
	return cmp.Or(strings.Compare(a.rule, b.rule), strings.Compare(a.url, b.url))
}

func compareTokens(a, b string) int {
	if a == b {
		return 0
	}
	ia, ea := strconv.Atoi(a)
	ib, eb := strconv.Atoi(b)
	if ea == nil && eb == nil {
		return cmp.Compare(ia, ib)
	}
	ra, oka := fieldOrder[a]
	rb, okb := fieldOrder[b]
	switch {
	case oka && okb:
		return cmp.Compare(ra, rb)
	case oka:
		return -1
	case okb:
		return 1
	}
	return strings.Compare(a, b)
}

// patternMeaning explains the patterns of the schemas in words, by the
// schema location that holds them.
var patternMeaning = []struct{ suffix, text string }{
	{"/properties/schema_version", "must be a version 1.x.x (MAJOR.MINOR.PATCH, digits only)"},
	{"/properties/descriptor_version", "must be a version 1.x (MAJOR.MINOR, digits only)"},
	{"/properties/id", "must be a UUID (8-4-4-4-12 hexadecimal digits)"},
	{"/properties/action_id", "must be a UUID (8-4-4-4-12 hexadecimal digits)"},
	{"/properties/created_at", "must be an RFC 3339 timestamp with a time zone"},
	{"/$defs/sandbox_path", "must be a normalised path under /sandbox/: names of at most 255 characters separated by single slashes, no . or .. name, no trailing slash, no control character and none of * ? [ ] \\"},
	{"/$defs/text_file_path/allOf/1", "must end in .txt or .md"},
	{"/$defs/path", "must be a normalised path under /sandbox/: names of at most 255 characters separated by single slashes, no . or .. name, no trailing slash, no control character or backslash"},
	{"/properties/intent_summary", "must be one paragraph, with no line break"},
	{"/properties/reason", "must be one line, with no line break"},
}

func (v violation) message(field string) string {
	f := "Field " + field
	if field == "" {
		f = "The input"
	}
	switch k := v.kind.(type) {
	case *kind.Required:
		return "Missing required field " + field + "."
	case *kind.AdditionalProperties, *kind.FalseSchema:
		return f + " is not allowed here."
	case *kind.Type:
		return f + " must be " + typeWords(k.Want) + "."
	case *kind.Enum:
		if field == "/action" {
			return f + " must name an action of the core schema: THINK, FINISH, READ_FILE, LIST_FILES, WRITE_FILE, CREATE_DIRECTORY, DELETE_FILE or RENAME_FILE (or the same in lower case)."
		}
		want := make([]string, len(k.Want))
		for i, w := range k.Want {
			want[i] = fmt.Sprint(w)
		}
		return f + " must be one of " + strings.Join(want, ", ") + "."
	case *kind.Const:
		return fmt.Sprintf("%s must be %v.", f, k.Want)
	case *kind.MinLength:
		if k.Want == 1 {
			return f + " must not be empty."
		}
		return fmt.Sprintf("%s must have at least %d characters.", f, k.Want)
	case *kind.MaxLength:
		return fmt.Sprintf("%s must have at most %d characters.", f, k.Want)
	case *kind.Pattern:
		for _, m := range patternMeaning {
			if strings.HasSuffix(v.url, m.suffix) {
				return f + " " + m.text + "."
			}
		}
		return f + " must match the pattern " + k.Want + "."
	case *kind.Minimum:
		return f + " must be at least " + k.Want.RatString() + "."
	case *kind.Maximum:
		return f + " must be at most " + k.Want.RatString() + "."
	case *kind.MinItems:
		return fmt.Sprintf("%s must have at least %d items.", f, k.Want)
	case *kind.MaxItems:
		return fmt.Sprintf("%s must have at most %d items.", f, k.Want)
	case *kind.UniqueItems:
		return f + " must not repeat an item."
	}
	return f + " breaks the schema rule " + v.rule + "."
}

func typeWords(want []string) string {
	words := make([]string, len(want))
	for i, w := range want {
		switch w {
		case "object", "array", "integer":
			words[i] = "an " + w
		default:
			words[i] = "a " + w
		}
	}
	return strings.Join(words, " or ")
}
