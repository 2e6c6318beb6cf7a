package sandbox_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden")

// newSandbox makes a sandbox folder holding files (a name ending in "/" is
// a directory) and opens it with lim.
func newSandbox(t testing.TB, lim sandbox.Limits, files map[string]string) (string, *sandbox.Sandbox) {
	t.Helper()
	dir := t.TempDir()
	populate(t, dir, files)
	sb, err := sandbox.Open(dir, lim)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	return dir, sb
}

// stage stages changes in sb, failing the test on error.
func stage(t testing.TB, sb *sandbox.Sandbox, changes []sandbox.Change) *sandbox.Staged {
	t.Helper()
	st, err := sb.Stage(context.Background(), changes)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// populate writes files into dir with fixed modes (0644 files, 0755
// directories), whatever the umask.
func populate(t testing.TB, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// reservedFiles lists the sandbox's temporary files left anywhere in dir
// (its lock file, which stays, left out).
func reservedFiles(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), sandbox.ReservedPrefix) && p != filepath.Join(dir, sandbox.LockFile) && p != filepath.Join(dir, sandbox.CountFile) {
			out = append(out, p)
		}
		return err
	})
	return out
}

// treeHash hashes names, kinds, modes, link targets and contents of a tree.
func treeHash(t testing.TB, dir string) string {
	t.Helper()
	h := sha256.New()
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == sandbox.CountFile {
			return nil // the sandbox's count, which every change writes
		}
		fmt.Fprintf(h, "%q %v\n", rel, fi.Mode())
		switch {
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%x\n", sha256.Sum256(b))
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "-> %q\n", target)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}
