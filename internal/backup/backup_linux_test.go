package backup_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/snapnode/snapnode/internal/backup"
)

// A disk that fills up at any point of a backup leaves nothing behind:
// not the copies, not the write-ahead log and shared memory SQLite makes
// when it opens the copy to verify it (which it cannot fold back into the
// copy on a full disk), so that the same command run again once there is
// room is not refused for a folder that is not empty. A small tmpfs
// stands for the full disk, one per size from nothing until the backup
// fits; it needs the right to mount one.
func TestRunDiskFull(t *testing.T) {
	cfg := dataDir(t, 200)
	cfg.Policy = filepath.Join(t.TempDir(), "mine.cedar")
	if err := os.WriteFile(cfg.Policy, make([]byte, 9000), 0o600); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for kb := 4; ; kb += 4 {
		if kb > 4096 {
			t.Fatal("no backup fits in 4 MiB")
		}
		mnt := t.TempDir()
		if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, fmt.Sprintf("size=%dk,mode=0700", kb)); err != nil {
			t.Skipf("cannot mount a tmpfs: %v", err)
		}
		out := filepath.Join(mnt, "backup")
		_, err := backup.Run(context.Background(), cfg, out, opts())
		var left []string
		filepath.WalkDir(mnt, func(path string, _ os.DirEntry, err error) error {
			if path != mnt {
				left = append(left, path[len(mnt):])
			}
			return err
		})
		if uerr := syscall.Unmount(mnt, syscall.MNT_DETACH); uerr != nil {
			t.Fatal(uerr)
		}
		if err == nil {
			t.Logf("the backup fits in %d KiB; it failed in %d smaller ones", kb, failed)
			break
		}
		failed++
		if len(left) > 0 {
			t.Errorf("%d KiB: %v; left behind: %v", kb, err, left)
		}
	}
	if failed == 0 {
		t.Error("the backup never ran out of room")
	}
}
