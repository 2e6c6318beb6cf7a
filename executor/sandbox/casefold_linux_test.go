package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// A file system mounted inside the workspace (a FAT stick, a share) may
// fold names where the workspace's own does not, which the probe at Open
// did not see: names below it are checked. It needs the right to mount a
// tmpfs, which stands for the other file system; the look-up that folds
// is the tests' (SetFoldingLookup).
func TestMountInsideIsChecked(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, map[string]string{"usb/": ""})
	mnt := filepath.Join(dir, "usb")
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size=1m"); err != nil {
		t.Skipf("cannot mount a tmpfs: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(mnt, syscall.MNT_DETACH) })
	populate(t, mnt, map[string]string{"secrets/key.txt": "the key", "notes/a.md": "a"})
	if sandbox.Folds(sb) {
		t.Skip("the workspace's own file system folds names: the mount adds nothing")
	}
	sandbox.SetFoldingLookup(sb)

	b, err := sb.Read(ctx, "/sandbox/usb/SECRETS/key.txt")
	if !errors.Is(err, sandbox.ErrSpelling) {
		t.Errorf("read /sandbox/usb/SECRETS/key.txt: %q, %v; want ErrSpelling", b, err)
	}
	if b, err := sb.Read(ctx, "/sandbox/usb/notes/a.md"); err != nil || string(b) != "a" {
		t.Errorf("read /sandbox/usb/notes/a.md: %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(mnt, "secrets", "key.txt")); err != nil {
		t.Fatal(err)
	}
}
