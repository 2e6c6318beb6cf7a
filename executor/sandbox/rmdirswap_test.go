package sandbox_test

import (
	"context"
	"errors"
	"os"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// TestRollbackRmdirLeavesWhatWasSwappedIn rolls back the creation of a
// directory while another process, between the sandbox's look at the
// directory and its removal, puts a file or a symbolic link at its name
// (it removed the empty directory and wrote there). The rollback must not
// remove what it never checked: the file stays, with its content, the
// link stays, and the rollback fails naming the path.
func TestRollbackRmdirLeavesWhatWasSwappedIn(t *testing.T) {
	for _, what := range []string{"file", "symlink"} {
		t.Run(what, func(t *testing.T) {
			ctx := context.Background()
			dir, sb := newSandbox(t, sandbox.Limits{}, map[string]string{"keep.md": "keep\n"})
			st := stage(t, sb, []sandbox.Change{sandbox.Mkdir{Path: "/sandbox/made"}})
			snap, err := sb.Promote(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			host := hostPath(dir, "/sandbox/made")
			swapped := false
			sandbox.SetSwapHook(sb, func(step, path string) error {
				if step != "rmdir" || path != "/sandbox/made" || swapped {
					return nil
				}
				swapped = true
				if err := os.Remove(host); err != nil {
					t.Fatal(err)
				}
				if what == "file" {
					return os.WriteFile(host, []byte("precious\n"), 0o644)
				}
				return os.Symlink("keep.md", host)
			})
			err = sb.Rollback(ctx, snap)
			if !swapped {
				t.Fatal("the rollback never reached the removal of the directory")
			}
			var oe *sandbox.OpError
			if !errors.Is(err, sandbox.ErrDiverged) || !errors.As(err, &oe) || oe.Path != "/sandbox/made" {
				t.Errorf("Rollback = %v; want ErrDiverged naming /sandbox/made", err)
			}
			fi, lerr := os.Lstat(host)
			if lerr != nil {
				t.Fatalf("the %s put at /sandbox/made was removed by the rollback: %v", what, lerr)
			}
			switch what {
			case "file":
				if b, err := os.ReadFile(host); err != nil || string(b) != "precious\n" {
					t.Fatalf("made = %q, %v; want the file put there", b, err)
				}
			case "symlink":
				if fi.Mode()&os.ModeSymlink == 0 {
					t.Fatalf("made is %v; want the link put there", fi.Mode())
				}
			}
		})
	}
}
