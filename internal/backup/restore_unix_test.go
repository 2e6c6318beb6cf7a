//go:build unix

package backup_test

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/snapnode/snapnode/internal/backup"
)

// A restore run as root (sudo, or a container's root) gives each file
// the owner of the file it replaces, or of its folder when there was
// none, and a policy or settings file the permissions the old one had
// (never open to writes by others): the node's user can open them all
// as before.
func TestRestoreAsRootKeepsOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root, to give files to another user")
	}
	const uid, gid = 65532, 65532
	cfg, out := sealedBackup(t)
	changeAfterBackup(t, cfg)
	for _, p := range []string{cfg.DataDir, filepath.Join(cfg.DataDir, "tasks.db"), filepath.Join(cfg.DataDir, "tasks.db-wal"), cfg.KeyPath(), cfg.SealRecordPath(), cfg.Policy} {
		if err := os.Lchown(p, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(cfg.Policy, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(cfg.KeyPath(), 0o600); err != nil {
		t.Fatal(err)
	}
	// The key removed: a new file, given the data folder's owner.
	if err := os.Remove(cfg.KeyPath()); err != nil {
		t.Fatal(err)
	}
	r, err := backup.Restore(context.Background(), cfg, out, restoreOpts())
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range r.Manifest.Files {
		fi, err := os.Stat(f.Source)
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		if st.Uid != uid || st.Gid != gid {
			t.Errorf("%s is %d:%d, want %d:%d", f.Source, st.Uid, st.Gid, uid, gid)
		}
		want := os.FileMode(0o600)
		if f.Kind == backup.KindPolicy {
			want = 0o644
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s is %v, want %v", f.Source, fi.Mode().Perm(), want)
		}
	}
}
