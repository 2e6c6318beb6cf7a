package backup_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
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

// A disk that fills up during a restore stops it before anything
// changed, its temporary files removed, or lets it end: never midway.
// The data folder is a small tmpfs, one per size from nothing until the
// restore fits, holding the node's files as they were.
func TestRestoreDiskFull(t *testing.T) {
	cfg, out := sealedBackup(t)
	changeAfterBackup(t, cfg)
	old := filepath.Join(t.TempDir(), "old")
	if err := os.CopyFS(old, os.DirFS(cfg.DataDir)); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(cfg.DataDir); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(cfg.DataDir, 0o700); err != nil {
		t.Fatal(err)
	}
	failed := 0
	for kb := 4; ; kb += 4 {
		if kb > 8192 {
			t.Fatal("no restore fits in 8 MiB")
		}
		if err := syscall.Mount("tmpfs", cfg.DataDir, "tmpfs", 0, fmt.Sprintf("size=%dk,mode=0700", kb)); err != nil {
			t.Skipf("cannot mount a tmpfs: %v", err)
		}
		if err := os.CopyFS(cfg.DataDir, os.DirFS(old)); err != nil {
			// The old files do not fit yet.
			if uerr := syscall.Unmount(cfg.DataDir, syscall.MNT_DETACH); uerr != nil {
				t.Fatal(uerr)
			}
			continue
		}
		before := contents(t, cfg.DataDir)
		_, err := backup.Restore(context.Background(), cfg, out, backup.RestoreOptions{})
		after := contents(t, cfg.DataDir)
		if uerr := syscall.Unmount(cfg.DataDir, syscall.MNT_DETACH); uerr != nil {
			t.Fatal(uerr)
		}
		if err == nil {
			t.Logf("the restore fits in %d KiB; it failed in %d smaller ones", kb, failed)
			break
		}
		failed++
		if !slices.Equal(before, after) {
			t.Errorf("%d KiB: %v; the data folder changed:\n%v\n%v", kb, err, before, after)
		}
	}
	if failed == 0 {
		t.Error("the restore never ran out of room")
	}
}

// contents lists the files in dir, each with its SHA-256.
func contents(t *testing.T, dir string) []string {
	t.Helper()
	var l []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		l = append(l, path+" "+hexSum(b))
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}
