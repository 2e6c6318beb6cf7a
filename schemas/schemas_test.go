package schemas_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/snapnode/snapnode/schemas"
	"github.com/snapnode/snapnode/tasks"
)

// TestFilesAreServedAsWritten: FS holds the files of this folder byte for
// byte, each declares the draft and the $id the package announces, and
// nothing else is embedded.
func TestFilesAreServedAsWritten(t *testing.T) {
	want := map[string]string{
		schemas.ProposalFile:      schemas.ProposalID,
		schemas.DescriptorFile:    schemas.DescriptorID,
		schemas.AgentResponseFile: schemas.AgentResponseID,
		schemas.AgentAnswerFile:   schemas.AgentAnswerID,
		schemas.JobManifestFile:   schemas.JobManifestID,
		schemas.JobHistoryFile:    schemas.JobHistoryID,
		schemas.LogLineFile:       schemas.LogLineID,
		schemas.JobRequestFile:    schemas.JobRequestID,
		schemas.WorkerObsFile:     schemas.WorkerObsID,
		schemas.WorkerAnswerFile:  schemas.WorkerAnswerID,
	}
	entries, err := fs.ReadDir(schemas.FS, ".")
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(want) {
		t.Errorf("FS holds %d files, want %d", len(entries), len(want))
	}
	for name, id := range want {
		embedded, err := fs.ReadFile(schemas.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		onDisk, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(embedded, onDisk) {
			t.Errorf("%s: embedded copy differs from the file", name)
		}
		var doc struct {
			Schema string `json:"$schema"`
			ID     string `json:"$id"`
		}
		if err := json.Unmarshal(embedded, &doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if doc.Schema != "https://json-schema.org/draft/2020-12/schema" || doc.ID != id {
			t.Errorf("%s: $schema %q, $id %q; want draft 2020-12 and %q", name, doc.Schema, doc.ID, id)
		}
	}
}

// allFiles are the embedded files, in the order the package lists them.
var allFiles = []string{schemas.ProposalFile, schemas.DescriptorFile, schemas.AgentResponseFile,
	schemas.AgentAnswerFile, schemas.JobManifestFile, schemas.JobHistoryFile, schemas.LogLineFile,
	schemas.JobRequestFile, schemas.WorkerObsFile, schemas.WorkerAnswerFile}

// TestEveryObjectIsClosed walks every file: every subschema that declares
// properties (outside the conditions that only narrow them) also sets
// additionalProperties to false, so no member beyond the schema's is
// accepted anywhere. (The open members, a job history's observation output
// and recovery point metadata, declare no properties.)
func TestEveryObjectIsClosed(t *testing.T) {
	for _, name := range allFiles {
		if name == schemas.LogLineFile {
			continue // a log line is open by design: each event adds its own attributes
		}
		raw, err := fs.ReadFile(schemas.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		var doc any
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatal(err)
		}
		walk(doc, name, func(path string, m map[string]any) {
			props, hasProps := m["properties"]
			if !hasProps || inCondition(path) {
				return
			}
			if ap, ok := m["additionalProperties"]; !ok || ap != false {
				t.Errorf("%s: properties %v without additionalProperties false", path, keys(props))
			}
		})
	}
}

// inCondition tells the branches of if/then/else and the allOf members
// that only narrow properties declared (and closed) elsewhere.
func inCondition(path string) bool {
	for _, kw := range []string{"/if", "/then", "/else", "/allOf/"} {
		if strings.Contains(path, kw) {
			return true
		}
	}
	return false
}

func walk(v any, path string, f func(string, map[string]any)) {
	switch n := v.(type) {
	case map[string]any:
		f(path, n)
		for k, c := range n {
			walk(c, path+"/"+k, f)
		}
	case []any:
		for i, c := range n {
			walk(c, path+"/"+strings.Repeat("#", i+1), f)
		}
	}
}

func keys(v any) []string {
	m, _ := v.(map[string]any)
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// TestCompile: every schema compiles, once, and the simplest cases are
// judged right.
func TestCompile(t *testing.T) {
	for name, get := range accessors {
		if s := get(); s == nil || s != get() {
			t.Fatalf("%s: not compiled once", name)
		}
	}
	p := schemas.Proposal()
	valid := map[string]any{"schema_version": "1.0.0", "id": "6a1f0c3e-8b2d-4c7a-9e5f-2d3c4b5a6978",
		"reasoning": "r", "action": "THINK", "args": map[string]any{}}
	if err := p.Validate(valid); err != nil {
		t.Errorf("valid proposal refused: %v", err)
	}
	valid["extra"] = true
	if err := p.Validate(valid); err == nil {
		t.Error("proposal with an extra member accepted")
	}
	if err := schemas.ActionDescriptor().Validate(map[string]any{}); err == nil {
		t.Error("empty descriptor accepted")
	}
	c, err := schemas.NewCompiler()
	if err != nil {
		t.Fatal(err)
	}
	args, err := c.Compile(schemas.ProposalID + "#/$defs/write_file_args")
	if err != nil {
		t.Fatal(err)
	}
	if err := args.Validate(map[string]any{"path": "/sandbox/a.txt", "content": "x"}); err != nil {
		t.Errorf("write args refused: %v", err)
	}
	if err := args.Validate(map[string]any{"path": "/sandbox/a.exe", "content": "x"}); err == nil {
		t.Error("write args to a.exe accepted")
	}
}

// accessors maps each schema, by its file's name without ".v1.json" (the
// name of its folder in testdata), to its accessor.
var accessors = map[string]func() *jsonschema.Schema{
	"proposal":           schemas.Proposal,
	"action-descriptor":  schemas.ActionDescriptor,
	"agent-response":     schemas.AgentResponse,
	"agent-answer":       schemas.AgentAnswer,
	"job-manifest":       schemas.JobManifest,
	"job-history":        schemas.JobHistory,
	"log-line":           schemas.LogLine,
	"job-request":        schemas.JobRequest,
	"worker-observation": schemas.WorkerObservation,
	"worker-answer":      schemas.WorkerAnswer,
}

// withExamples are the schemas whose examples are in testdata; the proposal
// and descriptor cases are in executor/proposal, run through the Go code
// too.
var withExamples = []string{"agent-response", "agent-answer", "job-manifest", "job-history", "log-line", "job-request", "worker-observation", "worker-answer"}

// minInvalid is how many invalid examples each schema of withExamples has
// at least, each named for the one rule it breaks.
const minInvalid = 6

type example struct {
	name string // folder/valid|invalid/file
	doc  any
}

// examples reads testdata/<schema>/<kind>/*.json. A file that is not one
// JSON value fails the test: an invalid example must break a rule of the
// schema, not JSON's.
func examples(t *testing.T, schema, kind string) []example {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", schema, kind, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	var out []example
	for _, p := range paths {
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s: not JSON: %v", p, err)
		}
		out = append(out, example{name: filepath.ToSlash(filepath.Join(schema, kind, filepath.Base(p))), doc: doc})
	}
	return out
}

// TestExamples: every valid example is accepted and every invalid one
// refused, with a validation error (not a failure of the validator).
func TestExamples(t *testing.T) {
	for name := range accessors {
		if !slices.Contains(allFiles, name+".v1.json") {
			t.Errorf("accessor %s names no embedded file", name)
		}
	}
	dirs, err := os.ReadDir("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !slices.Contains(withExamples, d.Name()) {
			t.Errorf("testdata/%s: not a schema with examples", d.Name())
		}
	}
	for _, name := range withExamples {
		s := accessors[name]()
		valid, invalid := examples(t, name, "valid"), examples(t, name, "invalid")
		if len(valid) == 0 || len(invalid) < minInvalid {
			t.Errorf("%s: %d valid and %d invalid examples, want at least 1 and %d", name, len(valid), len(invalid), minInvalid)
		}
		for _, e := range valid {
			t.Run(e.name, func(t *testing.T) {
				if err := s.Validate(e.doc); err != nil {
					t.Errorf("refused: %v", err)
				}
			})
		}
		for _, e := range invalid {
			t.Run(e.name, func(t *testing.T) {
				err := s.Validate(e.doc)
				var ve *jsonschema.ValidationError
				if !errors.As(err, &ve) {
					t.Fatalf("accepted, or failed without a validation error: %v", err)
				}
				t.Logf("%v", err)
			})
		}
	}
}

// TestAgentAnswerBranches: each valid answer is exactly one of a proposal
// and an agent response, there are examples of both, and an object that
// mixes the two (all members of each) is refused.
func TestAgentAnswerBranches(t *testing.T) {
	var proposals, responses int
	for _, e := range examples(t, "agent-answer", "valid") {
		p, r := schemas.Proposal().Validate(e.doc) == nil, schemas.AgentResponse().Validate(e.doc) == nil
		switch {
		case p && !r:
			proposals++
		case r && !p:
			responses++
		default:
			t.Errorf("%s: proposal %v, agent response %v; want exactly one", e.name, p, r)
		}
	}
	if proposals == 0 || responses == 0 {
		t.Errorf("valid answers: %d proposals, %d agent responses; want both", proposals, responses)
	}
	proposal := map[string]any{"schema_version": "1.0.0", "id": "6a1f0c3e-8b2d-4c7a-9e5f-2d3c4b5a6978",
		"reasoning": "r", "action": "THINK", "args": map[string]any{}}
	response := map[string]any{"action": "COMPLETED", "evidence_files": []any{"a.txt"}, "summary_for_supervisor": "Done."}
	mixed := map[string]any{}
	for _, m := range []map[string]any{proposal, response} {
		if err := schemas.AgentAnswer().Validate(m); err != nil {
			t.Errorf("%v refused: %v", m, err)
		}
		for k, v := range m {
			mixed[k] = v
		}
	}
	for _, action := range []string{"THINK", "COMPLETED"} {
		mixed["action"] = action
		if err := schemas.AgentAnswer().Validate(mixed); err == nil {
			t.Errorf("mixed answer with action %s accepted", action)
		}
	}
}

// TestAgentAnswerBundle: the bundle is self-contained (it compiles with
// nothing else loaded, and every $ref is local) and judges every agent
// answer and agent response example as AgentAnswer does.
func TestAgentAnswerBundle(t *testing.T) {
	b := schemas.AgentAnswerBundle()
	if !bytes.Equal(b, schemas.AgentAnswerBundle()) {
		t.Fatal("AgentAnswerBundle differs between calls")
	}
	b[0] = 'x'
	if schemas.AgentAnswerBundle()[0] != '{' {
		t.Fatal("AgentAnswerBundle shares its bytes with callers")
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(schemas.AgentAnswerBundle()))
	if err != nil {
		t.Fatal(err)
	}
	walk(doc, "", func(path string, m map[string]any) {
		if r, ok := m["$ref"].(string); ok && !strings.HasPrefix(r, "#/$defs/") {
			t.Errorf("%s: $ref %q is not local", path, r)
		}
		if _, ok := m["$id"]; ok {
			t.Errorf("%s: $id in the bundle", path)
		}
	})
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.UseLoader(refuseLoader{t})
	if err := c.AddResource("urn:snapnode:agent-answer-bundle", doc); err != nil {
		t.Fatal(err)
	}
	bundle, err := c.Compile("urn:snapnode:agent-answer-bundle")
	if err != nil {
		t.Fatal(err)
	}
	for _, schema := range []string{"agent-answer", "agent-response"} {
		for _, kind := range []string{"valid", "invalid"} {
			for _, e := range examples(t, schema, kind) {
				want, got := schemas.AgentAnswer().Validate(e.doc) == nil, bundle.Validate(e.doc) == nil
				if got != want {
					t.Errorf("%s: bundle accepts %v, AgentAnswer %v", e.name, got, want)
				}
			}
		}
	}
}

type refuseLoader struct{ t *testing.T }

func (l refuseLoader) Load(url string) (any, error) {
	l.t.Errorf("bundle loads %s", url)
	return nil, errors.New("no loading")
}

// TestTaskStates: the manifest's task_state values are the SNAP task
// states package tasks knows.
func TestTaskStates(t *testing.T) {
	raw, err := fs.ReadFile(schemas.FS, schemas.JobManifestFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Properties struct {
			TaskState struct {
				Enum []tasks.State `json:"enum"`
			} `json:"task_state"`
		} `json:"properties"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	if got := doc.Properties.TaskState.Enum; !slices.Equal(got, tasks.States()) {
		t.Errorf("task_state enum %v, want %v", got, tasks.States())
	}
}
