package executor_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
)

// TestExecutionFailedNamesField: an action the sandbox refuses names, in
// its structured error, the argument that failed as a JSON pointer (field)
// beside the cause, as a validation error does, so that a proposer knows
// which of a rename's two paths to change; so does a write whose content
// is over the file size bound (LIMIT_EXCEEDED). Before, both had paths and
// cause (or limit) but no field.
func TestExecutionFailedNamesField(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	v.file("a.txt", "A\n")
	v.file("d.md/inner.txt", "I\n")
	for _, tc := range []struct {
		name, action string
		args         map[string]string
		cause, field string
	}{
		{"rename onto itself", "RENAME_FILE", map[string]string{"source": "/sandbox/a.txt", "destination": "/sandbox/a.txt"}, "exists", "/args/destination"},
		{"rename onto its parent", "RENAME_FILE", map[string]string{"source": "/sandbox/d.md/inner.txt", "destination": "/sandbox/d.md"}, "exists", "/args/destination"},
		{"rename a folder into its child", "RENAME_FILE", map[string]string{"source": "/sandbox/d.md", "destination": "/sandbox/d.md/x.md"}, "not_regular", "/args/source"},
		{"rename a missing file", "RENAME_FILE", map[string]string{"source": "/sandbox/no.txt", "destination": "/sandbox/b.txt"}, "not_found", "/args/source"},
		{"delete a non-empty folder", "DELETE_FILE", map[string]string{"path": "/sandbox/d.md"}, "not_regular", "/args/path"},
		{"write under a file", "WRITE_FILE", map[string]string{"path": "/sandbox/a.txt/b.txt", "content": "x"}, "not_dir", "/args/path"},
		{"read a folder", "READ_FILE", map[string]string{"path": "/sandbox/d.md"}, "not_regular", "/args/path"},
		{"read the workspace itself", "READ_FILE", map[string]string{"path": "/sandbox/"}, "not_regular", "/args/path"},
		{"create the workspace itself", "CREATE_DIRECTORY", map[string]string{"path": "/sandbox/"}, "exists", "/args/path"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res, f := v.failureOf(t, v.run(agent, prop(tc.action, tc.args)))
			if f.Code != executor.CodeExecutionFailed || f.Cause != tc.cause || f.Field != tc.field {
				t.Errorf("output %s; want cause %s, field %s", res.Output, tc.cause, tc.field)
			}
		})
	}
	// A composite's step is named by its index.
	res, cf := v.failureOf(t, v.run(agent, composite(t,
		leaf(t, "WRITE_FILE", map[string]string{"path": "/sandbox/new.txt", "content": "n\n"}),
		leaf(t, "CREATE_DIRECTORY", map[string]string{"path": "/sandbox/a.txt"}))))
	if cf.Cause != "exists" || cf.Field != "/children/1/operation/args/path" {
		t.Errorf("composite: output %s; want field /children/1/operation/args/path", res.Output)
	}

	// A write over the size bound: the content is what is too large.
	res, f := v.failureOf(t, v.run(agent, prop("WRITE_FILE", map[string]string{"path": "/sandbox/big.txt", "content": strings.Repeat("x", 2<<20)})))
	if f.Code != executor.CodeLimitExceeded || f.Limit != "file_size" || f.Field != "/args/content" {
		t.Errorf("write over the size bound: output %s; want limit file_size, field /args/content", res.Output)
	}
	if a, _ := v.content("a.txt"); a != "A\n" {
		t.Errorf("a.txt = %q", a)
	}
	if in, _ := v.content("d.md/inner.txt"); in != "I\n" {
		t.Errorf("d.md/inner.txt = %q", in)
	}
}

// failureOf approves res if it is held, and returns it with the Failure
// it ended in.
func (v *env) failureOf(t *testing.T, res *executor.Result) (*executor.Result, executor.Failure) {
	t.Helper()
	if res.Outcome == executor.NeedsConfirmation {
		var err error
		if res, err = v.ex.Approve(t.Context(), res.ActionID, operator); err != nil {
			t.Fatal(err)
		}
	}
	wantOutcome(t, res, executor.Failed)
	var f executor.Failure
	if err := json.Unmarshal(res.Output, &f); err != nil {
		t.Fatal(err)
	}
	return res, f
}
