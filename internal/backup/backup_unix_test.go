//go:build unix

package backup_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/backup"
)

// An existing, empty output folder that other users may write is made
// 0700 before anything is copied into it, as a folder Run makes is: in a
// folder others can change, they could put a policy, a key or a database
// of their own in place of the copies, and a manifest listing them.
func TestRunNarrowsAnOpenOutputFolder(t *testing.T) {
	cfg := dataDir(t, 1)
	out := t.TempDir()
	if err := os.Chmod(out, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := backup.Run(context.Background(), cfg, out, opts()); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Errorf("the output folder is %04o after the backup, want 0700", perm)
	}
}

// A policy file (or agent.id) that turned into a FIFO is refused, not
// waited on: a plain open of a FIFO waits for a writer without end.
func TestRunFIFOSource(t *testing.T) {
	cfg := dataDir(t, 1)
	cfg.Policy = filepath.Join(t.TempDir(), "policy.cedar")
	if err := syscall.Mkfifo(cfg.Policy, 0o600); err != nil {
		t.Skip("no FIFO here:", err)
	}
	out := filepath.Join(t.TempDir(), "b")
	done := make(chan error, 1)
	go func() {
		_, err := backup.Run(context.Background(), cfg, out, opts())
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "regular file") {
			t.Fatalf("err %v, want a refusal of the FIFO", err)
		}
	case <-time.After(30 * time.Second):
		// Open the FIFO for writing so that the backup's open returns.
		if f, err := os.OpenFile(cfg.Policy, os.O_WRONLY, 0); err == nil {
			f.Close()
		}
		<-done
		t.Fatal("the backup waited on the FIFO")
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("the output folder exists: %v", err)
	}
}
