package schemas

import (
	"bytes"
	"embed"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/snapnode/snapnode/internal/jsonenc"
)

// The embedded files, by name in FS.
const (
	ProposalFile      = "proposal.v1.json"
	DescriptorFile    = "action-descriptor.v1.json"
	AgentResponseFile = "agent-response.v1.json"
	AgentAnswerFile   = "agent-answer.v1.json"
	JobManifestFile   = "job-manifest.v1.json"
	JobHistoryFile    = "job-history.v1.json"
	LogLineFile       = "log-line.v1.json"
	JobRequestFile    = "job-request.v1.json"
	WorkerObsFile     = "worker-observation.v1.json"
	WorkerAnswerFile  = "worker-answer.v1.json"
)

// BaseURL is where the files are published; each $id is BaseURL followed
// by the file's name.
const BaseURL = "https://github.com/snapnode/snapnode/raw/main/schemas/"

// The $id of each schema, under which NewCompiler registers it.
const (
	ProposalID      = BaseURL + ProposalFile
	DescriptorID    = BaseURL + DescriptorFile
	AgentResponseID = BaseURL + AgentResponseFile
	AgentAnswerID   = BaseURL + AgentAnswerFile
	JobManifestID   = BaseURL + JobManifestFile
	JobHistoryID    = BaseURL + JobHistoryFile
	LogLineID       = BaseURL + LogLineFile
	JobRequestID    = BaseURL + JobRequestFile
	WorkerObsID     = BaseURL + WorkerObsFile
	WorkerAnswerID  = BaseURL + WorkerAnswerFile
)

// FS holds the schema files exactly as published.
//
//go:embed proposal.v1.json action-descriptor.v1.json agent-response.v1.json agent-answer.v1.json job-manifest.v1.json job-history.v1.json log-line.v1.json job-request.v1.json worker-observation.v1.json worker-answer.v1.json
var FS embed.FS

// files lists the embedded schemas; the accessors index it.
var files = [...]struct{ name, id string }{
	{ProposalFile, ProposalID},
	{DescriptorFile, DescriptorID},
	{AgentResponseFile, AgentResponseID},
	{AgentAnswerFile, AgentAnswerID},
	{JobManifestFile, JobManifestID},
	{JobHistoryFile, JobHistoryID},
	{LogLineFile, LogLineID},
	{JobRequestFile, JobRequestID},
	{WorkerObsFile, WorkerObsID},
	{WorkerAnswerFile, WorkerAnswerID},
}

const (
	iProposal = iota
	iDescriptor
	iAgentResponse
	iAgentAnswer
	iJobManifest
	iJobHistory
	iLogLine
	iJobRequest
	iWorkerObs
	iWorkerAnswer
)

// NewCompiler returns a JSON Schema compiler (draft 2020-12) that knows
// every embedded schema by its $id, so a caller may compile any of them or
// a part of one (such as ProposalID + "#/$defs/write_file_args"). The
// schemas that refer to others (the descriptor, the agent answer, the job
// history) resolve those references here, without loading anything.
func NewCompiler() (*jsonschema.Compiler, error) {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	for _, f := range files {
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

var compiled = sync.OnceValues(func() ([len(files)]*jsonschema.Schema, error) {
	var out [len(files)]*jsonschema.Schema
	c, err := NewCompiler()
	if err != nil {
		return out, err
	}
	for i, f := range files {
		if out[i], err = c.Compile(f.id); err != nil {
			return out, fmt.Errorf("schemas: compile %s: %w", f.id, err)
		}
	}
	return out, nil
})

// Proposal returns the compiled proposal schema. The files are embedded
// and their compilation is tested, so a failure here is a build defect: it
// panics, as regexp.MustCompile does.
func Proposal() *jsonschema.Schema { return must(iProposal) }

// ActionDescriptor returns the compiled action descriptor schema. It panics
// only if the embedded files do not compile (see Proposal).
func ActionDescriptor() *jsonschema.Schema { return must(iDescriptor) }

// AgentResponse returns the compiled agent response schema: a worker's
// report on its phase (COMPLETED, STUCK or RETRY). It panics only if the
// embedded files do not compile (see Proposal).
func AgentResponse() *jsonschema.Schema { return must(iAgentResponse) }

// AgentAnswer returns the compiled agent answer schema: exactly one of a
// proposal and an agent response, what a model may answer at each step.
// It panics only if the embedded files do not compile (see Proposal).
func AgentAnswer() *jsonschema.Schema { return must(iAgentAnswer) }

// JobManifest returns the compiled job manifest schema (snapnode job show
// --format json). It panics only if the embedded files do not compile (see
// Proposal).
func JobManifest() *jsonschema.Schema { return must(iJobManifest) }

// JobHistory returns the compiled job history schema (snapnode job history
// --format json). It panics only if the embedded files do not compile (see
// Proposal).
func JobHistory() *jsonschema.Schema { return must(iJobHistory) }

// LogLine returns the compiled schema of a line of the node's JSON log
// (log_format = json). It panics only if the embedded files do not compile
// (see Proposal).
func LogLine() *jsonschema.Schema { return must(iLogLine) }

// JobRequest returns the compiled job request schema: the first line the
// node writes to an external worker, and the data part with which a peer
// starts a job. It panics only if the embedded files do not compile (see
// Proposal).
func JobRequest() *jsonschema.Schema { return must(iJobRequest) }

// WorkerObservation returns the compiled schema of the lines the node
// writes to an external worker after the job request. It panics only if
// the embedded files do not compile (see Proposal).
func WorkerObservation() *jsonschema.Schema { return must(iWorkerObs) }

// WorkerAnswer returns the compiled schema of a line an external worker
// writes: a proposal envelope or an agent response. It panics only if the
// embedded files do not compile (see Proposal).
func WorkerAnswer() *jsonschema.Schema { return must(iWorkerAnswer) }

func must(i int) *jsonschema.Schema {
	s, err := compiled()
	if err != nil {
		panic(err)
	}
	return s[i]
}

// AgentAnswerBundle returns the agent answer schema as one self-contained
// document, for a model server's structured-output format
// (response_format json_schema): servers do not fetch the files a $ref
// names. The proposal and agent response schemas are inlined under $defs
// (as "proposal" and "agent_response", their own $defs beside them), every
// $ref is local ("#/$defs/…") and the document has no $id. It accepts
// exactly what AgentAnswer accepts. Each call returns a new copy; it
// panics only if the embedded files cannot be bundled (see Proposal).
func AgentAnswerBundle() []byte {
	b, err := answerBundle()
	if err != nil {
		panic(err)
	}
	return bytes.Clone(b)
}

var answerBundle = sync.OnceValues(func() ([]byte, error) {
	load := func(name string) (map[string]any, error) {
		raw, err := FS.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("schemas: %w", err)
		}
		d := json.NewDecoder(bytes.NewReader(raw))
		d.UseNumber()
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			return nil, fmt.Errorf("schemas: %s: %w", name, err)
		}
		return m, nil
	}
	root, err := load(AgentAnswerFile)
	if err != nil {
		return nil, err
	}
	defs := map[string]any{}
	addDefs := func(from string, m map[string]any) error {
		d, _ := m["$defs"].(map[string]any)
		for k, v := range d {
			if _, dup := defs[k]; dup {
				return fmt.Errorf("schemas: bundle: $defs/%s of %s is defined twice", k, from)
			}
			defs[k] = v
		}
		delete(m, "$defs")
		return nil
	}
	if err := addDefs(AgentAnswerFile, root); err != nil {
		return nil, err
	}
	inline := map[string]string{ProposalID: "proposal", AgentResponseID: "agent_response"}
	for _, f := range []string{ProposalFile, AgentResponseFile} {
		doc, err := load(f)
		if err != nil {
			return nil, err
		}
		if err := addDefs(f, doc); err != nil {
			return nil, err
		}
		key := inline[BaseURL+f]
		if _, dup := defs[key]; dup {
			return nil, fmt.Errorf("schemas: bundle: $defs/%s is defined twice", key)
		}
		delete(doc, "$schema")
		delete(doc, "$id")
		defs[key] = doc
	}
	delete(root, "$id")
	root["$defs"] = defs
	if err := localRefs(root, inline); err != nil {
		return nil, err
	}
	b, err := jsonenc.Marshal(root)
	if err != nil {
		return nil, fmt.Errorf("schemas: bundle: %w", err)
	}
	return b, nil
})

// localRefs rewrites, in place, every $ref to an inlined schema (whole, or
// one of its $defs) into a reference inside the bundle; a reference to
// anything else, or a nested $id, is an error.
func localRefs(v any, inline map[string]string) error {
	switch n := v.(type) {
	case map[string]any:
		if _, ok := n["$id"]; ok {
			return fmt.Errorf("schemas: bundle: nested $id %v", n["$id"])
		}
		if r, ok := n["$ref"].(string); ok {
			if !strings.HasPrefix(r, "#") && !strings.Contains(r, "://") {
				r = BaseURL + r // relative to the files' $id
			}
			base, frag, _ := strings.Cut(r, "#")
			switch key, known := inline[base]; {
			case base == "" && strings.HasPrefix(frag, "/$defs/"):
			case known && frag == "":
				r = "#/$defs/" + key
			case known && strings.HasPrefix(frag, "/$defs/"):
				r = "#" + frag
			default:
				return fmt.Errorf("schemas: bundle: cannot make $ref %q local", n["$ref"])
			}
			n["$ref"] = r
		}
		for _, c := range n {
			if err := localRefs(c, inline); err != nil {
				return err
			}
		}
	case []any:
		for _, c := range n {
			if err := localRefs(c, inline); err != nil {
				return err
			}
		}
	}
	return nil
}
