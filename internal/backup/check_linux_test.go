package backup_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/snapnode/snapnode/internal/backup"
)

// A backup on read-only media (here a read-only bind mount of it) is
// checked and restored as any other: the shared lock taken on its folder
// needs no write.
func TestCheckReadOnlyBackup(t *testing.T) {
	cfg, out := sealedBackup(t)
	ro := filepath.Join(t.TempDir(), "ro")
	if err := os.Mkdir(ro, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount(out, ro, "", syscall.MS_BIND, ""); err != nil {
		t.Skipf("cannot bind-mount: %v", err)
	}
	t.Cleanup(func() { syscall.Unmount(ro, syscall.MNT_DETACH) })
	if err := syscall.Mount("", ro, "", syscall.MS_BIND|syscall.MS_REMOUNT|syscall.MS_RDONLY, ""); err != nil {
		t.Skipf("cannot make the bind mount read-only: %v", err)
	}
	if err := os.WriteFile(filepath.Join(ro, "probe"), nil, 0o600); err == nil {
		t.Fatal("the mount is not read-only")
	}
	ctx := context.Background()
	if _, err := backup.Check(ctx, cfg, ro); err != nil {
		t.Fatalf("check: %v", err)
	}
	if _, err := backup.Restore(ctx, cfg, ro, backup.RestoreOptions{}); err != nil {
		t.Fatalf("restore: %v", err)
	}
}
