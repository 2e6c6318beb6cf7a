package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// TestPreparePromote: Prepare writes the new contents of the composite's
// files beside their targets and changes nothing else (a write into the
// directory the composite creates waits for the promotion);
// PromotePrepared then gives the same tree as Promote, and Discard leaves
// no temporary file.
func TestPreparePromote(t *testing.T) {
	ctx := context.Background()
	want, plain := newSandbox(t, sandbox.Limits{}, stageFixture)
	st, err := plain.Stage(ctx, composite)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Promote(ctx, st); err != nil {
		t.Fatal(err)
	}

	dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
	p := prepare(t, sb, composite)
	defer p.Discard()
	// notes.md rewritten, and the renamed file's new name in sub/.
	temps := reservedFiles(t, dir)
	if len(temps) != 2 || filepath.Dir(temps[0]) != dir || filepath.Dir(temps[1]) != filepath.Join(dir, "sub") {
		t.Fatalf("temporary files after Prepare: %v, want one beside notes.md, one in sub/", temps)
	}
	if b, err := os.ReadFile(temps[0]); err != nil || string(b) != "line one\nchanged\n" {
		t.Fatalf("the prepared file holds %q, %v", b, err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.md")); string(b) != stageFixture["notes.md"] {
		t.Fatalf("Prepare changed notes.md: %q", b)
	}
	if _, err := os.Stat(filepath.Join(dir, "docs")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Prepare created docs/: %v", err)
	}
	if _, err := sb.PromotePrepared(ctx, p); err != nil {
		t.Fatal(err)
	}
	if left := reservedFiles(t, dir); left != nil {
		t.Fatalf("temporary files left after the promotion: %v", left)
	}
	p.Discard()
	if treeHash(t, dir) != treeHash(t, want) {
		t.Fatal("PromotePrepared gave another tree than Promote")
	}
}

// TestPrepareDiscard: a prepared promotion refused because a target
// changed since staging applies nothing, and Discard removes what Prepare
// wrote.
func TestPrepareDiscard(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
	p := prepare(t, sb, composite)
	if err := os.WriteFile(filepath.Join(dir, "notes.md"), []byte("edited by hand\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := treeHash(t, dir)
	if _, err := sb.PromotePrepared(ctx, p); !errors.Is(err, sandbox.ErrChanged) {
		t.Fatalf("PromotePrepared = %v, want ErrChanged", err)
	}
	if treeHash(t, dir) != before {
		t.Fatal("a refused promotion changed the tree")
	}
	p.Discard()
	if left := reservedFiles(t, dir); left != nil {
		t.Fatalf("temporary files left after Discard: %v", left)
	}
}

// TestPrepareFailsBeforeRename: a prepared write that fails just before
// its rename undoes the promotion's earlier steps, as a write made at
// promotion does; Discard removes the temporary files left.
func TestPrepareFailsBeforeRename(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
	before := treeHash(t, dir)
	sandbox.SetTestHooks(sb, nil, func(path string) error {
		if path == "/sandbox/notes.md" {
			return errInjected
		}
		return nil
	})
	p := prepare(t, sb, composite)
	if _, err := sb.PromotePrepared(ctx, p); !errors.Is(err, errInjected) || errors.Is(err, sandbox.ErrIncomplete) {
		t.Fatalf("PromotePrepared = %v", err)
	}
	p.Discard()
	if left := reservedFiles(t, dir); left != nil {
		t.Fatalf("temporary files left: %v", left)
	}
	if treeHash(t, dir) != before {
		t.Fatal("a failed promotion left changes")
	}
}

// TestPrepareNotCounted: the workspace's count (what the byte and file
// limits are checked against) leaves out what Prepare wrote ahead, so the
// promotion that renames it counts its content once.
func TestPrepareNotCounted(t *testing.T) {
	ctx := context.Background()
	_, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
	st, err := sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/new.md", Content: []byte("twelve bytes")}})
	if err != nil {
		t.Fatal(err)
	}
	before, err := sb.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	p, err := sb.Prepare(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Discard()
	if got, err := sb.Counts(ctx); err != nil || got != before {
		t.Fatalf("Counts after Prepare = %+v, %v; want %+v", got, err, before)
	}
	if _, err := sb.PromotePrepared(ctx, p); err != nil {
		t.Fatal(err)
	}
	want := sandbox.Counts{Bytes: before.Bytes + 12, Files: before.Files + 1, Dirs: before.Dirs}
	if got, err := sb.Counts(ctx); err != nil || got != want {
		t.Fatalf("Counts after the promotion = %+v, %v; want %+v", got, err, want)
	}
}

// prepare stages changes on sb and prepares their promotion.
func prepare(t *testing.T, sb *sandbox.Sandbox, changes []sandbox.Change) *sandbox.Prepared {
	t.Helper()
	ctx := context.Background()
	st, err := sb.Stage(ctx, changes)
	if err != nil {
		t.Fatal(err)
	}
	p, err := sb.Prepare(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	return p
}
