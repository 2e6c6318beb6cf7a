package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// TestRecoverAroundAFolderMadeAFile: a promotion made the folder new and
// new/x.txt in it; something else then put a file in new's place. The
// recovery leaves new as found, new/x.txt being gone with its folder, and
// puts a.txt back: before, new/x.txt's parent not being a folder
// (ErrNotDir) failed the whole recovery, which stops the node's start.
func TestRecoverAroundAFolderMadeAFile(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, map[string]string{"a.txt": "a\n"})
	st, err := sb.Stage(ctx, []sandbox.Change{
		sandbox.Write{Path: "/sandbox/a.txt", Content: []byte("a after\n")},
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
	if err := os.RemoveAll(filepath.Join(dir, "new")); err != nil {
		t.Fatal(err)
	}
	populate(t, dir, map[string]string{"new": "someone's\n"})
	left, err := sb.RecoverAround(ctx, snap)
	if err != nil {
		t.Fatalf("RecoverAround = %v; want new left, a.txt put back", err)
	}
	if len(left) != 1 || left[0].Path != "/sandbox/new" {
		t.Fatalf("left %+v; want new alone", left)
	}
	for p, want := range map[string]string{"a.txt": "a\n", "new": "someone's\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, p)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
}

// TestRecoverAroundARespelledFile: on a file system that ignores case, a
// file the promotion wrote was renamed since to another spelling. The
// recovery leaves it as found and puts a.txt back: before, the spelling
// check (ErrSpelling) failed the whole recovery.
func TestRecoverAroundARespelledFile(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, map[string]string{"a.txt": "a\n"})
	sandbox.SetCaseInsensitive(sb)
	st, err := sb.Stage(ctx, []sandbox.Change{
		sandbox.Write{Path: "/sandbox/a.txt", Content: []byte("a after\n")},
		sandbox.Write{Path: "/sandbox/new.txt", Content: []byte("n\n")},
	})
	if err != nil {
		t.Fatal(err)
	}
	snap := st.Snapshot()
	if _, err := sb.Promote(ctx, st); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "new.txt"), filepath.Join(dir, "New.txt")); err != nil {
		t.Fatal(err)
	}
	left, err := sb.RecoverAround(ctx, snap)
	if err != nil {
		t.Fatalf("RecoverAround = %v; want new.txt left, a.txt put back", err)
	}
	if len(left) != 1 || left[0].Path != "/sandbox/new.txt" || left[0].Note == "" {
		t.Fatalf("left %+v; want new.txt, with a note", left)
	}
	for p, want := range map[string]string{"a.txt": "a\n", "New.txt": "n\n"} {
		if b, err := os.ReadFile(filepath.Join(dir, p)); err != nil || string(b) != want {
			t.Errorf("%s = %q, %v; want %q", p, b, err, want)
		}
	}
}
