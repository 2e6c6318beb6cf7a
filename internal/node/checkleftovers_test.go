package node_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/flock"
)

// A node's start removes from its data folder the private folders a
// killed `snapnode backup --check` left (.backup-check-*, each holding a
// copy of the node's whole history), once the folder is its own: not
// one a check still running holds locked, nor a file of such a name.
func TestStartRemovesCheckLeftovers(t *testing.T) {
	if !flock.Supported {
		t.Skip("no flock on this system")
	}
	var dataDir string
	var held *os.File
	startNode(t, func(c *config.Config) {
		dataDir = c.DataDir
		if err := os.Mkdir(dataDir, 0o700); err != nil {
			t.Fatal(err)
		}
		for _, d := range []string{".backup-check-left", ".backup-check-held"} {
			if err := os.Mkdir(filepath.Join(dataDir, d), 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(dataDir, d, "tasks.db"), []byte("copy"), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dataDir, ".backup-check-file"), []byte("mine"), 0o600); err != nil {
			t.Fatal(err)
		}
		var err error
		if held, err = os.Open(filepath.Join(dataDir, ".backup-check-held")); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { held.Close() })
		if err := flock.TryExclusive(held); err != nil {
			t.Skipf("no lock on the data folder's file system: %v", err)
		}
	})
	if _, err := os.Lstat(filepath.Join(dataDir, ".backup-check-left")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the node started with the folder a killed check left still there: %v", err)
	}
	for _, p := range []string{filepath.Join(dataDir, ".backup-check-held", "tasks.db"), filepath.Join(dataDir, ".backup-check-file")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("the node's start removed %s: %v", p, err)
		}
	}
}
