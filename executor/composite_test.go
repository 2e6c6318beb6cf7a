package executor_test

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/internal/testdb"
)

// leaf is the descriptor a peer would send for one proposal.
func leaf(t testing.TB, action string, args map[string]string) *proposal.Descriptor {
	t.Helper()
	p, err := proposal.Parse(prop(action, args))
	if err != nil {
		t.Fatal(err)
	}
	return proposal.Describe(p, peerDefaults())
}

// peerDefaults make the descriptors of a peer whose clock agrees with the
// tests' (a descriptor's created_at must be within the window of Run's).
func peerDefaults() proposal.Defaults {
	d := proposal.NewDefaults()
	d.Now = newClock().Now
	return d
}

// composite is the JSON of a MULTI_STEP_COMPOSITE of children.
func composite(t testing.TB, children ...*proposal.Descriptor) []byte {
	t.Helper()
	c, err := proposal.Compose(children, peerDefaults())
	if err != nil {
		t.Fatal(err)
	}
	return descriptorJSON(t, c)
}

func descriptorJSON(t testing.TB, d *proposal.Descriptor) []byte {
	t.Helper()
	b, err := jsonv2.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := proposal.ParseDescriptor(b); err != nil {
		t.Fatalf("the test's descriptor is invalid: %v", err)
	}
	return b
}

// TestComposite: the steps are staged together, need one confirmation
// (one of them deletes), are promoted together and rolled back together.
func TestComposite(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		v.file("a.txt", "old\n")
		data := composite(t,
			leaf(t, "CREATE_DIRECTORY", map[string]string{"path": "/sandbox/notes"}),
			leaf(t, "WRITE_FILE", map[string]string{"path": "/sandbox/notes/log.txt", "content": "log\n"}),
			leaf(t, "DELETE_FILE", map[string]string{"path": "/sandbox/a.txt"}),
		)
		res := v.run(agent, data)
		wantOutcome(t, res, executor.NeedsConfirmation)
		if res.Action != "MULTI_STEP_COMPOSITE" {
			t.Errorf("action %q", res.Action)
		}
		for _, want := range []string{"-old\n", "+log\n", "/sandbox/notes: absent -> directory"} {
			if !strings.Contains(res.Diff, want) {
				t.Errorf("diff lacks %q:\n%s", want, res.Diff)
			}
		}
		if _, ok := v.content("notes"); ok {
			t.Fatal("a step was applied before confirmation")
		}
		got, err := v.ex.Approve(ctx, res.ActionID, operator)
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, got, executor.Completed)
		want := `{"status":"success","action":"MULTI_STEP_COMPOSITE","result":{"steps":[` +
			`{"status":"success","action":"CREATE_DIRECTORY","result":{"path":"/sandbox/notes"}},` +
			`{"status":"success","action":"WRITE_FILE","result":{"path":"/sandbox/notes/log.txt","size":4,"sha256":"` + sha("log\n") + `"}},` +
			`{"status":"success","action":"DELETE_FILE","result":{"path":"/sandbox/a.txt"}}]}}`
		if string(got.Output) != want {
			t.Errorf("output\n got %s\nwant %s", got.Output, want)
		}
		if c, _ := v.content("notes/log.txt"); c != "log\n" {
			t.Error("notes/log.txt not written")
		}
		if _, ok := v.content("a.txt"); ok {
			t.Error("a.txt not deleted")
		}

		if err := v.ex.Rollback(ctx, res.ActionID); err != nil {
			t.Fatal(err)
		}
		if c, _ := v.content("a.txt"); c != "old\n" {
			t.Error("a.txt not restored")
		}
		if _, ok := v.content("notes/log.txt"); ok {
			t.Error("notes/log.txt not removed")
		}
		if got := workspace(t, v.dir); len(got) != 1 {
			t.Errorf("workspace after rollback: %v", got)
		}
		v.verify()
	})
}

// TestCompositeDenyBlocksAll: one step the policy forbids blocks the
// others.
func TestCompositeDenyBlocksAll(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	eng, err := policy.Parse("ops.cedar", []byte(secretsPolicy))
	if err != nil {
		t.Fatal(err)
	}
	v.holder.Swap(eng)
	v.file("secrets/x.txt", "s")
	res := v.run(agent, composite(t,
		leaf(t, "WRITE_FILE", map[string]string{"path": "/sandbox/ok.txt", "content": "fine"}),
		leaf(t, "WRITE_FILE", map[string]string{"path": "/sandbox/secrets/x.txt", "content": "mine"}),
	))
	wantOutcome(t, res, executor.Failed)
	var f executor.Failure
	if err := json.Unmarshal(res.Output, &f); err != nil {
		t.Fatal(err)
	}
	if f.Code != "ACTION_NOT_ALLOWED" || !strings.Contains(strings.Join(f.Reasons, " "), "no-secrets") {
		t.Errorf("failure %+v", f)
	}
	if _, ok := v.content("ok.txt"); ok {
		t.Error("the permitted step ran although another was denied")
	}
}

// TestCompositeAllOrNothing: a step that cannot be staged fails the
// whole; nothing is written. (The delete declares no precondition, so
// that it is the staging that finds its file missing.)
func TestCompositeAllOrNothing(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	del := leaf(t, "DELETE_FILE", map[string]string{"path": "/sandbox/missing.txt"})
	del.Preconditions.PathsExist = []string{}
	res := v.run(operator, composite(t,
		leaf(t, "WRITE_FILE", map[string]string{"path": "/sandbox/ok.txt", "content": "fine"}),
		del,
	))
	wantOutcome(t, res, executor.Failed)
	if c := errorCode(t, res.Output); c != executor.CodeExecutionFailed {
		t.Errorf("error_code %s", c)
	}
	if _, ok := v.content("ok.txt"); ok {
		t.Error("ok.txt written by a failed composite")
	}
	wantSteps(t, v.steps(res.ActionID), "received", "validated", "judged", "failed")
}

// compositeCase is one row of testdata/composite-reads.json: a workspace
// (files), a composite of steps, the policy ("" the default, "secrets"
// secretsPolicy), and what must come of it: the outcome (after the
// host's approval, when approve), the error's code, field and rule, what
// the output and the reason contain, and the workspace afterwards.
type compositeCase struct {
	Name   string            `json:"name"`
	Policy string            `json:"policy"`
	Files  map[string]string `json:"files"`
	Steps  []struct {
		Action string            `json:"action"`
		Args   map[string]string `json:"args"`
	} `json:"steps"`
	Outcome   executor.Outcome  `json:"outcome"`
	Approve   bool              `json:"approve"`
	ErrorCode string            `json:"error_code"`
	Field     string            `json:"field"`
	Rule      string            `json:"rule"`
	Output    []string          `json:"output"`
	Reason    []string          `json:"reason"`
	Workspace map[string]string `json:"workspace"`
}

// TestCompositeReads: a composite may read and list as well as change
// files; each step is judged by the policy as its own action would be;
// every read sees the workspace as it was before the composite, so a
// read or list of what an earlier step changes is refused
// (compositeReadAfterChange); a read's output is in the composite's.
func TestCompositeReads(t *testing.T) {
	var cases []compositeCase
	readTable(t, "composite-reads.json", &cases)
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			v := newEnv(t, testdb.SQLite(t))
			if c.Policy == "secrets" {
				eng, err := policy.Parse("ops.cedar", []byte(secretsPolicy))
				if err != nil {
					t.Fatal(err)
				}
				v.holder.Swap(eng)
			}
			for p, content := range c.Files {
				v.file(p, content)
			}
			var steps []*proposal.Descriptor
			for _, s := range c.Steps {
				steps = append(steps, leaf(t, s.Action, s.Args))
			}
			res := v.run(agent, composite(t, steps...))
			for _, w := range c.Reason {
				if !strings.Contains(res.Reason, w) {
					t.Errorf("reason lacks %q: %q", w, res.Reason)
				}
			}
			if c.Approve {
				wantOutcome(t, res, executor.NeedsConfirmation)
				var err error
				if res, err = v.ex.Approve(context.Background(), res.ActionID, executor.Host); err != nil {
					t.Fatal(err)
				}
				wantOutcome(t, res, executor.Completed)
			} else {
				wantOutcome(t, res, c.Outcome)
			}
			if c.ErrorCode != "" {
				var e struct {
					Code  string `json:"error_code"`
					Field string `json:"field"`
					Rule  string `json:"rule"`
				}
				if err := json.Unmarshal(res.Output, &e); err != nil {
					t.Fatal(err)
				}
				if e.Code != c.ErrorCode || e.Field != c.Field || e.Rule != c.Rule {
					t.Errorf("error %s, want %s %s %s", res.Output, c.ErrorCode, c.Field, c.Rule)
				}
			}
			for _, w := range c.Output {
				if !strings.Contains(string(res.Output), w) {
					t.Errorf("output lacks %s:\n%s", w, res.Output)
				}
			}
			got := map[string]string{}
			for p, content := range workspace(t, v.dir) {
				if content != "<dir>" {
					got[strings.TrimPrefix(p, "/sandbox/")] = content
				}
			}
			if !maps.Equal(got, c.Workspace) {
				t.Errorf("workspace %v, want %v", got, c.Workspace)
			}
			v.verify()
		})
	}
}

// TestCompositeReadAtApproval: a held composite that reads a file and
// replaces it reads it again when approved; a file changed meanwhile is
// asked about again, and the output is what was read when the change was
// promoted.
func TestCompositeReadAtApproval(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	v.file("a.txt", "old\n")
	eng, err := policy.Parse("ops.cedar", []byte(secretsPolicy+`
@id("ask-a") @confirm("a.txt is confirmed")
permit (principal, action == Action::"WRITE_FILE", resource == Path::"/sandbox/a.txt");
`))
	if err != nil {
		t.Fatal(err)
	}
	v.holder.Swap(eng)
	res := v.run(agent, composite(t,
		leaf(t, "READ_FILE", map[string]string{"path": "/sandbox/a.txt"}),
		leaf(t, "WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": "new\n"}),
	))
	wantOutcome(t, res, executor.NeedsConfirmation)
	// Approved: read and staged again, on the workspace as it is then.
	v.file("a.txt", "edited\n")
	got, err := v.ex.Approve(context.Background(), res.ActionID, executor.Host)
	if err != nil {
		t.Fatal(err)
	}
	// The pre-image changed: asked again, with the new diff.
	wantOutcome(t, got, executor.NeedsConfirmation)
	got, err = v.ex.Approve(context.Background(), res.ActionID, executor.Host)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, got, executor.Completed)
	if !strings.Contains(string(got.Output), `{"status":"success","action":"READ_FILE","result":{"content":"edited\n"}}`) {
		t.Errorf("output %s", got.Output)
	}
}

// TestDescriptorLeaf: a peer's descriptor of one write runs like the
// proposal; the host's action id is its own, the peer's kept as
// ProposalID.
func TestDescriptorLeaf(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	d := leaf(t, "write_file", map[string]string{"path": "/sandbox/d.md", "content": "# d\n"})
	res := v.run(agent, descriptorJSON(t, d))
	wantOutcome(t, res, executor.Completed)
	if res.ProposalID != d.ActionID || res.ActionID == d.ActionID || res.Action != "WRITE_FILE" {
		t.Errorf("ids %q/%q, action %q", res.ActionID, res.ProposalID, res.Action)
	}
	if c, _ := v.content("d.md"); c != "# d\n" {
		t.Error("d.md not written")
	}
	want := `{"status":"success","action":"WRITE_FILE","result":{"path":"/sandbox/d.md","size":4,"sha256":"` + sha("# d\n") + `"}}`
	if string(res.Output) != want {
		t.Errorf("output %s", res.Output)
	}

	// A peer that asks for confirmation gets it, even for a write the
	// policy permits.
	d = leaf(t, "WRITE_FILE", map[string]string{"path": "/sandbox/e.md", "content": "e"})
	d.Confirmation.Required, d.Confirmation.Reason = true, "please check"
	res = v.run(agent, descriptorJSON(t, d))
	wantOutcome(t, res, executor.NeedsConfirmation)
	if !strings.Contains(res.Reason, "please check") {
		t.Errorf("reason %q", res.Reason)
	}
}
