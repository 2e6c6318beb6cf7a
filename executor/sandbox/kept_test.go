package sandbox_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// keptAt is the time the tests' sandboxes stamp kept files with
// (SetClock); in another zone than UTC, which the names use.
var keptAt = time.Date(2026, 11, 27, 19, 44, 13, 0, time.FixedZone("CET", 3600))

// keptFiles lists the files of dir whose names hold ".kept-", relative
// to dir, slash-separated.
func keptFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err == nil && strings.Contains(d.Name(), ".kept-") {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, filepath.ToSlash(rel))
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestFailedPutBackKept: off Linux, a file set aside is found edited and
// cannot be put back, its name made again meanwhile. It was kept under
// its private name, hidden from listings, and barred every later change
// of the path ("recover first") with nothing to recover. It is now moved
// to a visible name beside the path, which the error gives, and a later
// change of the path goes through. A name already taken gets a number.
func TestFailedPutBackKept(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		path, kept string
		change     sandbox.Change
		fixture    map[string]string
	}{
		{"/sandbox/notes.md", "notes.kept-20261127T184413Z.md",
			sandbox.Write{Path: "/sandbox/notes.md", Content: []byte("new\n")}, nil},
		{"/sandbox/sub/a.txt", "sub/a.kept-20261127T184413Z.txt",
			sandbox.Delete{Path: "/sandbox/sub/a.txt"}, nil},
		{"/sandbox/notes.md", "notes.kept-20261127T184413Z-1.md",
			sandbox.Write{Path: "/sandbox/notes.md", Content: []byte("new\n")},
			map[string]string{"notes.kept-20261127T184413Z.md": "taken\n"}},
	} {
		t.Run(c.kept, func(t *testing.T) {
			files := maps.Clone(stageFixture)
			maps.Copy(files, c.fixture)
			dir, sb := newSandbox(t, sandbox.Limits{}, files)
			sandbox.SetPortable(sb)
			sandbox.SetClock(sb, func() time.Time { return keptAt })
			host := hostPath(dir, c.path)
			st := stage(t, sb, []sandbox.Change{c.change})
			edited := false
			sandbox.SetSwapHook(sb, func(step, path string) error {
				if step == "aside" && !edited {
					edited = true
					aside := filepath.Join(filepath.Dir(host), sandbox.AsideName(filepath.Base(host)))
					if err := os.WriteFile(aside, []byte("hand edit\n"), 0o644); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(host, []byte("made again\n"), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				return nil
			})
			_, err := sb.Promote(ctx, st)
			if !edited || !errors.Is(err, sandbox.ErrChanged) {
				t.Fatalf("Promote = %v (edited %v); want ErrChanged", err, edited)
			}
			if !strings.Contains(err.Error(), sandbox.Prefix+c.kept) {
				t.Errorf("Promote = %v; want %s named", err, sandbox.Prefix+c.kept)
			}
			if left := reservedFiles(t, dir); left != nil {
				t.Fatalf("private files left: %v", left)
			}
			if b, err := os.ReadFile(host); err != nil || string(b) != "made again\n" {
				t.Errorf("%s = %q, %v; want the file made again", c.path, b, err)
			}
			if b, err := sb.Read(ctx, sandbox.Prefix+c.kept); err != nil || string(b) != "hand edit\n" {
				t.Errorf("%s = %q, %v; want the hand edit", c.kept, b, err)
			}
			sandbox.SetSwapHook(sb, func(string, string) error { return nil })
			st = stage(t, sb, []sandbox.Change{sandbox.Write{Path: c.path, Content: []byte("after\n")}})
			if _, err := sb.Promote(ctx, st); err != nil {
				t.Fatalf("a later change of the path = %v", err)
			}
		})
	}
}

// TestTakeBackKept: the step fails once the new image is in, and the
// path was replaced meanwhile (an editor saved by rename): one of the
// two files cannot go back to the path. Whichever stays out is moved to
// a visible name the error gives, not kept under the private name.
func TestTakeBackKept(t *testing.T) {
	ctx := context.Background()
	eachWayKept(t, func(t *testing.T, dir string, sb *sandbox.Sandbox) {
		host := hostPath(dir, "/sandbox/notes.md")
		st := stage(t, sb, []sandbox.Change{sandbox.Write{Path: "/sandbox/notes.md", Content: []byte("new\n")}})
		failed := false
		sandbox.SetSwapHook(sb, func(step, path string) error {
			if step == "in" && !failed {
				failed = true
				byRename("saved by an editor\n")(t, host)
				return errInjected
			}
			return nil
		})
		_, err := sb.Promote(ctx, st)
		if !failed || !errors.Is(err, errInjected) {
			t.Fatalf("Promote = %v; want the injected failure", err)
		}
		const kept = "notes.kept-20261127T184413Z.md"
		if !strings.Contains(err.Error(), sandbox.Prefix+kept) {
			t.Errorf("Promote = %v; want %s named", err, sandbox.Prefix+kept)
		}
		if left := reservedFiles(t, dir); left != nil {
			t.Fatalf("private files left: %v", left)
		}
		if got := keptFiles(t, dir); len(got) != 1 || got[0] != kept {
			t.Fatalf("kept files = %v; want [%s]", got, kept)
		}
		path, _ := os.ReadFile(host)
		out, _ := os.ReadFile(filepath.Join(dir, kept))
		if got := string(path) + "|" + string(out); got != "line one\nline two\nline three\n|saved by an editor\n" &&
			got != "saved by an editor\n|line one\nline two\nline three\n" {
			t.Errorf("path|kept = %q; want the file replaced and the editor's, one at each", got)
		}
	})
}

// TestKeptName: the visible name of a kept file passes the sandbox's own
// rules (a proposal can name it, read it and delete it: a text file's
// extension is kept), however long the name or deep the path.
func TestKeptName(t *testing.T) {
	long := strings.Repeat("\u00e9", 126) + ".md"            // 255 bytes
	combining := strings.Repeat("\u0105\u0301", 63) + ".txt" // NFC, with a mark that stays apart
	deep := strings.Repeat(strings.Repeat("d", 126)+"/", 31) // a path of 4089 bytes with the name below
	for _, c := range []struct {
		rel  string
		n    int
		want string // "" : any name that passes
	}{
		{"notes.md", 0, "notes.kept-20261127T184413Z.md"},
		{"sub/a.txt", 2, "sub/a.kept-20261127T184413Z-2.txt"},
		{"tool.sh", 0, "tool.sh.kept-20261127T184413Z"},
		{"x.md.md", 0, "x.md.kept-20261127T184413Z.md"},
		{long, 0, ""},
		{long, 12, ""},
		{combining, 0, ""},
		{"sub/" + combining, 3, ""},
		{deep + strings.Repeat("n", 140) + ".md", 0, ""},
	} {
		got := sandbox.KeptName(c.rel, keptAt, c.n)
		if c.want != "" && got != c.want {
			t.Errorf("KeptName(%q, %d) = %q; want %q", c.rel, c.n, got, c.want)
		}
		if rel, err := sandbox.Normalize(sandbox.Prefix + got); err != nil || rel != got {
			t.Errorf("KeptName(%.40q…, %d) = %.40q…: Normalize = %q, %v", c.rel, c.n, got, rel, err)
		}
		if sandbox.HasTextExt(c.rel) != sandbox.HasTextExt(got) || !strings.Contains(got, ".kept-20261127T184413Z") {
			t.Errorf("KeptName(%.40q…, %d) = %.40q…: extension or stamp lost", c.rel, c.n, got)
		}
		if strings.Count(got, "/") != strings.Count(c.rel, "/") || !strings.HasPrefix(got, c.rel[:strings.LastIndexByte(c.rel, '/')+1]) {
			t.Errorf("KeptName(%.40q…, %d) = %.40q…: not beside it", c.rel, c.n, got)
		}
	}
}

// TestClosedBeforeRemoved: a file set aside, or a temporary file, is
// closed before it is removed. Windows refuses, or defers until the last
// descriptor is closed (the name staying taken meanwhile), the removal of
// an open file; so it cannot be observed by removing on Linux, only by a
// hook at each removal that reports whether the sandbox still holds the
// file open.
func TestClosedBeforeRemoved(t *testing.T) {
	ctx := context.Background()
	for _, c := range []struct {
		name     string
		portable bool
		hook     func(dir string) (swap func(step, path string) error, beforeRename func(string) error)
	}{
		// Its name made again while it was set aside: the file set aside
		// goes (drop).
		{"dropped", true, func(dir string) (func(string, string) error, func(string) error) {
			return func(step, path string) error {
				if step == "aside" {
					return os.WriteFile(hostPath(dir, path), []byte("made again\n"), 0o644)
				}
				return nil
			}, nil
		}},
		// The step fails once the images are exchanged: the new image,
		// out again, goes (takeBack).
		{"taken back", false, func(string) (func(string, string) error, func(string) error) {
			return func(step, path string) error {
				if step == "in" {
					return errInjected
				}
				return nil
			}, nil
		}},
		// The step is done: the file set aside goes (removeAside).
		{"done", false, func(string) (func(string, string) error, func(string) error) { return nil, nil }},
		{"done/portable", true, func(string) (func(string, string) error, func(string) error) { return nil, nil }},
		// The step fails before the temporary file is renamed: it goes.
		{"temporary file", false, func(string) (func(string, string) error, func(string) error) {
			return nil, func(string) error { return errInjected }
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
			if c.portable {
				sandbox.SetPortable(sb)
			}
			st := stage(t, sb, []sandbox.Change{sandbox.Write{Path: "/sandbox/notes.md", Content: []byte("new\n")}})
			swap, beforeRename := c.hook(dir)
			sandbox.SetTestHooks(sb, nil, beforeRename)
			if swap != nil {
				sandbox.SetSwapHook(sb, swap)
			}
			var removed []string
			sandbox.SetRemoveHook(sb, func(name string, open bool) {
				removed = append(removed, name)
				if open {
					t.Errorf("%s removed while still open", name)
				}
			})
			sb.Promote(ctx, st)
			if len(removed) == 0 {
				t.Fatal("nothing removed")
			}
		})
	}
}

// TestLeftAsideNamed: a change of a path whose private name still holds
// a file that a crash left set aside (no recovery has run) fails, and
// says which hidden file it is and what to do. Before, it said only
// "(recover first)".
func TestLeftAsideNamed(t *testing.T) {
	ctx := context.Background()
	eachWay(t, "", func(t *testing.T, set func(*sandbox.Sandbox)) {
		dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
		set(sb)
		st := stage(t, sb, []sandbox.Change{sandbox.Write{Path: "/sandbox/sub/a.txt", Content: []byte("new\n")}})
		crashIn(sb, st, "")
		hidden := "sub/" + sandbox.AsideName("a.txt")
		if _, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(hidden))); err != nil {
			t.Fatalf("no file left set aside: %v", err)
		}
		st = stage(t, sb, []sandbox.Change{sandbox.Write{Path: "/sandbox/sub/a.txt", Content: []byte("again\n")}})
		_, err := sb.Promote(ctx, st)
		if !errors.Is(err, sandbox.ErrChanged) {
			t.Fatalf("Promote = %v; want ErrChanged", err)
		}
		for _, want := range []string{hidden, "recover that change first", "rename the file by hand"} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("Promote = %v; want it to say %q", err, want)
			}
		}
	})
}
