package flock_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapnode/snapnode/internal/flock"
)

// Two open files of one path: an exclusive lock excludes the other's
// exclusive and shared ones until its file is closed; shared locks share.
func TestLocksExclude(t *testing.T) {
	if !flock.Supported {
		t.Skip("no flock on this system")
	}
	path := filepath.Join(t.TempDir(), "lock")
	open := func() *os.File {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	a, b := open(), open()
	if err := flock.TryExclusive(a); err != nil {
		t.Fatalf("first exclusive lock: %v", err)
	}
	if err := flock.TryExclusive(b); !errors.Is(err, flock.ErrHeld) {
		t.Fatalf("second exclusive lock: %v, want ErrHeld", err)
	}
	if err := flock.TryShared(b); !errors.Is(err, flock.ErrHeld) {
		t.Fatalf("shared lock beside an exclusive one: %v, want ErrHeld", err)
	}
	a.Close()
	if err := flock.TryShared(b); err != nil {
		t.Fatalf("shared lock once the exclusive one's file closed: %v", err)
	}
	if err := flock.TryShared(open()); err != nil {
		t.Fatalf("a second shared lock: %v", err)
	}
}
