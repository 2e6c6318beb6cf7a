package executor_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/internal/testdb"
)

// levelCase is one row of testdata/audit_levels.json: the host's levels
// (none: the defaults), the workspace, one proposal (or a file of
// testdata/seeds/), and the level its entries must be kept at.
type levelCase struct {
	Name      string                   `json:"name"`
	Levels    map[proposal.Risk]string `json:"levels"`
	WantLevel string                   `json:"want_level"`
	Files     map[string]string        `json:"files"`
	Proposal  map[string]any           `json:"proposal"`
	Seed      string                   `json:"seed"`
}

// levelEntry is what the golden files show of an entry: every field the
// level decides, nothing that changes from run to run.
type levelEntry struct {
	Step     audit.Step      `json:"step"`
	Decision string          `json:"decision"`
	Reason   string          `json:"reason"`
	PreHash  string          `json:"pre_hash"`
	PostHash string          `json:"post_hash"`
	Detail   json.RawMessage `json:"detail"`
}

// The host's audit level decides what an action's entries hold: SUMMARY
// the action, decisions and paths; DETAILED the content hashes and the
// policy's and errors' detail too; FORENSIC also the proposer's reasoning
// and the diff. The level is the host's for the action's risk; a
// descriptor asking for less is recorded and overruled. Each case also
// matches its golden file (go test -update rewrites them).
func TestAuditLevels(t *testing.T) {
	raw, err := os.ReadFile("testdata/audit_levels.json")
	if err != nil {
		t.Fatal(err)
	}
	var cases []levelCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		t.Fatal(err)
	}
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			v := &env{t: t, dsn: testdb.SQLite(t), dir: t.TempDir(), clock: newClock(), holder: policy.NewHolder(policy.Default()), levels: c.Levels}
			v.open()
			t.Cleanup(v.close)
			for name, content := range c.Files {
				v.file(name, content)
			}
			data := []byte(nil)
			if c.Seed != "" {
				if data, err = os.ReadFile(filepath.Join("testdata/seeds", c.Seed)); err != nil {
					t.Fatal(err)
				}
			} else {
				p := map[string]any{"schema_version": "1.0.0", "id": "6a1f0c3e-2b4d-4e5f-8a9b-0c1d2e3f4a5b",
					"reasoning": "Jane Doe asked me to, from jane@example.org"}
				for k, x := range c.Proposal {
					p[k] = x
				}
				data, _ = json.Marshal(p)
			}
			res := v.run(agent, data)
			if res.Outcome == executor.Failed {
				t.Fatalf("failed: %s", res.Output)
			}
			es := v.entries(res.ActionID)
			checkLevel(t, c.WantLevel, es)
			if c.Seed != "" {
				// The descriptor's own audit section is recorded, not applied.
				d := members(t, find(t, es, audit.StepValidated))
				if string(d["requested_log_level"]) != `"SUMMARY"` || string(d["requested_retain_days"]) != "30" {
					t.Errorf("validated detail does not record the descriptor's request: %s", find(t, es, audit.StepValidated).Detail)
				}
			}
			var got []levelEntry
			for _, e := range es {
				got = append(got, levelEntry{Step: e.Step, Decision: e.Decision, Reason: e.Reason, PreHash: e.PreHash, PostHash: e.PostHash, Detail: e.Detail})
			}
			checkGolden(t, filepath.Join("testdata/golden/audit", c.Name+".json"), got)
			v.verify()
		})
	}
}

// checkLevel checks what every entry of an action holds at level.
func checkLevel(t *testing.T, level string, es []audit.Entry) {
	t.Helper()
	summary := []string{"action", "risk", "paths", "audit_level", "requested_log_level", "requested_retain_days"}
	if d := members(t, find(t, es, audit.StepValidated)); string(d["audit_level"]) != `"`+level+`"` {
		t.Errorf("validated: audit_level %s, want %s", d["audit_level"], level)
	}
	hashes, diff := false, false
	for _, e := range es {
		d := members(t, e)
		hashes = hashes || e.PreHash != "" || e.PostHash != ""
		diff = diff || d["diff"] != nil
		for name := range d {
			switch {
			case level == proposal.AuditSummary && !slices.Contains(summary, name):
				t.Errorf("%s: SUMMARY keeps %q: %s", e.Step, name, e.Detail)
			case level != proposal.AuditForensic && (name == "diff" || name == "reasoning"):
				t.Errorf("%s: %s keeps %q: %s", e.Step, level, name, e.Detail)
			}
		}
		if level == proposal.AuditSummary && bytes.Contains(e.Detail, []byte("sha256")) {
			t.Errorf("%s: SUMMARY keeps content hashes: %s", e.Step, e.Detail)
		}
		// A proposal's reasoning (descriptors have none) is FORENSIC's.
		wantReasoning := level == proposal.AuditForensic && string(d["format"]) == `"proposal"`
		if e.Step == audit.StepValidated && (d["reasoning"] != nil) != wantReasoning {
			t.Errorf("validated at %s: reasoning kept %v: %s", level, d["reasoning"] != nil, e.Detail)
		}
	}
	changes := find(t, es, audit.StepSandboxed).Seq != 0
	if want := level != proposal.AuditSummary && changes; hashes != want {
		t.Errorf("content hashes kept: %v, want %v", hashes, want)
	}
	if want := level == proposal.AuditForensic && changes; diff != want {
		t.Errorf("diff kept: %v, want %v", diff, want)
	}
}

// find returns the entry of step s (zero when there is none).
func find(t *testing.T, es []audit.Entry, s audit.Step) audit.Entry {
	t.Helper()
	for _, e := range es {
		if e.Step == s {
			return e
		}
	}
	return audit.Entry{}
}

// members returns the members of an entry's detail.
func members(t *testing.T, e audit.Entry) map[string]json.RawMessage {
	t.Helper()
	m := map[string]json.RawMessage{}
	if len(e.Detail) > 0 {
		if err := json.Unmarshal(e.Detail, &m); err != nil {
			t.Fatalf("%s: detail %s: %v", e.Step, e.Detail, err)
		}
	}
	return m
}

// checkGolden compares v, indented, with the golden file, rewriting it
// under -update.
func checkGolden(t *testing.T, golden string, v any) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	if *update {
		if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("%s differs:\n got %s\nwant %s", golden, buf.Bytes(), want)
	}
}

// TestAuditNamesThePathsOfALargeAction: an action whose paths are too
// many or too long for one entry's detail still names, in its entries,
// the paths it changes, as many as fit, at every level: a composite that
// overwrites a file beside writes of long paths left every entry saying
// only {"truncated":true,…}, and the audit log nothing of the file it
// overwrote.
func TestAuditNamesThePathsOfALargeAction(t *testing.T) {
	for _, level := range []string{proposal.AuditSummary, proposal.AuditDetailed, proposal.AuditForensic} {
		t.Run(level, func(t *testing.T) {
			v := &env{t: t, dsn: testdb.SQLite(t), dir: t.TempDir(), clock: newClock(), holder: policy.NewHolder(policy.Default()),
				levels: executor.AuditLevels{proposal.RiskMedium: level}}
			v.open()
			t.Cleanup(v.close)
			v.file("notes.md", "mine\n")
			// The overwrite, then writes of paths near the longest allowed,
			// each declaring its own file alone (the folders a write creates
			// need not be declared).
			children := []*proposal.Descriptor{leaf(t, "WRITE_FILE", map[string]string{"path": "/sandbox/notes.md", "content": "overwritten\n"})}
			long := "/sandbox/" + strings.TrimSuffix(strings.Repeat(strings.Repeat("p", 250)+"/", 15), "/")
			for i := range 4 {
				c := leaf(t, "WRITE_FILE", map[string]string{"path": long + "/" + strconv.Itoa(i) + ".txt", "content": "x\n"})
				c.Scope.Filesystem.Paths = c.Effects.Filesystem.Modify
				c.Effects.Filesystem.Create = c.Effects.Filesystem.Modify
				children = append(children, c)
			}
			data := composite(t, children...)
			if len(data) > 256<<10 {
				t.Fatalf("the descriptor is %d bytes, more than a node takes by default", len(data))
			}
			res := v.run(agent, data)
			wantOutcome(t, res, executor.Completed)
			if got, _ := v.content("notes.md"); got != "overwritten\n" {
				t.Fatalf("notes.md = %q", got)
			}
			for _, e := range v.entries(res.ActionID) {
				switch e.Step {
				case audit.StepValidated, audit.StepSandboxed, audit.StepPromoted:
					if !bytes.Contains(e.Detail, []byte(`"/sandbox/notes.md"`)) {
						t.Errorf("the %s entry does not name /sandbox/notes.md: %.200s", e.Step, e.Detail)
					}
				}
			}
			v.verify()
		})
	}
}
