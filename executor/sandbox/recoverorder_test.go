package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// crashIn promotes st in sb and crashes (a panic, recovered) once the
// new image of path is in, or of any path where path is "". What was set
// aside stays under its private name.
func crashIn(sb *sandbox.Sandbox, st *sandbox.Staged, path string) {
	sandbox.SetSwapHook(sb, func(step, p string) error {
		if step == "in" && (path == "" || p == path) {
			panic("crash")
		}
		return nil
	})
	func() {
		defer func() { recover() }()
		sb.Promote(context.Background(), st)
	}()
	sandbox.SetSwapHook(sb, func(string, string) error { return nil })
}

// crashAsideEdited promotes composite in sb and crashes once notes.md's
// new image is in, its old file still under its private name; edit is
// then written to that file through a descriptor opened before (a hand
// edit).
func crashAsideEdited(t *testing.T, dir string, sb *sandbox.Sandbox, edit string) *sandbox.Snapshot {
	t.Helper()
	st := stage(t, sb, composite)
	crashIn(sb, st, "/sandbox/notes.md")
	if err := os.WriteFile(filepath.Join(dir, sandbox.AsideName("notes.md")), []byte(edit), 0o644); err != nil {
		t.Fatal(err)
	}
	return st.Snapshot()
}

// TestRecoverAroundRetryNamesKept: RecoverAround fails once after it
// found the edited file set aside (here a step of putting the other paths
// back fails), then is run again. The failed attempt changes nothing (the
// file stays under its private name), and the retry still moves it and
// names it. Before, the file was moved to its visible name before the
// steps that failed, and left there: the retry found nothing set aside
// and never said where the hand edit went.
func TestRecoverAroundRetryNamesKept(t *testing.T) {
	ctx := context.Background()
	eachWayKept(t, func(t *testing.T, dir string, sb *sandbox.Sandbox) {
		snap := crashAsideEdited(t, dir, sb, "hand edit\n")
		before := treeHash(t, dir)
		failed := false
		sandbox.SetTestHooks(sb, func(kind, path string) error {
			if !failed {
				failed = true
				return errInjected
			}
			return nil
		}, nil)
		if left, err := sb.RecoverAround(ctx, snap); !failed || !errors.Is(err, errInjected) {
			t.Fatalf("RecoverAround = %+v, %v; want the injected failure", left, err)
		}
		if treeHash(t, dir) != before {
			t.Errorf("the failed RecoverAround changed the tree (kept files: %v)", keptFiles(t, dir))
		}
		left, err := sb.RecoverAround(ctx, snap)
		const kept = "/sandbox/notes.kept-20261127T184413Z.md"
		if err != nil || len(left) != 1 || left[0].Path != "/sandbox/notes.md" || left[0].Kept != kept {
			t.Fatalf("retried RecoverAround = %+v, %v; want notes.md left, kept as %s", left, err, kept)
		}
		if b, err := sb.Read(ctx, kept); err != nil || string(b) != "hand edit\n" {
			t.Errorf("%s = %q, %v; want the hand edit", kept, b, err)
		}
		if got := keptFiles(t, dir); len(got) != 1 {
			t.Errorf("kept files = %v; want one", got)
		}
		if err := sb.ForgetKept(ctx, snap, ""); err != nil { // the result recorded
			t.Fatal(err)
		}
		if left := reservedFiles(t, dir); left != nil {
			t.Errorf("private files left: %v", left)
		}
		for name, want := range map[string]string{"sub/a.txt": "a\n", "tool.md": "#!/bin/sh\n"} {
			if b, err := os.ReadFile(filepath.Join(dir, name)); err != nil || string(b) != want {
				t.Errorf("%s = %q, %v: not restored", name, b, err)
			}
		}
	})
}

// TestRecoverAroundKeepsAllOrNone: two files set aside are found edited
// (notes.md's, from the crash, and docs/new.md's); the second cannot be
// moved to a visible name, every name it could take being taken.
// RecoverAround fails, names it, and changes nothing: the first is moved
// back to its private name, where the next recovery finds it. Before,
// the first was left at its visible name, which no retry named.
func TestRecoverAroundKeepsAllOrNone(t *testing.T) {
	ctx := context.Background()
	eachWayKept(t, func(t *testing.T, dir string, sb *sandbox.Sandbox) {
		snap := crashAsideEdited(t, dir, sb, "hand edit\n")
		if err := os.WriteFile(filepath.Join(dir, "docs", sandbox.AsideName("new.md")), []byte("other edit\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for n := range 100 {
			if err := os.WriteFile(filepath.Join(dir, sandbox.KeptName("notes.md", keptAt, n)), []byte("taken\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		before := treeHash(t, dir)
		left, err := sb.RecoverAround(ctx, snap)
		if err == nil || !strings.Contains(err.Error(), sandbox.AsideName("notes.md")) || !strings.Contains(err.Error(), "taken") {
			t.Fatalf("RecoverAround = %+v, %v; want an error naming notes.md's hidden file and why", left, err)
		}
		if treeHash(t, dir) != before {
			t.Errorf("the failed RecoverAround changed the tree (%d kept files)", len(keptFiles(t, dir)))
		}
		os.Remove(filepath.Join(dir, sandbox.KeptName("notes.md", keptAt, 0)))
		left, err = sb.RecoverAround(ctx, snap)
		if err != nil || len(left) < 2 || left[0].Kept != "/sandbox/docs/new.kept-20261127T184413Z.md" ||
			left[1].Kept != "/sandbox/notes.kept-20261127T184413Z.md" {
			t.Fatalf("retried RecoverAround = %+v, %v; want both kept and named", left, err)
		}
	})
}

// TestKeptNameNoRoom: a path within a few bytes of MaxPathBytes leaves no
// room beside it for a kept name's stamp. KeptName then gives "" (no
// name), where it gave "file.kept-….md", a path over MaxPathBytes that
// no proposal could name; with room for the stamp and little else, the
// name passes.
func TestKeptNameNoRoom(t *testing.T) {
	room := sandbox.MaxPathBytes - len(sandbox.Prefix)
	dir := strings.Repeat(strings.Repeat("d", 200)+"/", 20) // 4020 bytes
	tag := len(".kept-20261127T184413Z")
	for _, c := range []struct {
		name   string
		stem   int // the room left for the stem, the folders' names filling the rest
		wantOK bool
	}{
		{"x.md", -1, false},
		{"x.md", 0, true},
		{"x.md", 2, true},
		{"a-long-name.md", 5, true},
		{"tool.sh", -3, false},
	} {
		ext := len(c.name) - strings.LastIndexByte(c.name, '.')
		if !sandbox.HasTextExt(c.name) {
			ext = 0
		}
		pad := room - len(dir) - 1 - tag - ext - c.stem
		rel := dir + strings.Repeat("e", pad) + "/" + c.name
		if len(rel) > room {
			rel = dir + strings.Repeat("e", pad-(len(rel)-room)) + "/" + c.name
		}
		if r, err := sandbox.Normalize(sandbox.Prefix + rel); err != nil || r != rel {
			t.Fatalf("the test's path %q…: %v", rel[len(dir):], err)
		}
		got := sandbox.KeptName(rel, keptAt, 0)
		if !c.wantOK {
			if got != "" {
				t.Errorf("KeptName(…%s, room %d) = …%q; want none", c.name, c.stem, got[len(dir):])
			}
			continue
		}
		if r, err := sandbox.Normalize(sandbox.Prefix + got); err != nil || r != got || !strings.Contains(got, ".kept-20261127T184413Z") {
			t.Errorf("KeptName(…%s, room %d) = …%q: %v", c.name, c.stem, got[min(len(dir), len(got)):], err)
		}
	}
}

// TestRecoverAroundNoRoomForKept: the edited file set aside is for a
// path whose folders leave no room for a kept name. RecoverAround fails,
// saying so and naming the hidden file, and changes nothing; before, it
// moved the file to a name past MaxPathBytes, which no proposal could
// read or remove.
func TestRecoverAroundNoRoomForKept(t *testing.T) {
	ctx := context.Background()
	dir := strings.Repeat(strings.Repeat("d", 200)+"/", 20)
	rel := dir + strings.Repeat("e", sandbox.MaxPathBytes-len(sandbox.Prefix)-len(dir)-len("/x.md")) + "/x.md"
	// Paths from the test's folder would pass PATH_MAX: the test works in it.
	t.Chdir(t.TempDir())
	if err := os.MkdirAll(filepath.Dir(rel), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(rel, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	const host = "."
	sb, err := sandbox.Open(host, sandbox.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Close()
	p := sandbox.Prefix + rel
	st := stage(t, sb, []sandbox.Change{sandbox.Write{Path: p, Content: []byte("new\n")}})
	crashIn(sb, st, "")
	// The private name, with its folder, passes PATH_MAX too: reached from
	// its folder.
	folder, err := os.OpenRoot(filepath.Dir(rel))
	if err != nil {
		t.Fatal(err)
	}
	defer folder.Close()
	if err := folder.WriteFile(sandbox.AsideName("x.md"), []byte("hand edit\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	left, err := sb.RecoverAround(ctx, st.Snapshot())
	if err == nil || !strings.Contains(err.Error(), "short enough") || !strings.Contains(err.Error(), sandbox.AsideName("x.md")) {
		t.Fatalf("RecoverAround = %+v, %v; want an error naming the hidden file, no name being short enough", left, err)
	}
	if b, err := folder.ReadFile(sandbox.AsideName("x.md")); err != nil || string(b) != "hand edit\n" {
		t.Errorf("the file set aside = %q, %v; want it left as it was", b, err)
	}
	if got := keptFiles(t, host); got != nil {
		t.Errorf("kept files = %v; want none", got)
	}
}

// TestRecoverAroundKeptNameTaken: the visible names a kept file would
// take are taken by a link to a file outside, a folder, a dangling link
// and a file: none is written over or through, and the file goes to the
// next free name.
func TestRecoverAroundKeptNameTaken(t *testing.T) {
	ctx := context.Background()
	eachWayKept(t, func(t *testing.T, dir string, sb *sandbox.Sandbox) {
		snap := crashAsideEdited(t, dir, sb, "hand edit\n")
		outside := filepath.Join(t.TempDir(), "outside.md")
		if err := os.WriteFile(outside, []byte("outside\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		name := func(n int) string { return filepath.Join(dir, sandbox.KeptName("notes.md", keptAt, n)) }
		if err := os.Symlink(outside, name(0)); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(name(1), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(dir, "nowhere.md"), name(2)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name(3), []byte("taken\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		left, err := sb.RecoverAround(ctx, snap)
		const kept = "/sandbox/notes.kept-20261127T184413Z-4.md"
		if err != nil || len(left) != 1 || left[0].Kept != kept {
			t.Fatalf("RecoverAround = %+v, %v; want notes.md left, kept as %s", left, err, kept)
		}
		if b, err := sb.Read(ctx, kept); err != nil || string(b) != "hand edit\n" {
			t.Errorf("%s = %q, %v; want the hand edit", kept, b, err)
		}
		if b, err := os.ReadFile(outside); err != nil || string(b) != "outside\n" {
			t.Errorf("the file outside = %q, %v; want it untouched", b, err)
		}
		for n, want := range map[int]os.FileMode{0: os.ModeSymlink, 1: os.ModeDir, 2: os.ModeSymlink} {
			if fi, err := os.Lstat(name(n)); err != nil || fi.Mode().Type() != want {
				t.Errorf("%s: %v, %v; want it left as it was", name(n), fi, err)
			}
		}
		if _, err := os.Lstat(filepath.Join(dir, "nowhere.md")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the dangling link's target was made: %v", err)
		}
		if b, err := os.ReadFile(name(3)); err != nil || string(b) != "taken\n" {
			t.Errorf("%s = %q, %v; want it untouched", name(3), b, err)
		}
	})
}

// TestRecoverAroundResultLost: RecoverAround moves the edited file set
// aside to a visible name and succeeds, but its caller never records
// what it returned (its database commit failed, or the process stopped).
// The next RecoverAround of the snapshot, after a start's Sweep and at a
// later time, must return what the first did: notes.md left as found,
// the edit named where it was moved, and nothing else changed. Before,
// it found nothing set aside, put notes.md back to its pre-image, where
// the first left it as found, and named no kept file. Once the result is
// recorded (ForgetKept), nothing private is left.
func TestRecoverAroundResultLost(t *testing.T) {
	ctx := context.Background()
	eachWayKept(t, func(t *testing.T, dir string, sb *sandbox.Sandbox) {
		snap := crashAsideEdited(t, dir, sb, "hand edit\n")
		first, err := sb.RecoverAround(ctx, snap)
		const kept = "/sandbox/notes.kept-20261127T184413Z.md"
		if err != nil || len(first) != 1 || first[0].Kept != kept {
			t.Fatalf("RecoverAround = %+v, %v; want notes.md left, kept as %s", first, err, kept)
		}
		after := treeHash(t, dir)
		if _, err := sb.Sweep(ctx); err != nil {
			t.Fatal(err)
		}
		sandbox.SetClock(sb, func() time.Time { return keptAt.Add(time.Hour) })
		again, err := sb.RecoverAround(ctx, snap)
		if err != nil || len(again) != 1 || !reflect.DeepEqual(again, first) {
			t.Fatalf("RecoverAround again = %+v, %v; want what the first returned, %+v", again, err, first)
		}
		if treeHash(t, dir) != after {
			t.Errorf("the second RecoverAround changed the tree (kept files: %v)", keptFiles(t, dir))
		}
		if b, err := sb.Read(ctx, "/sandbox/notes.md"); err != nil || first[0].Found.SHA256 != first[0].Post.SHA256 {
			t.Errorf("notes.md = %q, %v; want as found, the action's image", b, err)
		}
		if err := sb.ForgetKept(ctx, snap, ""); err != nil {
			t.Fatal(err)
		}
		if left := reservedFiles(t, dir); left != nil {
			t.Errorf("private files left: %v", left)
		}
		if err := sb.ForgetKept(ctx, snap, ""); err != nil {
			t.Errorf("ForgetKept with nothing to forget: %v", err)
		}
	})
}
