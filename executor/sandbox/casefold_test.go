package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/sandbox"
)

// The policy judges a path by its text, letter for letter; a file system
// that ignores case finds /sandbox/SECRETS/key.txt at secrets/key.txt.
// The sandbox must not act on a name stored under another spelling than
// the one the policy judged.
func TestCaseInsensitiveSpelling(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, map[string]string{
		"secrets/key.txt": "the key",
		"notes/a.md":      "a",
		// Stored decomposed, as HFS+ stores every name; proposals and
		// policies spell it in NFC.
		"cafe\u0301.md": "coffee",
	})
	sandbox.SetCaseInsensitive(sb)

	pol, err := policy.Parse("test.cedar", []byte(`
permit (principal, action, resource);
forbid (principal, action, resource in Path::"/sandbox/secrets/");
`))
	if err != nil {
		t.Fatal(err)
	}
	const who = "bc1pqqqsyqcyq5rqwzqfpg9scrgwpugpzysnzs23v9ccrydpk8qarc0jqygm6mj"
	judge := func(action, p string) policy.Effect {
		return pol.Decide(ctx, policy.Request{Principal: who, Action: action, Paths: []string{p},
			Risk: policy.RiskLow, RollbackSupported: true}).Effect
	}
	// What the policy sees: the other spelling is not under secrets/.
	if got := judge(policy.ActionReadFile, "/sandbox/SECRETS/key.txt"); got != policy.Permit {
		t.Fatalf("policy on /sandbox/SECRETS/key.txt: %v, want Permit (it judges the text)", got)
	}

	spelling := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, sandbox.ErrSpelling) {
			t.Errorf("%s: %v, want ErrSpelling", what, err)
		}
	}
	b, err := sb.Read(ctx, "/sandbox/SECRETS/key.txt")
	if err == nil {
		t.Errorf("read /sandbox/SECRETS/key.txt gave the forbidden file: %q", b)
	}
	spelling("read /sandbox/SECRETS/key.txt", err)
	_, err = sb.Read(ctx, "/sandbox/secrets/KEY.txt")
	spelling("read /sandbox/secrets/KEY.txt", err)
	_, err = sb.List(ctx, "/sandbox/Secrets")
	spelling("list /sandbox/Secrets", err)
	_, err = sb.Stat(ctx, "/sandbox/SECRETS/key.txt")
	spelling("stat /sandbox/SECRETS/key.txt", err)
	for _, c := range []sandbox.Change{
		sandbox.Delete{Path: "/sandbox/SECRETS/key.txt"},
		sandbox.Write{Path: "/sandbox/SECRETS/key.txt", Content: []byte("mine")},
		sandbox.Write{Path: "/sandbox/SECRETS/new.txt", Content: []byte("mine")},
		sandbox.Write{Path: "/sandbox/notes/A.md", Content: []byte("over a.md")},
		sandbox.Rename{From: "/sandbox/notes/a.md", To: "/sandbox/SECRETS/a.md"},
	} {
		_, err := sb.Stage(ctx, []sandbox.Change{c})
		spelling("stage "+describe(c), err)
	}
	if got, err := os.ReadFile(filepath.Join(dir, "secrets", "key.txt")); err != nil || string(got) != "the key" {
		t.Errorf("secrets/key.txt: %q, %v", got, err)
	}

	// Names spelled as stored work, in NFC for one stored decomposed; a
	// new name keeps its spelling.
	if b, err := sb.Read(ctx, "/sandbox/caf\u00e9.md"); err != nil || string(b) != "coffee" {
		t.Errorf("read the NFC spelling of a decomposed name: %q, %v", b, err)
	}
	st, err := sb.Stage(ctx, []sandbox.Change{
		sandbox.Write{Path: "/sandbox/notes/a.md", Content: []byte("a2")},
		sandbox.Write{Path: "/sandbox/New/b.md", Content: []byte("b"), Parents: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Promote(ctx, st); err != nil {
		t.Fatal(err)
	}
	if b, err := sb.Read(ctx, "/sandbox/New/b.md"); err != nil || string(b) != "b" {
		t.Errorf("read a new folder's file: %q, %v", b, err)
	}
	_, err = sb.Read(ctx, "/sandbox/new/b.md")
	spelling("read /sandbox/new/b.md", err)
}

func describe(c sandbox.Change) string {
	switch c := c.(type) {
	case sandbox.Write:
		return "write " + c.Path
	case sandbox.Delete:
		return "delete " + c.Path
	case sandbox.Rename:
		return "rename " + c.From + " to " + c.To
	}
	return "?"
}

// The probe at Open finds what the host's file system does, and leaves
// nothing behind; one that folds names is found.
func TestProbeFolds(t *testing.T) {
	dir, sb := newSandbox(t, sandbox.Limits{}, nil)
	if err := os.WriteFile(filepath.Join(dir, "probe"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := os.Lstat(filepath.Join(dir, "PROBE"))
	if want := err == nil; sandbox.Folds(sb) != want {
		t.Errorf("Folds: %v, want %v (the host's folder)", sandbox.Folds(sb), want)
	}
	sandbox.SetCaseInsensitive(sb)
	if !sandbox.Folds(sb) {
		t.Error("Folds of a file system that ignores case: false")
	}
	if left := reservedFiles(t, dir); len(left) > 0 {
		t.Errorf("the probe left %v", left)
	}
}

// TestReservedNameInOtherSpellings: on a file system that folds names,
// ".SNAPNODE-COUNT" is the sandbox's count file, ".Snapnode-count-new"
// the file it writes the count to first (and removes when it finds it
// there), and ".ſnapnode-lock" (LONG S folds to s) its lock. Where the
// sandbox's file is missing at the time, no spelling check finds it: a
// proposal could make a file of its own under that name, for the
// sandbox to read as its count or remove. The rule on reserved names
// holds in every letter case, whatever the file system.
func TestReservedNameInOtherSpellings(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, map[string]string{"a.txt": "{}"})
	sandbox.SetCaseInsensitive(sb)
	for _, name := range []string{
		".SNAPNODE-COUNT", ".Snapnode-count-new", ".SnapNode-Lock", ".\u017Fnapnode-count", ".snapnode-COUNT",
		".SNAPNODE-tmp-0123456789abcdef01234567", ".SNAPNODE-",
	} {
		p := "/sandbox/" + name
		if _, err := sandbox.Normalize(p); !errors.Is(err, sandbox.RuleReserved) {
			t.Errorf("Normalize(%q) = %v; want %s", p, err, sandbox.RuleReserved)
		}
		os.Remove(filepath.Join(dir, sandbox.CountFile))
		for _, ch := range []sandbox.Change{
			sandbox.Write{Path: p, Content: []byte("{}")},
			sandbox.Rename{From: "/sandbox/a.txt", To: p},
			sandbox.Mkdir{Path: p},
		} {
			if _, err := sb.Stage(ctx, []sandbox.Change{ch}); !errors.Is(err, sandbox.RuleReserved) {
				t.Errorf("Stage(%#v) = %v; want %s", ch, err, sandbox.RuleReserved)
			}
		}
	}
	for _, name := range []string{".snapnode", "snapnode-count", ".snapnodecount", ".snap-node-count", "x.SNAPNODE-COUNT"} {
		if _, err := sandbox.Normalize("/sandbox/" + name); err != nil {
			t.Errorf("Normalize(%q) = %v; want it allowed", name, err)
		}
	}
}
