package proposal

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/schemas"
)

// Kind is an action of the core schema, in its canonical upper-case name.
type Kind string

// The actions a proposal may name (schemas/proposal.v1.json).
const (
	KindThink           Kind = "THINK"
	KindFinish          Kind = "FINISH"
	KindReadFile        Kind = "READ_FILE"
	KindListFiles       Kind = "LIST_FILES"
	KindWriteFile       Kind = "WRITE_FILE"
	KindCreateDirectory Kind = "CREATE_DIRECTORY"
	KindDeleteFile      Kind = "DELETE_FILE"
	KindRenameFile      Kind = "RENAME_FILE"
)

// Kinds returns every action, in the order of the proposal schema's list.
func Kinds() []Kind {
	return []Kind{KindThink, KindFinish, KindReadFile, KindListFiles, KindWriteFile,
		KindCreateDirectory, KindDeleteFile, KindRenameFile}
}

// kindOf accepts the canonical name and its all-lower-case spelling
// (read_file, as the proposal schema versioning strategy writes it); nothing
// else.
func kindOf(s string) (Kind, bool) {
	k := Kind(strings.ToUpper(s))
	if k.ActionType() == "" || (s != string(k) && s != strings.ToLower(s)) {
		return "", false
	}
	return k, true
}

// Action is a proposal's action: its kind and the spelling the proposer
// used, which the runtime output echoes ("read_file" is answered
// "read_file").
type Action struct {
	Kind     Kind
	Spelling string
}

// Args are the action's arguments. Only the fields of the action are set:
// Path for READ_FILE, LIST_FILES, WRITE_FILE, CREATE_DIRECTORY and
// DELETE_FILE; Content for WRITE_FILE; Response for FINISH; Source and
// Destination for RENAME_FILE; none for THINK.
type Args struct {
	Path        string `json:"path,omitempty"`
	Content     string `json:"content,omitempty"`
	Response    string `json:"response,omitempty"`
	Source      string `json:"source,omitempty"`
	Destination string `json:"destination,omitempty"`
}

// Proposal is one validated action proposed by an untrusted agent.
type Proposal struct {
	SchemaVersion string
	ID            string
	Reasoning     string
	Action        Action
	Args          Args
}

var semver = regexp.MustCompile(`^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)$`)

// Parse validates one proposal and returns it. Every failure is an *Error,
// checked in this order:
//
//  1. the bytes are one JSON object, without duplicate names, invalid
//     UTF-8 or out-of-range numbers (ErrValidation, rule jsonSyntax,
//     duplicateName, invalidUTF8, number or type);
//  2. schema_version is present, a string and MAJOR.MINOR.PATCH
//     (ErrValidation, rule required, type or pattern), of major 1
//     (ErrVersionIncompatible with received_version and
//     supported_version_range "1.x.x");
//  3. action is not run_command or spawn_process in any letter case
//     (ErrActionNotAllowed);
//  4. the proposal schema, schemas/proposal.v1.json (ErrValidation naming
//     the first failing field as a JSON pointer, and the keyword).
func Parse(data []byte) (*Proposal, error) {
	obj, err := decodeObject(data)
	if err != nil {
		return nil, err
	}
	if err := checkVersion(obj, "", "schema_version", semver, SupportedProposalVersions, msgProposalVersion); err != nil {
		return nil, err
	}
	if a, ok := obj["action"].(string); ok && isCommand(a) {
		return nil, notAllowed("/action", msgCommand)
	}
	if err := schemas.Proposal().Validate(obj); err != nil {
		return nil, fromSchema(err)
	}
	return fromObject(obj), nil
}

// checkVersion applies the version rules to obj[name], found at the JSON
// pointer at: a validation error
// if it is missing, not a string or ill-formed, ErrVersionIncompatible if
// its major is not 1.
func checkVersion(obj map[string]any, at, name string, form *regexp.Regexp, supported, msg string) *Error {
	field := at + "/" + name
	raw, present := obj[name]
	if !present {
		return validation(field, "required", "Missing required field "+field+".")
	}
	s, ok := raw.(string)
	if !ok {
		return validation(field, "type", "Field "+field+" must be a string.")
	}
	m := form.FindStringSubmatch(s)
	if m == nil {
		return validation(field, "pattern", fmt.Sprintf("Field %s must be a version %s (digits only).", field, supported))
	}
	if m[1] != "1" {
		return &Error{Code: ErrVersionIncompatible, Message: msg, ReceivedVersion: s,
			SupportedVersionRange: supported, Field: field}
	}
	return nil
}

// isCommand reports whether an action names generic command execution.
func isCommand(action string) bool {
	switch asciiFold(action) {
	case "run_command", "spawn_process":
		return true
	}
	return false
}

// fromObject reads a proposal the schema has accepted.
func fromObject(obj map[string]any) *Proposal {
	spelling := obj["action"].(string)
	k, _ := kindOf(spelling)
	p := &Proposal{
		SchemaVersion: obj["schema_version"].(string),
		ID:            obj["id"].(string),
		Reasoning:     obj["reasoning"].(string),
		Action:        Action{Kind: k, Spelling: spelling},
		Args:          argsOf(obj["args"].(map[string]any)),
	}
	return p
}

func argsOf(m map[string]any) Args {
	str := func(name string) string { s, _ := m[name].(string); return s }
	return Args{Path: str("path"), Content: str("content"), Response: str("response"),
		Source: str("source"), Destination: str("destination")}
}

// MarshalJSON writes the proposal as it travels: schema_version, id,
// reasoning, action (as the proposer spelled it) and args.
func (p *Proposal) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		SchemaVersion string `json:"schema_version"`
		ID            string `json:"id"`
		Reasoning     string `json:"reasoning"`
		Action        string `json:"action"`
		Args          Args   `json:"args"`
	}{p.SchemaVersion, p.ID, p.Reasoning, p.Action.Spelling, p.Args})
}

// Paths returns the paths the action reads or changes, in argument order.
func (p *Proposal) Paths() []string { return opPaths(p.Action.Kind, p.Args) }

func opPaths(k Kind, a Args) []string {
	switch k {
	case KindRenameFile:
		return []string{a.Source, a.Destination}
	case KindThink, KindFinish:
		return nil
	}
	return []string{a.Path}
}
