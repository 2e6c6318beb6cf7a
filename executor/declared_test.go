package executor_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/internal/testdb"
)

// declaredCase is one row of testdata/preconditions.json or
// testdata/caps.json: a workspace, the host's facts, and one action sent
// as a peer's descriptor (a composite for several steps) with members
// set by JSON pointer, or as a proposal.
type declaredCase struct {
	Name string `json:"name"`
	// Files are written before the run ("dir/" is a directory); Sizes
	// are files of that many bytes.
	Files map[string]string `json:"files"`
	Sizes map[string]int    `json:"sizes"`
	Facts struct {
		UserIdle         bool `json:"user_idle"`
		NetworkAvailable bool `json:"network_available"`
	} `json:"facts"`
	// HostMemoryMB, when set, is the host's own memory cap.
	HostMemoryMB int64 `json:"host_memory_mb"`
	// Proposal sends the one step as a proposal, not a descriptor.
	Proposal bool `json:"proposal"`
	Steps    []struct {
		Action string            `json:"action"`
		Args   map[string]string `json:"args"`
		// Fill sets an argument to that many bytes.
		Fill map[string]int `json:"fill"`
	} `json:"steps"`
	Set  [][2]json.RawMessage `json:"set"`
	Want struct {
		Outcome      executor.Outcome `json:"outcome"`
		ErrorCode    string           `json:"error_code"`
		Precondition string           `json:"precondition"`
		Field        string           `json:"field"`
		Paths        []string         `json:"paths"`
		Limit        string           `json:"limit"`
		Max          int64            `json:"max"`
		Got          int64            `json:"got"`
	} `json:"want"`
}

func loadDeclared(t *testing.T, file string) []declaredCase {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var cases []declaredCase
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cases); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	return cases
}

// data is the case's request: a proposal, or the descriptor a peer would
// send (Describe, or Compose of the steps) with the case's members set.
func (c *declaredCase) data(t *testing.T) []byte {
	t.Helper()
	var leaves []*proposal.Descriptor
	for _, s := range c.Steps {
		args := map[string]string{}
		for k, v := range s.Args {
			args[k] = v
		}
		for k, n := range s.Fill {
			args[k] = strings.Repeat("x", n)
		}
		if c.Proposal {
			return prop(s.Action, args)
		}
		leaves = append(leaves, leaf(t, s.Action, args))
	}
	d := leaves[0]
	if len(leaves) > 1 {
		var err error
		if d, err = proposal.Compose(leaves, peerDefaults()); err != nil {
			t.Fatal(err)
		}
	}
	var doc any
	if err := json.Unmarshal(descriptorJSON(t, d), &doc); err != nil {
		t.Fatal(err)
	}
	for _, kv := range c.Set {
		var ptr string
		var v any
		if err := json.Unmarshal(kv[0], &ptr); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(kv[1], &v); err != nil {
			t.Fatal(err)
		}
		setAt(t, doc, ptr, v)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := proposal.ParseDescriptor(b); err != nil {
		t.Fatalf("the case's descriptor is invalid: %v", err)
	}
	return b
}

// setAt sets the member at the JSON pointer ptr (no escapes) of doc.
func setAt(t *testing.T, doc any, ptr string, v any) {
	t.Helper()
	toks := strings.Split(ptr, "/")[1:]
	cur := doc
	for i, tok := range toks {
		last := i == len(toks)-1
		switch node := cur.(type) {
		case map[string]any:
			if last {
				node[tok] = v
				return
			}
			cur = node[tok]
		case []any:
			n, err := strconv.Atoi(tok)
			if err != nil || n >= len(node) {
				t.Fatalf("pointer %s: bad index %q", ptr, tok)
			}
			if last {
				node[n] = v
				return
			}
			cur = node[n]
		default:
			t.Fatalf("pointer %s: %q is not in a container", ptr, tok)
		}
	}
}

// runDeclared runs the cases of file, each on a fresh node.
func runDeclared(t *testing.T, file string) {
	for _, c := range loadDeclared(t, file) {
		t.Run(c.Name, func(t *testing.T) {
			v := newEnv(t, testdb.SQLite(t))
			v.facts = executor.Facts{UserIdle: c.Facts.UserIdle, NetworkAvailable: c.Facts.NetworkAvailable}
			if c.HostMemoryMB > 0 {
				v.defaults.Resources.MaxMemoryMB = c.HostMemoryMB
			}
			v.reopen()
			for p, content := range c.Files {
				if strings.HasSuffix(p, "/") {
					if err := os.MkdirAll(v.dir+"/"+p, 0o755); err != nil {
						t.Fatal(err)
					}
					continue
				}
				v.file(p, content)
			}
			for p, n := range c.Sizes {
				v.file(p, strings.Repeat("y", n))
			}
			before := workspace(t, v.dir)
			res := v.run(agent, c.data(t))
			w := c.Want
			wantOutcome(t, res, w.Outcome)
			if w.Outcome != executor.Failed {
				v.verify()
				return
			}
			var f executor.Failure
			if err := json.Unmarshal(res.Output, &f); err != nil {
				t.Fatal(err)
			}
			if f.Code != w.ErrorCode || f.Precondition != w.Precondition || f.Field != w.Field ||
				f.Limit != w.Limit || f.Max != w.Max || f.Got != w.Got ||
				(w.Paths != nil && !slices.Equal(f.Paths, w.Paths)) {
				t.Errorf("output %s\nwant %+v", res.Output, w)
			}
			if w.Precondition != "" && !strings.Contains(f.Message, w.Precondition) {
				t.Errorf("message %q does not name the precondition %s", f.Message, w.Precondition)
			}
			// A failed action changes nothing, and its failure is audited.
			if got := workspace(t, v.dir); !mapsEqual(got, before) {
				t.Errorf("workspace changed: %v, was %v", got, before)
			}
			es := v.entries(res.ActionID)
			if last := es[len(es)-1]; last.Step != "failed" || last.Decision != w.ErrorCode {
				t.Errorf("last audit entry %s %s, want failed %s", last.Step, last.Decision, w.ErrorCode)
			}
			v.verify()
		})
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// TestPreconditions runs testdata/preconditions.json: what a peer's
// descriptor declares must hold is checked before the action runs; a
// failed precondition fails the action, naming it and its field.
func TestPreconditions(t *testing.T) {
	runDeclared(t, "testdata/preconditions.json")
}

// TestCaps runs testdata/caps.json: the declared memory cap bounds what an
// action writes and reads.
func TestCaps(t *testing.T) {
	runDeclared(t, "testdata/caps.json")
}

// TestPreconditionFailedNotRetried: an action whose precondition fails is
// recorded as failed (a worker resuming after a crash finds it ran and
// does not send it again), and nothing runs it again: no approval, no
// recovery.
func TestPreconditionFailedNotRetried(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		res := v.run(agent, descriptorJSON(t, leaf(t, "READ_FILE", map[string]string{"path": "/sandbox/a.txt"})))
		wantOutcome(t, res, executor.Failed)
		if c := errorCode(t, res.Output); c != executor.CodePreconditionFailed {
			t.Fatalf("error_code %s", c)
		}
		acts, err := v.ex.Actions(ctx, "task-1")
		if err != nil {
			t.Fatal(err)
		}
		if len(acts) != 1 || acts[0].ActionID != res.ActionID || acts[0].State != "failed" {
			t.Fatalf("actions %+v, want %s failed", acts, res.ActionID)
		}
		v.file("a.txt", "now here\n")
		if _, err := v.ex.Approve(ctx, res.ActionID, executor.Host); !errors.Is(err, executor.ErrNoPending) {
			t.Fatalf("Approve = %v, want ErrNoPending", err)
		}
		if n, err := v.ex.RecoverInterrupted(ctx); err != nil || n != 0 {
			t.Fatalf("RecoverInterrupted = %d, %v", n, err)
		}
		wantSteps(t, v.steps(res.ActionID), "received", "validated", "judged", "failed")
		v.verify()
	})
}

// TestPreconditionAtApproval: a held action's preconditions are checked
// again when it is approved; one that no longer holds fails it for good.
func TestPreconditionAtApproval(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		v.file("a.txt", "old\n")
		res := v.run(agent, descriptorJSON(t, leaf(t, "DELETE_FILE", map[string]string{"path": "/sandbox/a.txt"})))
		wantOutcome(t, res, executor.NeedsConfirmation)
		if err := os.Remove(v.dir + "/a.txt"); err != nil {
			t.Fatal(err)
		}
		res, err := v.ex.Approve(ctx, res.ActionID, operator)
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, res, executor.Failed)
		var f executor.Failure
		if err := json.Unmarshal(res.Output, &f); err != nil {
			t.Fatal(err)
		}
		if f.Code != executor.CodePreconditionFailed || f.Precondition != "paths_exist" ||
			f.Field != "/preconditions/paths_exist/0" || !slices.Equal(f.Paths, []string{"/sandbox/a.txt"}) {
			t.Fatalf("output %s", res.Output)
		}
		if _, err := v.ex.Approve(ctx, res.ActionID, operator); !errors.Is(err, executor.ErrNoPending) {
			t.Fatalf("second Approve = %v, want ErrNoPending", err)
		}
		wantSteps(t, v.steps(res.ActionID), "received", "validated", "judged", "sandboxed", "held", "judged", "failed")
		v.verify()
	})
}

// TestPreconditionPatternBudget: the wildcards of one action's paths_exist
// list a bounded number of directories; past it the precondition fails,
// saying why, rather than walking the whole workspace.
func TestPreconditionPatternBudget(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	v.file("a.txt", "a")
	for i := range 17 {
		for j := range 16 {
			if err := os.MkdirAll(v.dir+"/d"+strconv.Itoa(i)+"/e"+strconv.Itoa(j), 0o755); err != nil {
				t.Fatal(err)
			}
		}
	}
	d := leaf(t, "READ_FILE", map[string]string{"path": "/sandbox/a.txt"})
	d.Scope.Filesystem = proposal.FilesystemScope{Paths: []string{"/sandbox/"}, Recursive: true}
	d.Preconditions.PathsExist = []string{"/sandbox/*/*/*.txt"}
	res := v.run(agent, descriptorJSON(t, d))
	wantOutcome(t, res, executor.Failed)
	var f executor.Failure
	if err := json.Unmarshal(res.Output, &f); err != nil {
		t.Fatal(err)
	}
	if f.Code != executor.CodePreconditionFailed || f.Field != "/preconditions/paths_exist/0" ||
		!strings.Contains(f.Message, "more than 256 directories") {
		t.Fatalf("output %s", res.Output)
	}
}

// TestPreconditionWildcardSkipsInvalidNames: the wildcards of paths_exist
// match only names a proposal could use. A directory another process named
// with a control character, sorted before the one that matches, is not
// listed (before, its listing was refused and the precondition failed as
// "could not be checked" although /sandbox/z/x.txt exists); a file named
// with a bidi override does not satisfy a pattern (before, it did, though
// no descriptor can name it without a wildcard).
func TestPreconditionWildcardSkipsInvalidNames(t *testing.T) {
	run := func(t *testing.T, v *env, pattern string) *executor.Result {
		d := leaf(t, "READ_FILE", map[string]string{"path": "/sandbox/ok.txt"})
		d.Scope.Filesystem = proposal.FilesystemScope{Paths: []string{"/sandbox/"}, Recursive: true}
		d.Preconditions.PathsExist = []string{pattern}
		return v.run(agent, descriptorJSON(t, d))
	}
	t.Run("directory", func(t *testing.T) {
		v := newEnv(t, testdb.SQLite(t))
		v.file("ok.txt", "ok\n")
		v.file("a\nb/x.txt", "hidden\n")
		v.file("z/x.txt", "x\n")
		res := run(t, v, "/sandbox/*/x.txt")
		wantOutcome(t, res, executor.Completed)
	})
	t.Run("file", func(t *testing.T) {
		v := newEnv(t, testdb.SQLite(t))
		v.file("ok.txt", "ok\n")
		v.file("rtl\u202egnp.txt", "x\n")
		res := run(t, v, "/sandbox/rtl*")
		wantOutcome(t, res, executor.Failed)
		var f executor.Failure
		if err := json.Unmarshal(res.Output, &f); err != nil {
			t.Fatal(err)
		}
		if f.Code != executor.CodePreconditionFailed || !strings.HasSuffix(f.Message, "/sandbox/rtl* does not exist.") {
			t.Fatalf("output %s", res.Output)
		}
	})
}

// TestPreconditionHidesTheWorkspaceFolder: a paths_exist that cannot be
// checked because the workspace folder is missing tells the requester
// that, never the folder's host path (the operator's log has it), for a
// plain path and for a wildcard alike.
func TestPreconditionHidesTheWorkspaceFolder(t *testing.T) {
	for _, pattern := range []string{"/sandbox/a.txt", "/sandbox/*.txt"} {
		t.Run(pattern, func(t *testing.T) {
			v := newEnv(t, testdb.SQLite(t))
			d := leaf(t, "READ_FILE", map[string]string{"path": "/sandbox/a.txt"})
			d.Scope.Filesystem = proposal.FilesystemScope{Paths: []string{"/sandbox/"}, Recursive: true}
			d.Preconditions.PathsExist = []string{pattern}
			if err := os.RemoveAll(v.dir); err != nil {
				t.Fatal(err)
			}
			res := v.run(agent, descriptorJSON(t, d))
			wantOutcome(t, res, executor.Failed)
			var f executor.Failure
			if err := json.Unmarshal(res.Output, &f); err != nil {
				t.Fatal(err)
			}
			if f.Code != executor.CodePreconditionFailed || !strings.Contains(f.Message, "workspace folder is missing") {
				t.Fatalf("output %s", res.Output)
			}
			for _, s := range []string{string(res.Output), res.Reason} {
				if strings.Contains(s, v.dir) {
					t.Fatalf("the requester is told the host path %s: %s", v.dir, s)
				}
			}
		})
	}
}

// TestPreconditionWildcardSkipsWildcardNames: a name with a wildcard
// character (which LIST_FILES marks wildcard_char: no proposal can name
// it) satisfies no pattern of paths_exist, as a name the sandbox refuses
// does not, and is no directory a pattern goes through.
func TestPreconditionWildcardSkipsWildcardNames(t *testing.T) {
	run := func(t *testing.T, v *env, pattern string) *executor.Result {
		d := leaf(t, "READ_FILE", map[string]string{"path": "/sandbox/ok.txt"})
		d.Scope.Filesystem = proposal.FilesystemScope{Paths: []string{"/sandbox/"}, Recursive: true}
		d.Preconditions.PathsExist = []string{pattern}
		return v.run(agent, descriptorJSON(t, d))
	}
	for _, tc := range []struct{ name, file, pattern string }{
		{"file", "a[1].txt", "/sandbox/a*"},
		{"directory", "d*/x.txt", "/sandbox/d?/x.txt"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := newEnv(t, testdb.SQLite(t))
			v.file("ok.txt", "ok\n")
			v.file(tc.file, "x\n")
			res := run(t, v, tc.pattern)
			wantOutcome(t, res, executor.Failed)
			var f executor.Failure
			if err := json.Unmarshal(res.Output, &f); err != nil {
				t.Fatal(err)
			}
			if f.Code != executor.CodePreconditionFailed {
				t.Fatalf("output %s", res.Output)
			}
		})
	}
}
