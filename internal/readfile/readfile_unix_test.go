//go:build unix

package readfile_test

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/snapnode/snapnode/internal/readfile"
)

// A FIFO is refused at once (no writer is waited for), a file over the
// bound with ErrTooLarge, a file at the bound is read whole, and a
// symbolic link is followed.
func TestRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	if _, err := readfile.Regular(fifo, 10); err == nil || !strings.Contains(err.Error(), "want a regular file") {
		t.Errorf("FIFO: %v", err)
	}
	if _, err := readfile.Regular(dir, 10); err == nil || !strings.Contains(err.Error(), "want a regular file") {
		t.Errorf("folder: %v", err)
	}
	big := filepath.Join(dir, "big")
	if err := os.WriteFile(big, []byte("0123456789x"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readfile.Regular(big, 10); !errors.Is(err, readfile.ErrTooLarge) || !strings.Contains(err.Error(), big) {
		t.Errorf("over the bound: %v", err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(big, link); err != nil {
		t.Fatal(err)
	}
	if b, err := readfile.Regular(link, 11); err != nil || string(b) != "0123456789x" {
		t.Errorf("at the bound, through a link: %q %v", b, err)
	}
}
