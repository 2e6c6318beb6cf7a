package proposal_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/executor/proposal"
)

// A proposal of another major version gets the structured error
// SCHEMA_VERSION_INCOMPATIBLE.
func ExampleParse_incompatible() {
	_, err := proposal.Parse([]byte(`{"schema_version":"2.0.0","action":"read_file","args":{"path":"/tmp/a.txt"}}`))
	out, _ := json.Marshal(err)
	fmt.Println(errors.Is(err, proposal.ErrVersionIncompatible))
	fmt.Println(string(out))
	// Output:
	// true
	// {"error_code":"SCHEMA_VERSION_INCOMPATIBLE","message":"Unsupported proposal schema version.","received_version":"2.0.0","supported_version_range":"1.x.x"}
}

// Generic command execution is refused on principle, in any letter case.
func ExampleParse_notAllowed() {
	_, err := proposal.Parse([]byte(`{"schema_version":"1.2.0","action":"Run_Command","args":{"command":"rm -rf /"}}`))
	out, _ := json.Marshal(err)
	fmt.Println(string(out))
	// Output:
	// {"error_code":"ACTION_NOT_ALLOWED","message":"Generic command execution is not permitted in the core schema."}
}

// A validation error names the field (a JSON pointer) and the rule.
func ExampleParse_validation() {
	_, err := proposal.Parse([]byte(`{"schema_version":"1.0.1","id":"3f2b8c1e-5d4a-4e6f-9a7b-1c2d3e4f5a6b",
		"reasoning":"I need to save the log","action":"WRITE_FILE",
		"args":{"path":"/sandbox/run.sh","content":"Hello World!"}}`))
	var pe *proposal.Error
	if errors.As(err, &pe) {
		fmt.Println(pe.Field, pe.Rule)
		fmt.Println(pe.Message)
	}
	// Output:
	// /args/path pattern
	// Field /args/path must end in .txt or .md.
}

// A read's result is built from the content the executor read, with the
// action as the proposer spelled it.
func ExampleReadFileSuccess() {
	p, err := proposal.Parse([]byte(`{"schema_version":"1.2.3","id":"0b6f2a8e-3c1d-4f5e-8a9b-7c6d5e4f3a2b",
		"reasoning":"I need the content of a.txt","action":"read_file","args":{"path":"/sandbox/a.txt"}}`))
	if err != nil {
		panic(err)
	}
	out, _ := json.Marshal(proposal.ReadFileSuccess(p, "hello world\n"))
	fmt.Println(string(out))
	// Output:
	// {"status":"success","action":"read_file","result":{"content":"hello world\n"}}
}

// The host derives the descriptor it judges: a delete is HIGH risk, needs
// confirmation by default, and declares exactly the file it removes.
func ExampleDescribe() {
	p, err := proposal.Parse([]byte(`{"schema_version":"1.0.0","id":"0b6f2a8e-3c1d-4f5e-8a9b-7c6d5e4f3a2b",
		"reasoning":"old report","action":"DELETE_FILE","args":{"path":"/sandbox/old/report.md"}}`))
	if err != nil {
		panic(err)
	}
	d := proposal.NewDefaults()
	d.Now = func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	desc := proposal.Describe(p, d)
	fmt.Println(desc.ActionType, desc.RiskLevel, desc.Sandbox.Required, desc.Rollback.RollbackType)
	fmt.Println(desc.Effects.Filesystem.Delete, desc.Confirmation.Required, desc.Confirmation.Reason)
	// Output:
	// FILE_DELETE HIGH true filesystem_snapshot
	// [/sandbox/old/report.md] true Delete the file /sandbox/old/report.md.
}

// A peer's descriptor whose effects do not cover what its operation does is
// refused: undeclared effects are a hard fail (one of the descriptor's
// forbidden patterns).
func ExampleParseDescriptor() {
	p, _ := proposal.Parse([]byte(`{"schema_version":"1.0.0","id":"0b6f2a8e-3c1d-4f5e-8a9b-7c6d5e4f3a2b",
		"reasoning":"r","action":"WRITE_FILE","args":{"path":"/sandbox/a.txt","content":"x"}}`))
	d := proposal.Describe(p, proposal.NewDefaults())
	d.Effects.Filesystem.Create, d.Effects.Filesystem.Modify = []string{}, []string{}
	raw, _ := json.Marshal(d)
	_, err := proposal.ParseDescriptor(raw)
	var pe *proposal.Error
	if errors.As(err, &pe) {
		fmt.Println(pe.Code, pe.Field, pe.Rule)
	}
	// Output:
	// VALIDATION_ERROR /effects/filesystem/create undeclaredEffect
}

// Steps run in one sandbox as a composite: its risk is its highest step's.
func ExampleCompose() {
	var steps []*proposal.Descriptor
	for _, action := range []string{
		`"CREATE_DIRECTORY","args":{"path":"/sandbox/notes"}`,
		`"WRITE_FILE","args":{"path":"/sandbox/notes/a.md","content":"# A"}`,
	} {
		p, err := proposal.Parse([]byte(`{"schema_version":"1.0.0","id":"0b6f2a8e-3c1d-4f5e-8a9b-7c6d5e4f3a2b","reasoning":"r","action":` + action + `}`))
		if err != nil {
			panic(err)
		}
		steps = append(steps, proposal.Describe(p, proposal.NewDefaults()))
	}
	c, err := proposal.Compose(steps, proposal.NewDefaults())
	if err != nil {
		panic(err)
	}
	fmt.Println(c.ActionType, c.RiskLevel, len(c.Children), c.Effects.Filesystem.Create)
	// Output:
	// MULTI_STEP_COMPOSITE MEDIUM 2 [/sandbox/notes /sandbox/notes/a.md]
}
