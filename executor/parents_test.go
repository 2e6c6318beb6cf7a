package executor_test

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/internal/testdb"
)

// TestWriteCreatesParents: a write into folders that do not exist creates
// them, each one a change of its own: in the diff, in the audit entry of
// the staging, in the workspace, and undone by the rollback (the folders
// removed with the file).
func TestWriteCreatesParents(t *testing.T) {
	for _, tc := range []struct {
		name    string
		files   map[string]string // present before
		data    func(t *testing.T) []byte
		folders []string // created, virtual
	}{
		{"one folder", nil, func(*testing.T) []byte {
			return prop("WRITE_FILE", map[string]string{"path": "/sandbox/notes/a.txt", "content": "a\n"})
		}, []string{"/sandbox/notes"}},
		{"three folders", nil, func(*testing.T) []byte {
			return prop("WRITE_FILE", map[string]string{"path": "/sandbox/x/y/z/a.md", "content": "a\n"})
		}, []string{"/sandbox/x", "/sandbox/x/y", "/sandbox/x/y/z"}},
		{"below an existing folder", map[string]string{"docs/old.txt": "old\n"}, func(*testing.T) []byte {
			return prop("WRITE_FILE", map[string]string{"path": "/sandbox/docs/new/a.txt", "content": "a\n"})
		}, []string{"/sandbox/docs/new"}},
		{"peer descriptor", nil, func(t *testing.T) []byte {
			return descriptorJSON(t, leaf(t, "WRITE_FILE", map[string]string{"path": "/sandbox/notes/a.txt", "content": "a\n"}))
		}, []string{"/sandbox/notes"}},
		{"composite, two files in one new folder", nil, func(t *testing.T) []byte {
			return composite(t,
				leaf(t, "WRITE_FILE", map[string]string{"path": "/sandbox/notes/a.txt", "content": "a\n"}),
				leaf(t, "WRITE_FILE", map[string]string{"path": "/sandbox/notes/b.txt", "content": "b\n"}))
		}, []string{"/sandbox/notes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			v := newEnv(t, testdb.SQLite(t))
			for p, c := range tc.files {
				v.file(p, c)
			}
			before := workspace(t, v.dir)
			res := v.run(agent, tc.data(t))
			wantOutcome(t, res, executor.Completed)
			after := workspace(t, v.dir)
			var staged []string
			for _, e := range v.entries(res.ActionID) {
				if e.Step == audit.StepSandboxed {
					var d struct {
						Paths []struct {
							Path  string `json:"path"`
							After struct {
								Kind string `json:"kind"`
							} `json:"after"`
						} `json:"paths"`
					}
					if err := json.Unmarshal(e.Detail, &d); err != nil {
						t.Fatal(err)
					}
					for _, p := range d.Paths {
						if p.After.Kind == "dir" {
							staged = append(staged, p.Path)
						}
					}
				}
			}
			if !slices.Equal(staged, tc.folders) {
				t.Errorf("audited folders created = %v, want %v", staged, tc.folders)
			}
			for _, f := range tc.folders {
				if after[f] != "<dir>" {
					t.Errorf("%s not created: %v", f, after)
				}
				if !strings.Contains(res.Diff, "changed "+f+": absent -> directory") {
					t.Errorf("diff does not show %s:\n%s", f, res.Diff)
				}
			}
			if err := v.ex.Rollback(ctx, res.ActionID); err != nil {
				t.Fatal(err)
			}
			if got := workspace(t, v.dir); !maps.Equal(got, before) {
				t.Errorf("after rollback %v, want %v", got, before)
			}
			v.verify()
		})
	}
}
