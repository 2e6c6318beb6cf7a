// Package schemas embeds the JSON Schema (2020-12) files snapnode enforces
// and publishes for other implementations: proposal.v1.json (seed 000, 004)
// and action-descriptor.v1.json (seed 001). The files are the contract; the
// Go code that applies them (executor/proposal) is tested against them, so
// they cannot drift apart.
//
// Validating a decoded JSON value (maps, slices, strings, float64 or
// json.Number, bool, nil) with the compiled schema:
//
//	var v any
//	if err := json.Unmarshal(data, &v); err != nil { … }
//	if err := schemas.Proposal().Validate(v); err != nil {
//		var ve *jsonschema.ValidationError // errors.As: InstanceLocation, ErrorKind
//	}
//
// The compiled schemas are built once, on first use. Formats (uuid,
// date-time) are annotations only, as 2020-12 defaults to; every format
// the files rely on is also written as a pattern, so any conforming
// validator reaches the same verdict. The files are served as they are by FS,
// for publication:
//
//	raw, _ := fs.ReadFile(schemas.FS, schemas.ProposalFile)
//
// The descriptor schema refers to the proposal schema's argument rules
// (proposal.v1.json#/$defs/…); a validator needs both files, which
// NewCompiler provides.
package schemas
