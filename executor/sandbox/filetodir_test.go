package sandbox_test

import (
	"context"
	"os"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// TestPromoteFileReplacedByFolder stages a file deleted, a folder made at
// its name and a file written in that folder: Stage accepts it, so
// Promote must carry it out (the new file's path was absent when staged,
// below a file, and still is), Rollback must put the file back, and a
// Recover of the same change afterwards finds every path in its
// pre-image and does nothing.
func TestPromoteFileReplacedByFolder(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, map[string]string{"x.md": "x\n"})
	st := stage(t, sb, []sandbox.Change{
		sandbox.Delete{Path: "/sandbox/x.md"},
		sandbox.Mkdir{Path: "/sandbox/x.md"},
		sandbox.Write{Path: "/sandbox/x.md/y.md", Content: []byte("y\n")},
	})
	snap, err := sb.Promote(ctx, st)
	if err != nil {
		t.Fatalf("Promote = %v", err)
	}
	if b, err := os.ReadFile(hostPath(dir, "/sandbox/x.md/y.md")); err != nil || string(b) != "y\n" {
		t.Fatalf("x.md/y.md = %q, %v", b, err)
	}
	if err := sb.Rollback(ctx, snap); err != nil {
		t.Fatalf("Rollback = %v", err)
	}
	if b, err := os.ReadFile(hostPath(dir, "/sandbox/x.md")); err != nil || string(b) != "x\n" {
		t.Fatalf("x.md = %q, %v after the rollback", b, err)
	}
	if err := sb.Recover(ctx, snap); err != nil {
		t.Fatalf("Recover after the rollback = %v; want nothing to do", err)
	}
}
