package proposal

import (
	"bytes"

	"github.com/go-json-experiment/json/jsontext"
)

// Format is what a JSON value sent to the host is: a proposal, an action
// descriptor, or plain data the executor never sees.
type Format int

// The formats Classify tells apart.
const (
	// FormatData is anything that is neither a proposal nor a descriptor:
	// not a JSON object, or an object without their top-level members.
	FormatData Format = iota
	// FormatProposal is an object with a top-level schema_version, or
	// with the fields of a proposal (action and args) and no version at
	// all: Parse judges it, and refuses the second with a validation
	// error naming /schema_version rather than letting it pass for data.
	FormatProposal
	// FormatDescriptor is an object with a top-level descriptor_version
	// and no schema_version: ParseDescriptor judges it.
	FormatDescriptor
)

// String names the format.
func (f Format) String() string {
	switch f {
	case FormatProposal:
		return "proposal"
	case FormatDescriptor:
		return "descriptor"
	}
	return "data"
}

// Classify says what data is from its top-level member names alone,
// spelled exactly (schema_version, descriptor_version, action, args); it
// does not validate. A proposal that forgot its schema_version is still a
// proposal: a peer that sends one learns what is missing instead of
// seeing its action taken for data and ignored. Malformed JSON is
// classified by the names read before the fault, so that Parse or
// ParseDescriptor reports the fault; a value that is not an object is
// FormatData.
func Classify(data []byte) Format {
	// Duplicate names and invalid UTF-8 do not stop the scan: the parsers
	// refuse them with errors that name them.
	d := jsontext.NewDecoder(bytes.NewReader(data),
		jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return FormatData
	}
	var schema, descriptor, action, args bool
	for d.PeekKind() == '"' {
		name, err := d.ReadToken()
		if err != nil {
			break
		}
		switch name.String() {
		case "schema_version":
			schema = true
		case "descriptor_version":
			descriptor = true
		case "action":
			action = true
		case "args":
			args = true
		}
		if schema || d.SkipValue() != nil {
			break
		}
	}
	switch {
	case schema:
		return FormatProposal
	case descriptor:
		return FormatDescriptor
	case action && args:
		return FormatProposal
	}
	return FormatData
}
