package proposal_test

import (
	"bytes"
	"encoding/base64"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/snapnode/snapnode/executor/proposal"
)

// want is the expected failure of a case; a case without one is valid.
type want struct {
	Code  proposal.Code `json:"error_code"`
	Field *string       `json:"field"`
	Rule  string        `json:"rule"`
	// Available, when set, is the error's list of what the host offers,
	// and its JSON must carry it.
	Available []string `json:"available"`
}

type testCase struct {
	Name      string         `json:"name"`
	Covers    []string       `json:"covers"`
	Input     jsontext.Value `json:"input"`
	Raw       *string        `json:"raw"`
	RawBase64 string         `json:"raw_base64"`
	Want      *want          `json:"want"`
}

func (c *testCase) bytes(t *testing.T) []byte {
	t.Helper()
	switch {
	case c.Raw != nil:
		return []byte(*c.Raw)
	case c.RawBase64 != "":
		b, err := base64.StdEncoding.DecodeString(c.RawBase64)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	return c.Input
}

func loadCases(t testing.TB, file string) []testCase {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cases []testCase
	if err := json.Unmarshal(raw, &cases, json.RejectUnknownMembers(true)); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return cases
}

// checkError compares an error with a case's expectation: its code always,
// field and rule for validation errors, and a non-empty message.
func checkError(t *testing.T, err error, w *want) {
	t.Helper()
	var pe *proposal.Error
	if !errors.As(err, &pe) {
		t.Fatalf("error %T (%v), want *proposal.Error", err, err)
	}
	if !errors.Is(err, w.Code) || pe.Code != w.Code {
		t.Fatalf("code %s, want %s (%v)", pe.Code, w.Code, err)
	}
	if pe.Message == "" {
		t.Errorf("empty message")
	}
	if w.Field != nil && pe.Field != *w.Field {
		t.Errorf("field %q, want %q (%v)", pe.Field, *w.Field, err)
	}
	if w.Rule != "" && pe.Rule != w.Rule {
		t.Errorf("rule %q, want %q (%v)", pe.Rule, w.Rule, err)
	}
	if pe.Code == proposal.ErrValidation && pe.Rule == "" {
		t.Errorf("validation error without a rule: %v", err)
	}
	if w.Available != nil {
		out, _ := json.Marshal(pe)
		want, _ := json.Marshal(w.Available)
		if !slices.Equal(pe.Available, w.Available) || !bytes.Contains(out, []byte(`"field":"`+pe.Field+`","available":`+string(want))) {
			t.Errorf("available %q, JSON %s, want %s with the field", pe.Available, out, want)
		}
	}
}

// TestCases runs the table of testdata/cases.json through Parse.
func TestCases(t *testing.T) {
	for _, c := range loadCases(t, "testdata/cases.json") {
		t.Run(c.Name, func(t *testing.T) {
			p, err := proposal.Parse(c.bytes(t))
			if c.Want == nil {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				if p.Action.Kind == "" || p.Action.Spelling == "" {
					t.Fatalf("parsed action %+v", p.Action)
				}
				return
			}
			if err == nil {
				t.Fatalf("Parse accepted it: %+v", p)
			}
			checkError(t, err, c.Want)
		})
	}
}

// TestCasesCoverEveryRule requires, for each rule of the proposal schema
// (its fields, each action's args and the version), at least one case that
// passes it and one that breaks it.
func TestCasesCoverEveryRule(t *testing.T) {
	rules := []string{
		"schema_version", "action", "reasoning", "id", "args",
		"THINK.args", "FINISH.response", "READ_FILE.path", "LIST_FILES.path",
		"WRITE_FILE.path", "WRITE_FILE.path.suffix", "WRITE_FILE.content",
		"CREATE_DIRECTORY.path", "DELETE_FILE.path", "DELETE_FILE.path.suffix",
		"RENAME_FILE.source", "RENAME_FILE.source.suffix", "RENAME_FILE.destination", "RENAME_FILE.destination.suffix",
	}
	failOnly := []string{"action.disallowed", "extra", "conflicting", "json"}
	pass, fail := map[string]int{}, map[string]int{}
	for _, c := range loadCases(t, "testdata/cases.json") {
		for _, r := range c.Covers {
			if c.Want == nil {
				pass[r]++
			} else {
				fail[r]++
			}
		}
	}
	for _, r := range rules {
		if pass[r] == 0 || fail[r] == 0 {
			t.Errorf("rule %s: %d passing and %d failing cases, want at least one of each", r, pass[r], fail[r])
		}
	}
	for _, r := range failOnly {
		if fail[r] == 0 {
			t.Errorf("no failing case for %s", r)
		}
	}
}

// rawSchemas compiles the schema files from the repository with a compiler
// of their own, as another implementation would, without the schemas
// package.
func rawSchemas(t testing.TB) (prop, desc *jsonschema.Schema) {
	t.Helper()
	c := jsonschema.NewCompiler()
	ids := map[string]string{}
	for _, name := range []string{"proposal.v1.json", "action-descriptor.v1.json"} {
		raw, err := os.ReadFile(filepath.Join("..", "..", "schemas", name))
		if err != nil {
			t.Fatal(err)
		}
		doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		id, _ := doc.(map[string]any)["$id"].(string)
		if id == "" {
			t.Fatalf("%s has no $id", name)
		}
		if err := c.AddResource(id, doc); err != nil {
			t.Fatal(err)
		}
		ids[name] = id
	}
	var err error
	if prop, err = c.Compile(ids["proposal.v1.json"]); err != nil {
		t.Fatalf("compile proposal schema: %v", err)
	}
	if desc, err = c.Compile(ids["action-descriptor.v1.json"]); err != nil {
		t.Fatalf("compile descriptor schema: %v", err)
	}
	return prop, desc
}

// TestRawSchemaSameVerdict runs every case and golden input that is JSON
// through the bare schema file: it must accept exactly what Parse accepts.
// (Version and disallowed-action errors come before the schema in Parse,
// but the schema alone rejects those inputs too.)
func TestRawSchemaSameVerdict(t *testing.T) {
	prop, _ := rawSchemas(t)
	inputs := map[string][]byte{}
	for _, c := range loadCases(t, "testdata/cases.json") {
		inputs["case "+c.Name] = c.bytes(t)
	}
	golden, _ := filepath.Glob("testdata/golden/*.json")
	for _, g := range golden {
		b, err := os.ReadFile(g)
		if err != nil {
			t.Fatal(err)
		}
		inputs[g] = b
	}
	checked := 0
	for name, raw := range inputs {
		var v any
		if json.Unmarshal(raw, &v) != nil {
			continue // refused before any schema applies
		}
		checked++
		_, perr := proposal.Parse(raw)
		serr := prop.Validate(v)
		if (perr == nil) != (serr == nil) {
			t.Errorf("%s: Parse says %v, the raw schema says %v", name, perr, serr)
		}
	}
	if checked < 100 {
		t.Errorf("only %d inputs reached the schema", checked)
	}
}
