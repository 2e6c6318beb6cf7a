//go:build unix

package identity_test

import (
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/snapnode/snapnode/identity"
)

// A key path that is not a regular file (a FIFO, which nothing writes to)
// is refused at once: before, opening it waited for a writer, and the node
// hung at its start without a word.
func TestLoadKeyFileRefusesAFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("no FIFO here: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := identity.LoadKeyFile(path)
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("a FIFO was loaded as a key")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("loading a FIFO as a key file did not return")
	}
}
