package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// eachWay runs f as a subtest name/way for each way the sandbox replaces
// files: in one step (renameat2, on Linux) and as off Linux
// (SetPortable). set makes a sandbox replace files that way.
func eachWay(t *testing.T, name string, f func(t *testing.T, set func(*sandbox.Sandbox))) {
	t.Helper()
	for _, w := range []struct {
		name string
		set  func(*sandbox.Sandbox)
	}{{"exchange", func(*sandbox.Sandbox) {}}, {"portable", sandbox.SetPortable}} {
		t.Run(strings.TrimPrefix(name+"/"+w.name, "/"), func(t *testing.T) { f(t, w.set) })
	}
}

// eachWayKept runs f each way on a sandbox over stageFixture whose
// clock stands at keptAt, the time kept names are stamped with.
func eachWayKept(t *testing.T, f func(t *testing.T, dir string, sb *sandbox.Sandbox)) {
	t.Helper()
	eachWay(t, "", func(t *testing.T, set func(*sandbox.Sandbox)) {
		dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
		set(sb)
		sandbox.SetClock(sb, func() time.Time { return keptAt })
		f(t, dir, sb)
	})
}

// inPlace writes the file through a new descriptor, as echo >> does.
func inPlace(content string) func(t *testing.T, p string) {
	return func(t *testing.T, p string) {
		t.Helper()
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// removed removes the file.
func removed(t *testing.T, p string) {
	t.Helper()
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
}

// linkOut renames a symbolic link to a file outside the folder over the
// path.
func linkOut(t *testing.T, p string) {
	t.Helper()
	tmp := filepath.Join(filepath.Dir(p), ".edit.lnk")
	if err := os.Symlink("../../outside.md", tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, p); err != nil {
		t.Fatal(err)
	}
}

// twin gives the file a second name beside it.
func twin(t *testing.T, p string) {
	t.Helper()
	if err := os.Link(p, p+".twin"); err != nil {
		t.Fatal(err)
	}
}

// byRename writes a new file and renames it over the path, as most
// editors save.
func byRename(content string) func(t *testing.T, p string) {
	return func(t *testing.T, p string) {
		t.Helper()
		tmp := filepath.Join(filepath.Dir(p), ".edit.swp")
		if err := os.WriteFile(tmp, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, p); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPromoteKeepsHandEdit edits a touched file by hand after Promote
// checked it against its pre-image and before the sandbox writes over it,
// removes it or creates it: the promotion fails with ErrChanged naming
// the path, nothing of it stays, and the hand edit is there.
func TestPromoteKeepsHandEdit(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		path string // virtual path edited
		kind string // the step of path that the edit comes just before
		edit func(t *testing.T, p string)
	}{
		{"overwrite, in place", "/sandbox/notes.md", "write", inPlace("hand edit\n")},
		{"overwrite, by rename", "/sandbox/notes.md", "write", byRename("hand edit\n")},
		{"delete, in place", "/sandbox/sub/a.txt", "unlink", inPlace("hand edit\n")},
		{"delete, by rename", "/sandbox/sub/a.txt", "unlink", byRename("hand edit\n")},
		{"create, in place", "/sandbox/sub/tool.txt", "write", inPlace("hand edit\n")},
		{"create, by rename", "/sandbox/sub/tool.txt", "write", byRename("hand edit\n")},
		{"overwrite, removed", "/sandbox/notes.md", "write", removed},
		{"overwrite, replaced by a link", "/sandbox/notes.md", "write", linkOut},
		{"delete, replaced by a link", "/sandbox/sub/a.txt", "unlink", linkOut},
		{"overwrite, hard-linked", "/sandbox/notes.md", "write", twin},
		{"delete, hard-linked", "/sandbox/sub/a.txt", "unlink", twin},
	} {
		for _, at := range []string{"step", "rename"} {
			if at == "rename" && tc.kind != "write" {
				continue
			}
			eachWay(t, tc.name+" before "+at, func(t *testing.T, set func(*sandbox.Sandbox)) {
				dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
				set(sb)
				host := hostPath(dir, tc.path)
				want := t.TempDir() // the fixture with the hand edit alone
				populate(t, want, stageFixture)
				tc.edit(t, hostPath(want, tc.path))
				openFolder(t, want) // its lock file, as dir has
				st := stage(t, sb, composite)
				edited := false
				meddle := func(path string) {
					if path == tc.path && !edited {
						edited = true
						tc.edit(t, host)
					}
				}
				// Before the step: the window spans the writes of the paths
				// before it. Before the rename: the temporary file is written.
				sandbox.SetTestHooks(sb, func(kind, path string) error {
					if at == "step" && kind == tc.kind {
						meddle(path)
					}
					return nil
				}, func(path string) error {
					if at == "rename" {
						meddle(path)
					}
					return nil
				})
				_, err := sb.Promote(ctx, st)
				if !edited {
					t.Fatal("the hook never ran")
				}
				var oe *sandbox.OpError
				// A link in place before the step is refused as a link
				// (checkFile), as it was; after it, as a change.
				refused := errors.Is(err, sandbox.ErrChanged) ||
					(at == "step" && (errors.Is(err, sandbox.ErrSymlink) || errors.Is(err, sandbox.ErrHardLink)))
				if !refused || errors.Is(err, sandbox.ErrIncomplete) || !errors.As(err, &oe) || oe.Path != tc.path {
					t.Fatalf("Promote = %v; want ErrChanged at %s", err, tc.path)
				}
				if n := strings.Count(err.Error(), "sandbox: "); n != 1 {
					t.Errorf("Promote = %v; want the package named once, not %d times", err, n)
				}
				sandbox.SetTestHooks(sb, nil, nil)
				if treeHash(t, dir) != treeHash(t, want) {
					t.Fatal("the tree is not the fixture with the hand edit")
				}
				if left := reservedFiles(t, dir); left != nil {
					t.Fatalf("private files left: %v", left)
				}
			})
		}
	}
}

// hostPath is the file of dir that the virtual path p names.
func hostPath(dir, p string) string {
	return filepath.Join(dir, filepath.FromSlash(p[len("/sandbox/"):]))
}

// openFolder opens dir as a sandbox and closes it: the folder then holds
// the lock file a sandbox makes.
func openFolder(t *testing.T, dir string) {
	t.Helper()
	sb, err := sandbox.Open(dir, sandbox.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	sb.Close()
}

// TestRestoreKeepsHandEdit edits a promoted file by hand after Rollback,
// Recover or RecoverAround checked it against its post-image and before
// the pre-image is written back: ErrDiverged naming the path, nothing
// restored, the hand edit kept.
func TestRestoreKeepsHandEdit(t *testing.T) {
	ctx := context.Background()
	for _, how := range []string{"rollback", "recover", "recover around"} {
		for _, edit := range []struct {
			name string
			fn   func(t *testing.T, p string)
		}{{"in place", inPlace("hand edit\n")}, {"by rename", byRename("hand edit\n")}} {
			eachWay(t, how+", "+edit.name, func(t *testing.T, set func(*sandbox.Sandbox)) {
				dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
				set(sb)
				st := stage(t, sb, composite)
				snap, err := sb.Promote(ctx, st)
				if err != nil {
					t.Fatal(err)
				}
				want := t.TempDir() // the promoted tree with the hand edit
				if err := os.CopyFS(want, os.DirFS(dir)); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(filepath.Join(want, sandbox.LockFile), 0o600); err != nil {
					t.Fatal(err)
				}
				edit.fn(t, hostPath(want, "/sandbox/notes.md"))
				if err := os.Chmod(hostPath(want, "/sandbox/notes.md"), 0o644); err != nil {
					t.Fatal(err)
				}
				edited := false
				sandbox.SetTestHooks(sb, nil, func(path string) error {
					if path == "/sandbox/notes.md" && !edited {
						edited = true
						edit.fn(t, hostPath(dir, path))
					}
					return nil
				})
				switch how {
				case "rollback":
					err = sb.Rollback(ctx, snap)
				case "recover":
					err = sb.Recover(ctx, snap)
				default:
					_, err = sb.RecoverAround(ctx, snap)
				}
				if !edited {
					t.Fatal("the hook never ran")
				}
				var oe *sandbox.OpError
				if !errors.Is(err, sandbox.ErrDiverged) || errors.Is(err, sandbox.ErrIncomplete) || !errors.As(err, &oe) || oe.Path != "/sandbox/notes.md" {
					t.Fatalf("%s = %v; want ErrDiverged at /sandbox/notes.md", how, err)
				}
				if treeHash(t, dir) != treeHash(t, want) {
					b, _ := os.ReadFile(hostPath(dir, "/sandbox/notes.md"))
					t.Fatalf("the tree is not the promoted one with the hand edit (notes.md = %q)", b)
				}
			})
		}
	}
}

// TestPromoteKeepsWriteThroughOpenFile: an editor that opened the file
// before the sandbox set it aside writes through its descriptor after
// the new image is in. Its write lands in the file set aside, which the
// sandbox hashes again: it puts that file back, undoes the promotion and
// reports ErrChanged.
func TestPromoteKeepsWriteThroughOpenFile(t *testing.T) {
	eachWay(t, "", testWriteThroughOpenFile)
}

func testWriteThroughOpenFile(t *testing.T, set func(*sandbox.Sandbox)) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
	set(sb)
	host := hostPath(dir, "/sandbox/notes.md")
	st := stage(t, sb, composite)
	f, err := os.OpenFile(host, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	wrote := false
	sandbox.SetSwapHook(sb, func(step, path string) error {
		if step == "in" && path == "/sandbox/notes.md" && !wrote {
			wrote = true
			if _, err := f.WriteAt([]byte("HAND"), 0); err != nil {
				t.Fatal(err)
			}
		}
		return nil
	})
	_, err = sb.Promote(ctx, st)
	var oe *sandbox.OpError
	if !wrote || !errors.Is(err, sandbox.ErrChanged) || errors.Is(err, sandbox.ErrIncomplete) || !errors.As(err, &oe) || oe.Path != "/sandbox/notes.md" {
		t.Fatalf("Promote = %v (wrote %v); want ErrChanged at /sandbox/notes.md", err, wrote)
	}
	if b, err := os.ReadFile(host); err != nil || string(b) != "HAND one\nline two\nline three\n" {
		t.Fatalf("notes.md = %q, %v: the write through the open file is lost", b, err)
	}
	// The editor's descriptor is the file at the path again.
	fi, err := os.Stat(host)
	if err != nil {
		t.Fatal(err)
	}
	got, err := f.Stat()
	if err != nil || !os.SameFile(fi, got) {
		t.Fatal("the editor's file is not back at its path")
	}
	if left := reservedFiles(t, dir); left != nil {
		t.Fatalf("private files left: %v", left)
	}
}

// TestCrashWhileSetAside stops a promotion (a panic stands for the crash)
// while a file is set aside under its private name, before or after the
// new image is in: Sweep leaves the file set aside, and Recover settles it
// and restores the tree.
func TestCrashWhileSetAside(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct{ step, path string }{
		{"aside", "/sandbox/notes.md"}, {"in", "/sandbox/notes.md"},
		{"aside", "/sandbox/sub/a.txt"}, {"in", "/sandbox/sub/a.txt"},
	} {
		step, path := c.step, c.path
		eachWay(t, step+" "+path, func(t *testing.T, set func(*sandbox.Sandbox)) {
			dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
			set(sb)
			before := treeHash(t, dir)
			st := stage(t, sb, composite)
			snap := st.Snapshot()
			sandbox.SetSwapHook(sb, func(s, p string) error {
				if s == step && p == path {
					panic("crash")
				}
				return nil
			})
			func() {
				defer func() {
					if recover() == nil {
						t.Fatal("no crash")
					}
				}()
				sb.Promote(ctx, st)
			}()
			sb.Close()
			sb, err := sandbox.Open(dir, sandbox.Limits{})
			if err != nil {
				t.Fatal(err)
			}
			set(sb)
			defer sb.Close()
			if _, err := sb.Sweep(ctx); err != nil {
				t.Fatal(err)
			}
			aside := filepath.Join(filepath.Dir(hostPath(dir, path)), sandbox.AsideName(filepath.Base(path)))
			if _, err := os.Lstat(aside); err != nil {
				t.Fatalf("Sweep removed the file set aside: %v", err)
			}
			if err := sb.Recover(ctx, snap); err != nil {
				t.Fatal(err)
			}
			if treeHash(t, dir) != before {
				t.Fatal("Recover did not restore the tree")
			}
			if left := reservedFiles(t, dir); left != nil {
				t.Fatalf("private files left: %v", left)
			}
		})
	}
}

// TestCrashAsideEdited: a crash leaves a file set aside after the new
// image went in, and that file is written to afterwards (an editor held
// it open). Recover refuses, naming the path and the hidden file, and
// changes nothing. RecoverAround moves that file to a visible name
// beside the path (a later change of the path is not barred by it, and
// the file can be read, listed and removed through the sandbox), leaves
// the path as found (the action's own image), reports both, and
// restores the others.
func TestCrashAsideEdited(t *testing.T) {
	ctx := context.Background()
	eachWayKept(t, func(t *testing.T, dir string, sb *sandbox.Sandbox) {
		snap := crashAsideEdited(t, dir, sb, "written through an open file\n")
		aside := filepath.Join(dir, sandbox.AsideName("notes.md"))
		var oe *sandbox.OpError
		err := sb.Recover(ctx, snap)
		if !errors.Is(err, sandbox.ErrDiverged) || !errors.As(err, &oe) || oe.Path != "/sandbox/notes.md" {
			t.Fatalf("Recover = %v; want ErrDiverged at /sandbox/notes.md", err)
		}
		if !strings.Contains(err.Error(), sandbox.AsideName("notes.md")) || !strings.Contains(err.Error(), "RecoverAround") {
			t.Errorf("Recover = %v; want the hidden file named, and what to do", err)
		}
		if _, err := os.Lstat(aside); err != nil {
			t.Fatalf("Recover, refusing, moved the file set aside: %v", err)
		}
		left, err := sb.RecoverAround(ctx, snap)
		if err != nil || len(left) != 1 || left[0].Path != "/sandbox/notes.md" {
			t.Fatalf("RecoverAround = %+v, %v", left, err)
		}
		const kept = "/sandbox/notes.kept-20261127T184413Z.md"
		l := left[0]
		if l.Kept != kept {
			t.Errorf("Kept = %q; want %q", l.Kept, kept)
		}
		if l.Found.Kind != sandbox.KindFile || l.Found.SHA256 != l.Post.SHA256 {
			t.Errorf("Found = %+v; want the action's image %+v, which the path holds", l.Found, l.Post)
		}
		if !strings.Contains(l.Note, sandbox.AsideName("notes.md")) || !strings.Contains(l.Note, kept) {
			t.Errorf("Note = %q; want both names", l.Note)
		}
		if err := sb.ForgetKept(ctx, snap, ""); err != nil { // the result recorded
			t.Fatal(err)
		}
		if left := reservedFiles(t, dir); left != nil {
			t.Fatalf("private files left: %v", left)
		}
		if b, err := sb.Read(ctx, kept); err != nil || string(b) != "written through an open file\n" {
			t.Fatalf("%s = %q, %v", kept, b, err)
		}
		if b, err := sb.Read(ctx, "/sandbox/notes.md"); err != nil || string(b) != "line one\nchanged\n" {
			t.Errorf("notes.md = %q, %v; want as found, the action's image", b, err)
		}
		for name, want := range map[string]string{"sub/a.txt": "a\n", "tool.md": "#!/bin/sh\n"} {
			if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
				t.Errorf("%s = %q, %v: not restored", name, b, err)
			}
		}
		listed, err := sb.List(ctx, "/sandbox/")
		if err != nil || !slices.ContainsFunc(listed, func(e sandbox.Entry) bool { return e.Path == kept && e.Invalid == "" }) {
			t.Errorf("List = %+v, %v; want %s in it", listed, err, kept)
		}
		// Nothing bars the path now, and the kept file goes as any text file.
		st := stage(t, sb, []sandbox.Change{
			sandbox.Write{Path: "/sandbox/notes.md", Content: []byte("after\n")},
			sandbox.Delete{Path: kept},
		})
		if _, err := sb.Promote(ctx, st); err != nil {
			t.Fatalf("Promote after recovery = %v", err)
		}
	})
}

// replaceOrRemove is a replacement of a file and a removal of one, each
// with its path: the two steps that set a file aside.
var replaceOrRemove = []struct {
	path   string
	change sandbox.Change
}{
	{"/sandbox/notes.md", sandbox.Write{Path: "/sandbox/notes.md", Content: []byte("new\n")}},
	{"/sandbox/sub/a.txt", sandbox.Delete{Path: "/sandbox/sub/a.txt"}},
}

// TestPutBackSynced: a file found edited once set aside is put back, and
// its directory synced before Promote returns, so that a power cut then
// cannot leave the path empty (or holding the new image) with the edited
// file under its private name, for an action recorded as failed that no
// Recover will see again.
func TestPutBackSynced(t *testing.T) {
	ctx := context.Background()
	for _, c := range replaceOrRemove {
		eachWay(t, c.path, func(t *testing.T, set func(*sandbox.Sandbox)) {
			dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
			set(sb)
			st := stage(t, sb, []sandbox.Change{c.change})
			edited, synced := false, 0
			sandbox.SetSwapHook(sb, func(step, path string) error {
				if step == "aside" && !edited {
					edited = true
					aside := filepath.Join(filepath.Dir(hostPath(dir, path)), sandbox.AsideName(filepath.Base(path)))
					if err := os.WriteFile(aside, []byte("hand edit\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return nil
			})
			sandbox.SetSyncHook(sb, func() error {
				if edited {
					synced++
				}
				return nil
			})
			if _, err := sb.Promote(ctx, st); !edited || !errors.Is(err, sandbox.ErrChanged) {
				t.Fatalf("Promote = %v (edited %v); want ErrChanged", err, edited)
			}
			if b, err := os.ReadFile(hostPath(dir, c.path)); err != nil || string(b) != "hand edit\n" {
				t.Fatalf("%s = %q, %v; want the hand edit back", c.path, b, err)
			}
			if synced == 0 {
				t.Fatal("the directory was not synced once the file was put back")
			}
		})
	}
}

// TestSetAsideKeepsEditDuringLink: off Linux, a rename that must not
// replace is a link(2) and a removal. Setting a workspace file aside so
// would remove, with the old name, whatever an editor renamed over it
// between the two: the hand edit lost, and the promotion reported done.
// Any link made from a workspace name is raced so here; the edit must
// stay and the promotion fail with ErrChanged.
func TestSetAsideKeepsEditDuringLink(t *testing.T) {
	ctx := context.Background()
	for _, c := range replaceOrRemove {
		t.Run(c.path, func(t *testing.T) {
			dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
			sandbox.SetPortable(sb)
			host := hostPath(dir, c.path)
			st := stage(t, sb, []sandbox.Change{c.change})
			edited := false
			sandbox.SetLinkHook(sb, func(from, to string) {
				if from == filepath.Base(host) && !edited {
					edited = true
					byRename("hand edit\n")(t, host)
				}
			})
			_, err := sb.Promote(ctx, st)
			if !edited {
				return // no link from the workspace name: nothing to race
			}
			if !errors.Is(err, sandbox.ErrChanged) {
				t.Errorf("Promote = %v; want ErrChanged", err)
			}
			if b, err := os.ReadFile(host); err != nil || string(b) != "hand edit\n" {
				t.Errorf("%s = %q, %v: the hand edit is lost", c.path, b, err)
			}
		})
	}
}

// TestRemoveAsideFails: the file replaced or removed, set aside, cannot
// be removed once the step is done (the disk failing). The step is then
// undone with the others: Promote fails with that error, not
// ErrIncomplete, the tree is as before and no private file is left (it
// was a failure reported as such while the path kept the new image, and
// the file set aside stayed under its private name, barring every later
// change of the name).
func TestRemoveAsideFails(t *testing.T) {
	ctx := context.Background()
	for _, path := range []string{"/sandbox/notes.md", "/sandbox/sub/a.txt"} {
		eachWay(t, path, func(t *testing.T, set func(*sandbox.Sandbox)) {
			dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
			set(sb)
			before := treeHash(t, dir)
			st := stage(t, sb, composite)
			failed := false
			sandbox.SetSwapHook(sb, func(step, p string) error {
				if step == "remove" && p == path && !failed {
					failed = true
					return errInjected
				}
				return nil
			})
			var oe *sandbox.OpError
			if _, err := sb.Promote(ctx, st); !failed || !errors.Is(err, errInjected) || errors.Is(err, sandbox.ErrIncomplete) || !errors.As(err, &oe) || oe.Path != path {
				t.Fatalf("Promote = %v (failed %v); want the injected failure at %s", err, failed, path)
			}
			if treeHash(t, dir) != before {
				t.Fatal("a failed promotion left changes")
			}
			if left := reservedFiles(t, dir); left != nil {
				t.Fatalf("private files left: %v", left)
			}
		})
	}
}
