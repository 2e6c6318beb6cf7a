package executor_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/testdb"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// runCase is one row of testdata/run.json: an input of testdata/seeds/
// and, for the examples of the proposal schema versioning strategy, the
// exact output it documents.
type runCase struct {
	Name       string          `json:"name"`
	File       string          `json:"file"`
	SeedOutput json.RawMessage `json:"seed_output"`
}

// runGolden is what a golden file holds for one input: the Result, the
// audit steps and the workspace afterwards.
type runGolden struct {
	Outcome    string            `json:"outcome"`
	Action     string            `json:"action"`
	ProposalID string            `json:"proposal_id"`
	Output     json.RawMessage   `json:"output"`
	Diff       string            `json:"diff"`
	Reason     string            `json:"reason"`
	Response   string            `json:"response"`
	Steps      []string          `json:"steps"`
	Workspace  map[string]string `json:"workspace"`
}

// TestRunExamples runs every example of the proposal field constraints and the
// proposal schema versioning strategy (and a proposal of each action)
// through Run, in a workspace holding /sandbox/a.txt = "hello world\n" (as
// the versioning strategy's example 2 assumes), with the default policy. The
// examples of the versioning strategy must give exactly the output it
// documents, byte for byte once compacted; every case must match its golden
// file.
func TestRunExamples(t *testing.T) {
	raw, err := os.ReadFile("testdata/run.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []runCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	seeded := 0
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			v := newEnv(t, testdb.SQLite(t))
			v.file("a.txt", "hello world\n")
			data, err := os.ReadFile(filepath.Join("testdata/seeds", c.File))
			if err != nil {
				t.Fatal(err)
			}
			res := v.run(agent, data)
			if !json.Valid(res.Output) && res.Output != nil {
				t.Fatalf("output is not JSON: %s", res.Output)
			}
			if c.SeedOutput != nil {
				seeded++
				var want bytes.Buffer
				if err := json.Compact(&want, c.SeedOutput); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(res.Output, want.Bytes()) {
					t.Errorf("output\n got %s\nwant %s (seed 004)", res.Output, want.Bytes())
				}
			}
			g := runGolden{
				Outcome: string(res.Outcome), Action: res.Action, ProposalID: res.ProposalID,
				Output: res.Output, Diff: res.Diff, Reason: res.Reason, Response: res.Response,
				Steps: v.steps(res.ActionID), Workspace: workspace(t, v.dir),
			}
			var buf bytes.Buffer
			enc := json.NewEncoder(&buf)
			enc.SetEscapeHTML(false)
			enc.SetIndent("", "  ")
			if err := enc.Encode(g); err != nil {
				t.Fatal(err)
			}
			got := buf.Bytes()
			golden := filepath.Join("testdata/golden", c.Name+".json")
			if *update {
				if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update to create it)", err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("%s differs:\n got %s\nwant %s", golden, got, want)
			}
			v.verify()
		})
	}
	if seeded != 5 {
		t.Errorf("%d cases carry seed 004's documented output, want 5", seeded)
	}
}

// workspace maps every path of the folder to its content ("<dir>" for a
// directory), the sandbox's lock file and count left out.
func workspace(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir || p == filepath.Join(dir, sandbox.LockFile) || p == filepath.Join(dir, sandbox.CountFile) {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = "/sandbox/" + filepath.ToSlash(rel)
		if d.IsDir() {
			out[rel] = "<dir>"
			return nil
		}
		b, err := os.ReadFile(p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
