//go:build unix

package backup_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snapnode/snapnode/internal/backup"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/flock"
	"github.com/snapnode/snapnode/internal/testutil"
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

// checkKillEnv gives TestCheckKilledChild the data folder, the policy
// file and the backup folder to check, separated by newlines.
const checkKillEnv = "SNAPNODE_TEST_CHECK_KILL"

// TestCheckKilledChild is the child of TestCheckKilledLeavesNoCopy: it
// checks a backup, says "copied" once the copies of tasks.db and of the
// record of the last seal are made, and waits to be killed.
func TestCheckKilledChild(t *testing.T) {
	spec := os.Getenv(checkKillEnv)
	if spec == "" {
		t.Skip("the child of TestCheckKilledLeavesNoCopy")
	}
	f := strings.Split(spec, "\n")
	cfg := config.Default()
	cfg.DataDir, cfg.Policy = f[0], f[1]
	_, err := backup.CheckWithStep(context.Background(), cfg, f[2], func(step string) {
		if step == "copied" {
			fmt.Println("copied")
			select {} // until SIGKILL
		}
	})
	t.Fatalf("the check ended (%v) before it made its copies", err)
}

// A check killed (SIGKILL) while it verifies its copies of tasks.db and
// of the record of the last seal, which hold the node's whole history,
// leaves none in the temporary folder; the copies it leaves are in a
// private folder (0700) of the data folder, and the next check removes
// them.
func TestCheckKilledLeavesNoCopy(t *testing.T) {
	cfg, out := sealedBackup(t)
	tmp := t.TempDir()
	before := files(t, cfg.DataDir)
	child := testutil.StartChild(t, "TestCheckKilledChild",
		checkKillEnv+"="+cfg.DataDir+"\n"+cfg.Policy+"\n"+out, "TMPDIR="+tmp)
	line, err := child.Lines.ReadString('\n')
	if line != "copied\n" {
		t.Fatalf("the child said %q (%v), not that it made its copies", line, err)
	}
	child.Kill(t)
	child.WaitKilled(t)
	if left := files(t, tmp); len(left) > 0 {
		t.Errorf("the killed check left in the temporary folder: %v", left)
	}
	for _, e := range entries(t, cfg.DataDir) {
		if slices.Contains(before, e.Name()) {
			continue
		}
		if fi, err := e.Info(); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o700 {
			t.Errorf("the killed check left %s in the data folder, not a private folder (%v, %v)", e.Name(), fi.Mode(), err)
		}
	}

	t.Setenv("TMPDIR", tmp)
	if _, err := backup.Check(context.Background(), cfg, out); err != nil {
		t.Fatal(err)
	}
	if after := files(t, cfg.DataDir); !slices.Equal(before, after) {
		t.Errorf("after the next check the data folder holds %v, want %v as before the killed check", after, before)
	}
	if left := files(t, tmp); len(left) > 0 {
		t.Errorf("the next check left in the temporary folder: %v", left)
	}
}

// files lists the paths below dir, folders included.
func files(t *testing.T, dir string) []string {
	t.Helper()
	var l []string
	err := filepath.WalkDir(dir, func(path string, _ fs.DirEntry, err error) error {
		if path != dir {
			l = append(l, path[len(dir)+1:])
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func entries(t *testing.T, dir string) []fs.DirEntry {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	return es
}

// A check removes from the data folder only the folders killed checks
// left: not a file or a symbolic link named as they are (nor what the
// link names), nor the folder of a check still running (which holds its
// lock: here the test holds it).
func TestCheckRemovesOnlyLeftovers(t *testing.T) {
	if !flock.Supported {
		t.Skip("no flock on this system")
	}
	cfg, out := sealedBackup(t)
	at := func(name string) string { return filepath.Join(cfg.DataDir, name) }
	outside := t.TempDir()
	if err := os.WriteFile(filepath.Join(outside, "keep"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, at(".backup-check-link")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(at(".backup-check-file"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{".backup-check-held", ".backup-check-left"} {
		if err := os.Mkdir(at(d), 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(at(d), "tasks.db"), []byte("copy"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	held, err := os.Open(at(".backup-check-held"))
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if err := flock.TryExclusive(held); err != nil {
		t.Skipf("no lock on the data folder's file system: %v", err)
	}

	if _, err := backup.Check(context.Background(), cfg, out); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{at(".backup-check-link"), at(".backup-check-file"), filepath.Join(at(".backup-check-held"), "tasks.db"), filepath.Join(outside, "keep")} {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("the check removed %s: %v", p, err)
		}
	}
	if _, err := os.Lstat(at(".backup-check-left")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the check left the folder a killed check left: %v", err)
	}
}

// Checks run at once on one data folder each pass: none takes another's
// private folder for a leftover and removes it. None stays once they end.
func TestChecksAtOnce(t *testing.T) {
	cfg, out := sealedBackup(t)
	before := files(t, cfg.DataDir)
	errs := make(chan error, 8)
	for range cap(errs) {
		go func() {
			_, err := backup.Check(context.Background(), cfg, out)
			errs <- err
		}()
	}
	for range cap(errs) {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if after := files(t, cfg.DataDir); !slices.Equal(before, after) {
		t.Errorf("after the checks the data folder holds %v, want %v", after, before)
	}
}
