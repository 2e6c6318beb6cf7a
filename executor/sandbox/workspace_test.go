package sandbox_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// The workspace folder deleted under a running sandbox: every operation
// fails with ErrNoWorkspace naming the folder (not "file not found", and
// no write lands in the deleted folder); made again, the folder is picked
// up at the next operation, without reopening the sandbox.
func TestWorkspaceDeletedAndRecreated(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, map[string]string{"a.txt": "old\n"})
	if _, err := sb.Read(ctx, "/sandbox/a.txt"); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	missing := func(what string, err error) {
		t.Helper()
		var we *sandbox.WorkspaceError
		if !errors.Is(err, sandbox.ErrNoWorkspace) || !errors.As(err, &we) || we.Dir != dir ||
			errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), dir) {
			t.Fatalf("%s with the folder deleted: %v, want ErrNoWorkspace naming %s", what, err, dir)
		}
	}
	_, err := sb.Read(ctx, "/sandbox/a.txt")
	missing("Read", err)
	_, err = sb.Stat(ctx, "/sandbox/a.txt")
	missing("Stat", err)
	_, err = sb.List(ctx, "/sandbox/")
	missing("List", err)
	_, err = sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/b.txt", Content: []byte("lost?\n")}})
	missing("Stage", err)

	// Made again, with other content: the sandbox sees the new folder and
	// writes into it.
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	populate(t, dir, map[string]string{"a.txt": "new\n"})
	if b, err := sb.Read(ctx, "/sandbox/a.txt"); err != nil || string(b) != "new\n" {
		t.Fatalf("Read after the folder was made again: %q, %v", b, err)
	}
	st, err := sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/b.txt", Content: []byte("kept\n")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Promote(ctx, st); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "b.txt")); err != nil || string(b) != "kept\n" {
		t.Fatalf("the write is not in the new folder: %q, %v", b, err)
	}
	c, err := sb.Counts(ctx)
	if err != nil || c.Files != 2 || c.Bytes != int64(len("new\nkept\n")) {
		t.Fatalf("counts of the new folder: %+v, %v", c, err)
	}
}

// A file where the workspace folder was is not a workspace either.
func TestWorkspaceReplacedByAFile(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, map[string]string{"a.txt": "old\n"})
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dir, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Read(ctx, "/sandbox/a.txt"); !errors.Is(err, sandbox.ErrNoWorkspace) || !strings.Contains(err.Error(), dir) {
		t.Fatalf("Read with a file for the folder: %v, want ErrNoWorkspace naming %s", err, dir)
	}
}

// The workspace folder replaced by a symbolic link to another folder (by
// whoever can write beside it, once the folder was deleted): the sandbox
// does not follow it there. Nothing of the other folder is read, listed
// or written; every operation fails with ErrNoWorkspace until a folder is
// there again. A sandbox opened on a symbolic link (the operator's own
// setting) still follows that one.
func TestWorkspaceReplacedByASymlink(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, map[string]string{"a.txt": "old\n"})
	outside := t.TempDir()
	populate(t, outside, map[string]string{"secret.txt": "SECRET\n"})
	before := treeHash(t, outside)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, dir); err != nil {
		t.Fatal(err)
	}
	refused := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, sandbox.ErrNoWorkspace) || !strings.Contains(err.Error(), dir) {
			t.Fatalf("%s with a symbolic link for the folder: %v, want ErrNoWorkspace naming %s", what, err, dir)
		}
	}
	b, err := sb.Read(ctx, "/sandbox/secret.txt")
	refused("Read", err)
	if len(b) != 0 {
		t.Fatalf("Read returned %q from the folder the link names", b)
	}
	_, err = sb.List(ctx, "/sandbox/")
	refused("List", err)
	_, err = sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/new.txt", Content: []byte("landed?\n")}})
	refused("Stage", err)
	if after := treeHash(t, outside); after != before {
		t.Fatal("the folder the link names changed")
	}

	// Opened on a link, the sandbox works in the folder it names.
	real := filepath.Join(t.TempDir(), "real")
	populate(t, real, map[string]string{"r.txt": "real\n"})
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	lsb, err := sandbox.Open(link, sandbox.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer lsb.Close()
	if b, err := lsb.Read(ctx, "/sandbox/r.txt"); err != nil || string(b) != "real\n" {
		t.Fatalf("Read in a sandbox opened on a link: %q, %v", b, err)
	}
}
