package syncdir_test

import (
	"errors"
	"io/fs"
	"path/filepath"
	"testing"

	"github.com/snapnode/snapnode/internal/syncdir"
)

// A folder is synced; a missing one is an error that says so.
func TestSync(t *testing.T) {
	dir := t.TempDir()
	if err := syncdir.Sync(dir); err != nil {
		t.Fatalf("sync %s: %v", dir, err)
	}
	if err := syncdir.Sync(filepath.Join(dir, "gone")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("sync of a missing folder: %v, want fs.ErrNotExist", err)
	}
}
