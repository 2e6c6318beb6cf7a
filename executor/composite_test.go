package executor_test

import (
	"context"
	"encoding/json"
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

// TestCompositeStepRefused: a read inside a composite is a validation
// error.
func TestCompositeStepRefused(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	v.file("a.txt", "x")
	res := v.run(agent, composite(t,
		leaf(t, "WRITE_FILE", map[string]string{"path": "/sandbox/ok.txt", "content": "fine"}),
		leaf(t, "READ_FILE", map[string]string{"path": "/sandbox/a.txt"}),
	))
	wantOutcome(t, res, executor.Failed)
	want := `{"error_code":"VALIDATION_ERROR","message":"A composite's steps change files (or think): READ_FILE cannot be one of them.","field":"/children/1/operation/action","rule":"compositeStep"}`
	if string(res.Output) != want {
		t.Errorf("output\n got %s\nwant %s", res.Output, want)
	}
	if _, ok := v.content("ok.txt"); ok {
		t.Error("ok.txt written")
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
