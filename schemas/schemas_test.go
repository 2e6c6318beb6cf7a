package schemas_test

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/schemas"
)

// TestFilesAreServedAsWritten: FS holds the files of this folder byte for
// byte, each declares the draft and the $id the package announces, and
// nothing else is embedded.
func TestFilesAreServedAsWritten(t *testing.T) {
	want := map[string]string{schemas.ProposalFile: schemas.ProposalID, schemas.DescriptorFile: schemas.DescriptorID}
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

// TestEveryObjectIsClosed walks both files: every subschema that declares
// properties (outside the conditions that only narrow them) also sets
// additionalProperties to false, so no member beyond the schema's is
// accepted anywhere.
func TestEveryObjectIsClosed(t *testing.T) {
	for _, name := range []string{schemas.ProposalFile, schemas.DescriptorFile} {
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

// TestCompile: both schemas compile, once, and judge the simplest cases.
func TestCompile(t *testing.T) {
	p := schemas.Proposal()
	if p == nil || p != schemas.Proposal() {
		t.Fatal("Proposal() is not compiled once")
	}
	if d := schemas.ActionDescriptor(); d == nil || d != schemas.ActionDescriptor() {
		t.Fatal("ActionDescriptor() is not compiled once")
	}
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
