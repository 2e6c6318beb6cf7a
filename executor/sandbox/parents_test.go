package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// TestWriteParents stages a Write with Parents set: each missing folder
// above the file is a touched path of its own (pre absent, post a
// directory), the promotion creates them, and the rollback removes them
// with the file, leaving the tree as it was.
func TestWriteParents(t *testing.T) {
	for _, tc := range []struct {
		name    string
		write   sandbox.Write
		touched []string // sorted
		wantErr error
	}{
		{"one missing folder", sandbox.Write{Path: "/sandbox/notes/a.txt", Content: []byte("a\n"), Parents: true},
			[]string{"/sandbox/notes", "/sandbox/notes/a.txt"}, nil},
		{"three missing folders", sandbox.Write{Path: "/sandbox/x/y/z/a.md", Content: []byte("a\n"), Parents: true},
			[]string{"/sandbox/x", "/sandbox/x/y", "/sandbox/x/y/z", "/sandbox/x/y/z/a.md"}, nil},
		{"below an existing folder", sandbox.Write{Path: "/sandbox/sub/new/a.txt", Content: []byte("a\n"), Parents: true},
			[]string{"/sandbox/sub/new", "/sandbox/sub/new/a.txt"}, nil},
		{"parent exists", sandbox.Write{Path: "/sandbox/sub/b.txt", Content: []byte("b\n"), Parents: true},
			[]string{"/sandbox/sub/b.txt"}, nil},
		{"a file in the way", sandbox.Write{Path: "/sandbox/notes.md/x/a.txt", Content: []byte("a\n"), Parents: true},
			nil, sandbox.ErrNotDir},
		{"without Parents the folder must exist", sandbox.Write{Path: "/sandbox/notes/a.txt", Content: []byte("a\n")},
			nil, os.ErrNotExist},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
			original := treeHash(t, dir)
			st, err := sb.Stage(ctx, []sandbox.Change{tc.write})
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Stage = %v; want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := st.Touched(); !slices.Equal(got, tc.touched) {
				t.Fatalf("Touched = %v; want %v", got, tc.touched)
			}
			for _, d := range st.Diffs() {
				if d.Path != tc.write.Path && (d.Before.Kind != sandbox.KindAbsent || d.After.Kind != sandbox.KindDir) {
					t.Errorf("diff of %s = %s -> %s; want absent -> dir", d.Path, d.Before.Kind, d.After.Kind)
				}
			}
			if err := st.WithinEffects(sandbox.Effects{Create: []string{tc.write.Path}}); len(tc.touched) > 1 && !errors.Is(err, sandbox.ErrUndeclared) {
				t.Errorf("created folders not declared: WithinEffects = %v", err)
			}
			if err := st.WithinEffects(sandbox.Effects{Create: tc.touched}); err != nil {
				t.Errorf("WithinEffects with the folders declared = %v", err)
			}
			snap, err := sb.Promote(ctx, st)
			if err != nil {
				t.Fatal(err)
			}
			rel, _ := sandbox.Normalize(tc.write.Path)
			if b, err := os.ReadFile(filepath.Join(dir, rel)); err != nil || string(b) != string(tc.write.Content) {
				t.Fatalf("after promotion: %q, %v", b, err)
			}
			if err := sb.Rollback(ctx, snap); err != nil {
				t.Fatal(err)
			}
			if treeHash(t, dir) != original {
				t.Fatal("rollback left the created folders behind")
			}
		})
	}
}

// TestWriteParentsRollbackKeepsFilledFolder: a folder created for a write
// that has since received another file is not removed by the rollback
// (nothing is restored: the folder no longer holds what the promotion
// left).
func TestWriteParentsRollbackKeepsFilledFolder(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
	st, err := sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/notes/a.txt", Content: []byte("a\n"), Parents: true}})
	if err != nil {
		t.Fatal(err)
	}
	snap, err := sb.Promote(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "notes", "other.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	err = sb.Rollback(ctx, snap)
	if err == nil {
		t.Fatal("rollback removed a folder holding another file")
	}
	if b, rerr := os.ReadFile(filepath.Join(dir, "notes", "other.txt")); rerr != nil || string(b) != "x" {
		t.Fatalf("other file: %q, %v (rollback: %v)", b, rerr, err)
	}
}
