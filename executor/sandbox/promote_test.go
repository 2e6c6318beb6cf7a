package sandbox_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// composite touches every kind of effect at once.
var composite = []sandbox.Change{
	sandbox.Mkdir{Path: "/sandbox/docs"},
	sandbox.Write{Path: "/sandbox/docs/new.md", Content: []byte("new\n")},
	sandbox.Write{Path: "/sandbox/notes.md", Content: []byte("line one\nchanged\n")},
	sandbox.Delete{Path: "/sandbox/sub/a.txt"},
	sandbox.Rename{From: "/sandbox/tool.md", To: "/sandbox/sub/tool.txt"},
}

func TestPromoteAndRollback(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
	if err := os.Chmod(filepath.Join(dir, "notes.md"), 0o600); err != nil {
		t.Fatal(err)
	}
	original := treeHash(t, dir)
	st, err := sb.Stage(ctx, composite)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := sb.Promote(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{
		"docs/new.md":  "new\n",
		"notes.md":     "line one\nchanged\n",
		"sub/tool.txt": "#!/bin/sh\n",
	} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", name, b, err, want)
		}
	}
	for _, gone := range []string{"sub/a.txt", "tool.md"} {
		if _, err := os.Lstat(filepath.Join(dir, gone)); !os.IsNotExist(err) {
			t.Errorf("%s still there: %v", gone, err)
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "notes.md")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("an overwritten file lost its mode: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "docs/new.md")); err != nil || fi.Mode().Perm() != 0o644 {
		t.Errorf("a new file has mode %v", fi.Mode())
	}
	if left := reservedFiles(t, dir); left != nil {
		t.Errorf("temporary files left: %v", left)
	}

	// The snapshot goes through JSON, as the caller stores it.
	raw, err := json.Marshal(snap)
	if err != nil {
		t.Fatal(err)
	}
	back, err := sandbox.ParseSnapshot(raw)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Rollback(ctx, back); err != nil {
		t.Fatal(err)
	}
	if got := treeHash(t, dir); got != original {
		t.Fatal("rollback did not restore the original tree")
	}
	// A second rollback finds the pre-images, not the post-images.
	if err := sb.Rollback(ctx, back); !errors.Is(err, sandbox.ErrDiverged) {
		t.Fatalf("second rollback = %v", err)
	}
	if got := treeHash(t, dir); got != original {
		t.Fatal("a refused rollback changed the tree")
	}
}

func TestPromoteChanged(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		meddle func(dir string) error
		path   string
	}{
		{"file edited", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "notes.md"), []byte("edited\n"), 0o644)
		}, "/sandbox/notes.md"},
		{"file deleted", func(dir string) error { return os.Remove(filepath.Join(dir, "sub/a.txt")) }, "/sandbox/sub/a.txt"},
		{"destination created", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "sub/tool.txt"), []byte("x"), 0o644)
		}, "/sandbox/sub/tool.txt"},
		{"directory created", func(dir string) error { return os.Mkdir(filepath.Join(dir, "docs"), 0o755) }, "/sandbox/docs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
			st, err := sb.Stage(ctx, composite)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.meddle(dir); err != nil {
				t.Fatal(err)
			}
			before := treeHash(t, dir)
			_, err = sb.Promote(ctx, st)
			var oe *sandbox.OpError
			if !errors.Is(err, sandbox.ErrChanged) || !errors.As(err, &oe) || oe.Path != tc.path {
				t.Fatalf("Promote = %v; want ErrChanged at %s", err, tc.path)
			}
			if treeHash(t, dir) != before {
				t.Fatal("a refused promotion changed the tree")
			}
		})
	}
}

func TestPromoteTwiceAndForeign(t *testing.T) {
	ctx := context.Background()
	_, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
	st, err := sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/notes.md", Content: []byte("v2\n")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Promote(ctx, st); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Promote(ctx, st); !errors.Is(err, sandbox.ErrChanged) {
		t.Fatalf("second Promote = %v", err)
	}
	_, other := newSandbox(t, sandbox.Limits{}, stageFixture)
	if _, err := other.Promote(ctx, st); !errors.Is(err, sandbox.ErrForeign) {
		t.Fatalf("Promote by another sandbox = %v", err)
	}
	// A narrowed view is the same sandbox.
	st, err = sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/notes.md", Content: []byte("v3\n")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Narrow(sandbox.Limits{MaxEntries: 1}).Promote(ctx, st); err != nil {
		t.Fatalf("Promote through a narrowed view = %v", err)
	}
}

// TestPromoteRefusesLinksSwappedIn replaces the target of a staged write by
// a symbolic link or a hard link to an outside file between Stage and
// Promote: the promotion is refused and the outside file is untouched.
func TestPromoteRefusesLinksSwappedIn(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		swap func(target, outside string) error
		want error
	}{
		{"symlink", func(target, outside string) error {
			if err := os.Remove(target); err != nil {
				return err
			}
			return os.Symlink(outside, target)
		}, sandbox.ErrSymlink},
		{"hard link", func(target, outside string) error {
			if err := os.Remove(target); err != nil {
				return err
			}
			return os.Link(outside, target)
		}, sandbox.ErrHardLink},
		{"parent becomes a symlink", func(target, outside string) error {
			parent := filepath.Dir(target)
			if err := os.RemoveAll(parent); err != nil {
				return err
			}
			return os.Symlink(filepath.Dir(outside), parent)
		}, sandbox.ErrSymlink},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
			outside := filepath.Join(t.TempDir(), "a.txt")
			if err := os.WriteFile(outside, []byte("outside\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			st, err := sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/sub/a.txt", Content: []byte("pwned\n")}})
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.swap(filepath.Join(dir, "sub/a.txt"), outside); err != nil {
				t.Fatal(err)
			}
			if _, err := sb.Promote(ctx, st); !errors.Is(err, tc.want) {
				t.Fatalf("Promote = %v; want %v", err, tc.want)
			}
			if b, _ := os.ReadFile(outside); string(b) != "outside\n" {
				t.Fatalf("outside file now %q", b)
			}
		})
	}
}

func TestRollbackDiverged(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		meddle func(dir string) error
		path   string
	}{
		{"promoted file edited", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "notes.md"), []byte("edited again\n"), 0o644)
		}, "/sandbox/notes.md"},
		{"renamed file removed", func(dir string) error { return os.Remove(filepath.Join(dir, "sub/tool.txt")) }, "/sandbox/sub/tool.txt"},
		{"deleted file back", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "sub/a.txt"), []byte("a\n"), 0o644)
		}, "/sandbox/sub/a.txt"},
		{"created directory holds a new file", func(dir string) error {
			return os.WriteFile(filepath.Join(dir, "docs/other.txt"), []byte("x"), 0o644)
		}, "/sandbox/docs"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
			st, err := sb.Stage(ctx, composite)
			if err != nil {
				t.Fatal(err)
			}
			snap, err := sb.Promote(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			if err := tc.meddle(dir); err != nil {
				t.Fatal(err)
			}
			before := treeHash(t, dir)
			err = sb.Rollback(ctx, snap)
			var oe *sandbox.OpError
			if !errors.Is(err, sandbox.ErrDiverged) || !errors.As(err, &oe) || oe.Path != tc.path {
				t.Fatalf("Rollback = %v; want ErrDiverged at %s", err, tc.path)
			}
			if treeHash(t, dir) != before {
				t.Fatal("a refused rollback changed the tree")
			}
		})
	}
}

// TestRecover rolls back a promotion of which some paths are already back
// in their pre-image, as after a crash half-way: Rollback refuses, Recover
// finishes the job.
func TestRecover(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
	original := treeHash(t, dir)
	st, err := sb.Stage(ctx, composite)
	if err != nil {
		t.Fatal(err)
	}
	snap := st.Snapshot() // stored before promoting
	if _, err := sb.Promote(ctx, st); err != nil {
		t.Fatal(err)
	}
	// Half undone by hand: the deleted file is back, the new one gone.
	populate(t, dir, map[string]string{"sub/a.txt": "a\n"})
	if err := os.Remove(filepath.Join(dir, "docs/new.md")); err != nil {
		t.Fatal(err)
	}
	if err := sb.Rollback(ctx, snap); !errors.Is(err, sandbox.ErrDiverged) {
		t.Fatalf("Rollback of a half state = %v", err)
	}
	if err := sb.Recover(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if treeHash(t, dir) != original {
		t.Fatal("Recover did not restore the original tree")
	}
	// Recover of what is fully restored already is a no-op.
	if err := sb.Recover(ctx, snap); err != nil {
		t.Fatalf("second Recover = %v", err)
	}
	// A path in neither state is still refused.
	populate(t, dir, map[string]string{"notes.md": "third state\n"})
	if err := sb.Recover(ctx, snap); !errors.Is(err, sandbox.ErrDiverged) {
		t.Fatalf("Recover from a third state = %v", err)
	}
}

func TestParseSnapshotRejects(t *testing.T) {
	ctx := context.Background()
	_, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
	st, err := sb.Stage(ctx, composite)
	if err != nil {
		t.Fatal(err)
	}
	good, err := json.Marshal(st.Snapshot())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sandbox.ParseSnapshot(good); err != nil {
		t.Fatalf("good snapshot: %v", err)
	}
	edit := func(f func(s *sandbox.Snapshot)) []byte {
		var s sandbox.Snapshot
		if err := json.Unmarshal(good, &s); err != nil {
			t.Fatal(err)
		}
		f(&s)
		b, _ := json.Marshal(&s)
		return b
	}
	find := func(s *sandbox.Snapshot, p string) *sandbox.SnapshotEntry {
		for i := range s.Entries {
			if s.Entries[i].Path == p {
				return &s.Entries[i]
			}
		}
		t.Fatalf("no entry %s", p)
		return nil
	}
	for name, raw := range map[string][]byte{
		"not json":           []byte("{"),
		"version":            edit(func(s *sandbox.Snapshot) { s.Version = 2 }),
		"path outside":       edit(func(s *sandbox.Snapshot) { s.Entries[0].Path = "/etc/passwd" }),
		"path with dotdot":   edit(func(s *sandbox.Snapshot) { s.Entries[0].Path = "/sandbox/../x.txt" }),
		"root":               edit(func(s *sandbox.Snapshot) { s.Entries[0].Path = "/sandbox/" }),
		"repeated path":      edit(func(s *sandbox.Snapshot) { s.Entries[1].Path = s.Entries[0].Path }),
		"content tampered":   edit(func(s *sandbox.Snapshot) { find(s, "/sandbox/notes.md").Pre.Content[0] ^= 1 }),
		"size tampered":      edit(func(s *sandbox.Snapshot) { find(s, "/sandbox/notes.md").Pre.Size++ }),
		"post with content":  edit(func(s *sandbox.Snapshot) { find(s, "/sandbox/notes.md").Post.Content = []byte("x") }),
		"unknown kind":       edit(func(s *sandbox.Snapshot) { s.Entries[0].Post.Kind = "symlink" }),
		"dir with a hash":    edit(func(s *sandbox.Snapshot) { find(s, "/sandbox/docs").Post.SHA256 = strings.Repeat("0", 64) }),
		"short hash":         edit(func(s *sandbox.Snapshot) { find(s, "/sandbox/notes.md").Post.SHA256 = "abc" }),
		"mode beyond perms":  []byte(strings.Replace(string(good), `"0644"`, `"4755"`, 1)),
		"mode not octal":     []byte(strings.Replace(string(good), `"0644"`, `"rw-"`, 1)),
		"no entries version": []byte(`{"entries":[]}`),
	} {
		if _, err := sandbox.ParseSnapshot(raw); err == nil {
			t.Errorf("%s: accepted", name)
		} else if !errors.Is(err, sandbox.ErrBadSnapshot) {
			t.Errorf("%s: %v is not ErrBadSnapshot", name, err)
		}
	}
	if err := sb.Rollback(ctx, &sandbox.Snapshot{Version: 1, Entries: []sandbox.SnapshotEntry{{Path: "/sandbox/x.txt", Pre: sandbox.Image{Kind: "file", Size: 1}, Post: sandbox.Image{Kind: "absent"}}}}); !errors.Is(err, sandbox.ErrBadSnapshot) {
		t.Fatalf("Rollback of an inconsistent snapshot = %v", err)
	}
}

// Two stagings that each fit within MaxTotalBytes but not together (two
// actions staged at the same time, by the workers of one node or by two
// replicas): the second promotion is refused with the cap, changing
// nothing, whether it writes its files itself or had them prepared. Each
// was judged at staging against the workspace without the other.
func TestPromoteTotalBytesOfConcurrentStagings(t *testing.T) {
	ctx := context.Background()
	for _, prepared := range []bool{false, true} {
		dir, sb := newSandbox(t, sandbox.Limits{MaxTotalBytes: 100}, map[string]string{"old.txt": string(make([]byte, 20))})
		stage := func(p string, n int) *sandbox.Staged {
			t.Helper()
			st, err := sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: p, Content: make([]byte, n)}})
			if err != nil {
				t.Fatal(err)
			}
			return st
		}
		promote := func(st *sandbox.Staged) error {
			if !prepared {
				_, err := sb.Promote(ctx, st)
				return err
			}
			p, err := sb.Prepare(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			defer p.Discard()
			_, err = sb.PromotePrepared(ctx, p)
			return err
		}
		a, b := stage("/sandbox/a.txt", 50), stage("/sandbox/b.txt", 40)
		// Shrinking a file makes room: a staging that only shrinks is
		// never refused.
		shrink := stage("/sandbox/old.txt", 0)
		if err := promote(a); err != nil {
			t.Fatal(err)
		}
		before := treeHash(t, dir)
		err := promote(b)
		var le *sandbox.LimitError
		if !errors.As(err, &le) || le.Limit != sandbox.LimitTotalBytes || le.Max != 100 || le.Got != 110 {
			t.Fatalf("prepared %v: the second promotion past the cap = %v, want a total_bytes LimitError of 110", prepared, err)
		}
		if treeHash(t, dir) != before || reservedFiles(t, dir) != nil {
			t.Fatalf("prepared %v: the refused promotion changed the workspace", prepared)
		}
		if err := promote(shrink); err != nil {
			t.Fatalf("prepared %v: shrinking: %v", prepared, err)
		}
		if err := promote(stage("/sandbox/b.txt", 30)); err != nil {
			t.Fatalf("prepared %v: staged again within the cap: %v", prepared, err)
		}
		if c, err := sb.Counts(ctx); err != nil || c.Bytes != 80 {
			t.Fatalf("prepared %v: Counts = %+v, %v", prepared, c, err)
		}
	}
}

// TestRecoverAround: after a promotion, one file changed by someone else
// (new/x.txt, in a directory the promotion created) and one made a
// symbolic link (b.txt). RecoverAround puts back the paths still as the
// promotion left them (a.txt), leaves the others as found, the
// directory holding one of them too, and names each; Recover refuses the
// same state and changes nothing.
func TestRecoverAround(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	st, err := sb.Stage(ctx, []sandbox.Change{
		sandbox.Write{Path: "/sandbox/a.txt", Content: []byte("a after\n")},
		sandbox.Write{Path: "/sandbox/b.txt", Content: []byte("b after\n")},
		sandbox.Mkdir{Path: "/sandbox/new"},
		sandbox.Write{Path: "/sandbox/new/x.txt", Content: []byte("x\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	snap := st.Snapshot()
	if _, err := sb.Promote(ctx, st); err != nil {
		t.Fatal(err)
	}
	populate(t, dir, map[string]string{"new/x.txt": "edited\n", "elsewhere.txt": "e\n"})
	if err := os.Remove(filepath.Join(dir, "b.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("elsewhere.txt", filepath.Join(dir, "b.txt")); err != nil {
		t.Fatal(err)
	}
	before := treeHash(t, dir)
	if err := sb.Recover(ctx, snap); !errors.Is(err, sandbox.ErrDiverged) && !errors.Is(err, sandbox.ErrSymlink) {
		t.Fatalf("Recover = %v; want it refused", err)
	}
	if treeHash(t, dir) != before {
		t.Fatal("the refused Recover changed the tree")
	}
	left, err := sb.RecoverAround(ctx, snap)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]sandbox.Divergence{}
	for _, l := range left {
		got[l.Path] = l
	}
	if len(left) != 3 || got["/sandbox/b.txt"].Note == "" || got["/sandbox/new/x.txt"].Found.SHA256 != hashOf("edited\n") ||
		got["/sandbox/new/x.txt"].Post.SHA256 != hashOf("x\n") || got["/sandbox/new"].Note != `holds "x.txt"` {
		t.Fatalf("left %+v; want b.txt, new/x.txt and new", left)
	}
	for p, want := range map[string]string{"a.txt": "a\n", "new/x.txt": "edited\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, p)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
	if l, err := os.Readlink(filepath.Join(dir, "b.txt")); err != nil || l != "elsewhere.txt" {
		t.Errorf("b.txt: %q, %v; want the link left", l, err)
	}
	if again, err := sb.RecoverAround(ctx, snap); err != nil || len(again) != 3 {
		t.Errorf("second RecoverAround = %+v, %v; want the same three left, nothing else", again, err)
	}
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
