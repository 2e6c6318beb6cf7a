package schemas

import (
	"bytes"
	"embed"
	"fmt"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The embedded files, by name in FS.
const (
	ProposalFile   = "proposal.v1.json"
	DescriptorFile = "action-descriptor.v1.json"
)

// The $id of each schema, under which NewCompiler registers it.
const (
	ProposalID   = "https://github.com/snapnode/snapnode/raw/main/schemas/" + ProposalFile
	DescriptorID = "https://github.com/snapnode/snapnode/raw/main/schemas/" + DescriptorFile
)

// FS holds the schema files exactly as published.
//
//go:embed proposal.v1.json action-descriptor.v1.json
var FS embed.FS

// NewCompiler returns a JSON Schema compiler (draft 2020-12) that knows
// both embedded schemas by their $id, so a caller may compile either or a
// part of one (such as ProposalID + "#/$defs/write_file_args").
func NewCompiler() (*jsonschema.Compiler, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	for _, f := range []struct{ name, id string }{
		{ProposalFile, ProposalID},
		{DescriptorFile, DescriptorID},
	} {
		raw, err := FS.ReadFile(f.name)
		if err != nil {
			return nil, fmt.Errorf("schemas: %w", err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("schemas: %s: %w", f.name, err)
		}
		if err := c.AddResource(f.id, doc); err != nil {
			return nil, fmt.Errorf("schemas: %s: %w", f.name, err)
		}
	}
	return c, nil
}

var compiled = sync.OnceValues(func() ([2]*jsonschema.Schema, error) {
	var out [2]*jsonschema.Schema
	c, err := NewCompiler()
	if err != nil {
		return out, err
	}
	for i, id := range []string{ProposalID, DescriptorID} {
		if out[i], err = c.Compile(id); err != nil {
			return out, fmt.Errorf("schemas: compile %s: %w", id, err)
		}
	}
	return out, nil
})

// Proposal returns the compiled proposal schema. The files are embedded
// and their compilation is tested, so a failure here is a build defect: it
// panics, as regexp.MustCompile does.
func Proposal() *jsonschema.Schema { return must(0) }

// ActionDescriptor returns the compiled action descriptor schema. It panics
// only if the embedded files do not compile (see Proposal).
func ActionDescriptor() *jsonschema.Schema { return must(1) }

func must(i int) *jsonschema.Schema {
	s, err := compiled()
	if err != nil {
		panic(err)
	}
	return s[i]
}
