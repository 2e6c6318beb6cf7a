package proposal

import (
	"bytes"
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Code is the error_code of a structured error. A Code is itself an error,
// so a typed *Error can be tested with errors.Is(err, proposal.ErrActionNotAllowed).
type Code string

// The structured errors of the runtime output (the proposal schema
// versioning strategy, docs/conformance.md: an incompatible version gets a
// structured error, an action not allowed a policy error, invalid args a
// validation error).
const (
	// ErrVersionIncompatible: schema_version (or descriptor_version) is
	// well formed but of another major. The JSON carries received_version
	// and supported_version_range.
	ErrVersionIncompatible Code = "SCHEMA_VERSION_INCOMPATIBLE"
	// ErrActionNotAllowed: the action is one the core never runs
	// (run_command, spawn_process, commands, packages, network, UI…).
	ErrActionNotAllowed Code = "ACTION_NOT_ALLOWED"
	// ErrValidation: anything else that breaks the schema or the rules it
	// cannot express (the descriptor's forbidden patterns, the host's
	// clock). The JSON carries field (a JSON pointer) and rule.
	ErrValidation Code = "VALIDATION_ERROR"
)

// Error makes a Code usable as an errors.Is target; it is the code itself,
// so a Code prints as its error_code.
func (c Code) Error() string { return string(c) }

// The version ranges this runtime supports, as reported in
// supported_version_range.
const (
	SupportedProposalVersions   = "1.x.x"
	SupportedDescriptorVersions = "1.x"
)

// The exact messages the proposal schema versioning strategy gives these
// errors.
const (
	msgProposalVersion = "Unsupported proposal schema version."
	msgCommand         = "Generic command execution is not permitted in the core schema."
)

// Error is the structured error of the runtime output. Its JSON is the shape
// of the proposal schema versioning strategy's examples: error_code and
// message, then for SCHEMA_VERSION_INCOMPATIBLE received_version and
// supported_version_range, for VALIDATION_ERROR field and rule, and nothing
// more for ACTION_NOT_ALLOWED.
type Error struct {
	Code    Code
	Message string

	// ReceivedVersion and SupportedVersionRange are set for
	// ErrVersionIncompatible.
	ReceivedVersion       string
	SupportedVersionRange string

	// Field is the JSON pointer (RFC 6901) of the offending value, "" for
	// the whole document. Rule names what it broke: a JSON Schema keyword
	// (required, additionalProperties, type, enum, const, pattern, minLength,
	// …), a JSON rule (jsonSyntax, duplicateName, invalidUTF8, number) or one
	// of the descriptor's forbidden patterns (undeclaredEffect,
	// effectOutsideOperation, persistenceOutsideScope, implicitScope,
	// riskFloor, globSyntax, wildcardBudget, format) or of the host's clock
	// (clockSkew). Both are set for ErrValidation; Field is also set for
	// ErrActionNotAllowed (for logs; its JSON, as the versioning strategy
	// shows it, has no field).
	Field string
	Rule  string

	// Available lists what the host offers instead of the value refused,
	// for an ErrActionNotAllowed on a choice the host does not have (the
	// sandbox types, for a descriptor asking for a container or a VM).
	// When set, the JSON carries field and available after the message.
	Available []string

	// Err is the underlying cause, if any (a JSON decoding error); it is
	// not part of the JSON.
	Err error
}

// Error returns the code, the message and, if set, the field and rule.
func (e *Error) Error() string {
	s := "proposal: " + string(e.Code) + ": " + e.Message
	if e.Code == ErrValidation || e.Field != "" {
		s += fmt.Sprintf(" (field %q, rule %s)", e.Field, e.Rule)
	}
	return s
}

// Is reports whether target is e's Code.
func (e *Error) Is(target error) bool {
	c, ok := target.(Code)
	return ok && c == e.Code
}

// Unwrap returns the underlying cause, if any.
func (e *Error) Unwrap() error { return e.Err }

// MarshalJSON writes the structured error, fields in the order of the
// proposal schema versioning strategy's examples; an ACTION_NOT_ALLOWED with
// Available set adds field and available.
func (e *Error) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	enc := jsontext.NewEncoder(&b)
	tok := func(ts ...jsontext.Token) error {
		for _, t := range ts {
			if err := enc.WriteToken(t); err != nil {
				return err
			}
		}
		return nil
	}
	err := tok(jsontext.BeginObject,
		jsontext.String("error_code"), jsontext.String(string(e.Code)),
		jsontext.String("message"), jsontext.String(e.Message))
	switch e.Code {
	case ErrVersionIncompatible:
		err = joinErr(err, tok(
			jsontext.String("received_version"), jsontext.String(e.ReceivedVersion),
			jsontext.String("supported_version_range"), jsontext.String(e.SupportedVersionRange)))
	case ErrValidation:
		err = joinErr(err, tok(
			jsontext.String("field"), jsontext.String(e.Field),
			jsontext.String("rule"), jsontext.String(e.Rule)))
	case ErrActionNotAllowed:
		if e.Available != nil {
			err = joinErr(err, tok(
				jsontext.String("field"), jsontext.String(e.Field),
				jsontext.String("available"), jsontext.BeginArray))
			for _, a := range e.Available {
				err = joinErr(err, tok(jsontext.String(a)))
			}
			err = joinErr(err, tok(jsontext.EndArray))
		}
	}
	err = joinErr(err, tok(jsontext.EndObject))
	if err != nil {
		return nil, fmt.Errorf("proposal: marshal error: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// UnmarshalJSON reads a structured error, as a peer or a log would hand it
// back. Unknown members are rejected.
func (e *Error) UnmarshalJSON(data []byte) error {
	var w struct {
		Code                  Code     `json:"error_code"`
		Message               string   `json:"message"`
		ReceivedVersion       string   `json:"received_version,omitempty"`
		SupportedVersionRange string   `json:"supported_version_range,omitempty"`
		Field                 string   `json:"field,omitempty"`
		Rule                  string   `json:"rule,omitempty"`
		Available             []string `json:"available,omitempty"`
	}
	if err := json.Unmarshal(data, &w, json.RejectUnknownMembers(true)); err != nil {
		return err
	}
	*e = Error{Code: w.Code, Message: w.Message, ReceivedVersion: w.ReceivedVersion,
		SupportedVersionRange: w.SupportedVersionRange, Field: w.Field, Rule: w.Rule, Available: w.Available}
	return nil
}

func joinErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

func validation(field, rule, msg string) *Error {
	return &Error{Code: ErrValidation, Message: msg, Field: field, Rule: rule}
}

func notAllowed(field, msg string) *Error {
	return &Error{Code: ErrActionNotAllowed, Message: msg, Field: field}
}
