package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// TestSweepSparesAnotherProcess: two sandboxes open on one folder, as
// two replicas of a node sharing their workspace. One prepares a
// promotion (its new content written ahead under a temporary name); the
// other starts and sweeps. The sweep removes what a crash left (a file
// no live sandbox holds) and leaves the first one's file alone, whose
// promotion then completes.
func TestSweepSparesAnotherProcess(t *testing.T) {
	ctx := context.Background()
	dir, a := newSandbox(t, sandbox.Limits{}, stageFixture)
	p := prepare(t, a, composite)
	defer p.Discard()
	left := filepath.Join(dir, "sub", sandbox.ReservedPrefix+"tmp-0123456789abcdef01234567")
	if err := os.WriteFile(left, []byte("half"), 0o600); err != nil {
		t.Fatal(err)
	}

	b, err := sandbox.Open(dir, sandbox.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if n, err := b.Sweep(ctx); err != nil || n != 1 {
		t.Fatalf("the second sandbox's Sweep = %d, %v; want only the file a crash left", n, err)
	}
	if _, err := os.Stat(left); !os.IsNotExist(err) {
		t.Fatalf("the file a crash left is still there: %v", err)
	}
	if _, err := a.PromotePrepared(ctx, p); err != nil {
		t.Fatalf("PromotePrepared after the other sandbox swept = %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "notes.md")); string(b) != "line one\nchanged\n" {
		t.Fatalf("notes.md = %q", b)
	}
	if left := reservedFiles(t, dir); left != nil {
		t.Fatalf("temporary files left: %v", left)
	}
}

// TestSweepDuringPromotion: a sweep by another sandbox on the same
// folder, at each step of a promotion written at once (no Prepare) and
// of its rollback, leaves both whole.
func TestSweepDuringPromotion(t *testing.T) {
	ctx := context.Background()
	dir, a := newSandbox(t, sandbox.Limits{}, stageFixture)
	before := treeHash(t, dir)
	b, err := sandbox.Open(dir, sandbox.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	swept := 0
	sandbox.SetTestHooks(a, nil, func(string) error {
		n, err := b.Sweep(ctx)
		if err != nil {
			t.Errorf("Sweep = %v", err)
		}
		swept += n
		return nil
	})
	st, err := a.Stage(ctx, composite)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := a.Promote(ctx, st)
	if err != nil {
		t.Fatalf("Promote with another sandbox sweeping = %v", err)
	}
	if err := a.Rollback(ctx, snap); err != nil {
		t.Fatalf("Rollback with another sandbox sweeping = %v", err)
	}
	if swept != 0 {
		t.Fatalf("the other sandbox swept %d live temporary files", swept)
	}
	if treeHash(t, dir) != before {
		t.Fatal("the tree is not back")
	}
}
