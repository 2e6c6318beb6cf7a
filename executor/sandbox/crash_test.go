package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapnode/snapnode/executor/sandbox"
)

var errInjected = errors.New("injected failure")

// TestPromoteFailsAtEveryStep makes the promotion of a composite fail
// before each of its steps in turn: every time, the steps done are undone,
// the tree is as before and no temporary file is left.
func TestPromoteFailsAtEveryStep(t *testing.T) {
	ctx := context.Background()
	var steps []string
	{ // count the steps of a clean run
		_, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
		sandbox.SetTestHooks(sb, func(kind, path string) error {
			steps = append(steps, kind+" "+path)
			return nil
		}, nil)
		st, err := sb.Stage(ctx, composite)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sb.Promote(ctx, st); err != nil {
			t.Fatal(err)
		}
	}
	if len(steps) != 6 { // unlink ×2, mkdir, write ×3
		t.Fatalf("steps %q", steps)
	}
	for k := range steps {
		t.Run(steps[k], func(t *testing.T) {
			dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
			before := treeHash(t, dir)
			n := 0
			sandbox.SetTestHooks(sb, func(kind, path string) error {
				if n++; n-1 == k {
					return errInjected
				}
				return nil
			}, nil)
			st, err := sb.Stage(ctx, composite)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := sb.Promote(ctx, st); !errors.Is(err, errInjected) || errors.Is(err, sandbox.ErrIncomplete) {
				t.Fatalf("Promote = %v", err)
			}
			if treeHash(t, dir) != before {
				t.Fatal("a failed promotion left changes")
			}
			if left := reservedFiles(t, dir); left != nil {
				t.Fatalf("temporary files left: %v", left)
			}
		})
	}
}

// TestPromoteFailsBeforeRename fails a write after its temporary file is
// written and synced: the temporary file is removed and the earlier
// writes of the same promotion are undone.
func TestPromoteFailsBeforeRename(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
	before := treeHash(t, dir)
	var seen []string
	sandbox.SetTestHooks(sb, nil, func(path string) error {
		seen = append(seen, path)
		if left := reservedFiles(t, dir); len(left) != 1 {
			t.Errorf("at the rename of %s: temporary files %v", path, left)
		}
		if path == "/sandbox/notes.md" {
			return errInjected
		}
		return nil
	})
	st, err := sb.Stage(ctx, composite)
	if err != nil {
		t.Fatal(err)
	}
	_, err = sb.Promote(ctx, st)
	var oe *sandbox.OpError
	if !errors.Is(err, errInjected) || !errors.As(err, &oe) || oe.Path != "/sandbox/notes.md" {
		t.Fatalf("Promote = %v", err)
	}
	if len(seen) < 2 {
		t.Fatalf("the failure came before any other write: %v", seen)
	}
	if treeHash(t, dir) != before {
		t.Fatal("a failed promotion left changes")
	}
	if left := reservedFiles(t, dir); left != nil {
		t.Fatalf("temporary files left: %v", left)
	}
}

// TestPromoteIncomplete fails a promotion and then its undo: the error says
// so (ErrIncomplete), and Recover with the snapshot taken before the
// promotion restores the tree.
func TestPromoteIncomplete(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
	before := treeHash(t, dir)
	failing := false
	sandbox.SetTestHooks(sb, func(kind, path string) error {
		if path == "/sandbox/sub/tool.txt" {
			failing = true // from here on, every rename fails, undo's too
			return errInjected
		}
		return nil
	}, func(path string) error {
		if failing {
			return errInjected
		}
		return nil
	})
	st, err := sb.Stage(ctx, composite)
	if err != nil {
		t.Fatal(err)
	}
	snap := st.Snapshot()
	if _, err := sb.Promote(ctx, st); !errors.Is(err, sandbox.ErrIncomplete) || !errors.Is(err, errInjected) {
		t.Fatalf("Promote = %v", err)
	}
	if treeHash(t, dir) == before {
		t.Fatal("the undo was meant to fail")
	}
	sandbox.SetTestHooks(sb, nil, nil)
	if err := sb.Recover(ctx, snap); err != nil {
		t.Fatal(err)
	}
	if treeHash(t, dir) != before {
		t.Fatal("Recover did not restore the tree")
	}
	if left := reservedFiles(t, dir); left != nil {
		t.Fatalf("temporary files left: %v", left)
	}
}

// TestSweep removes what a crash between writing a temporary file and
// renaming it leaves behind.
func TestSweep(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
	for _, p := range []string{sandbox.ReservedPrefix + "tmp-1", "sub/" + sandbox.ReservedPrefix + "tmp-2"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte("half"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if ents, err := sb.List(ctx, "/sandbox/sub"); err != nil || len(ents) != 1 {
		t.Fatalf("List shows %+v, %v", ents, err)
	}
	if _, err := sb.Read(ctx, "/sandbox/sub/"+sandbox.ReservedPrefix+"tmp-2"); !errors.Is(err, sandbox.RuleReserved) {
		t.Fatalf("Read of a temporary file = %v", err)
	}
	n, err := sb.Sweep(ctx)
	if err != nil || n != 2 {
		t.Fatalf("Sweep = %d, %v", n, err)
	}
	if left := reservedFiles(t, dir); left != nil {
		t.Fatalf("left: %v", left)
	}
	if n, err := sb.Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("second Sweep = %d, %v", n, err)
	}
}

// TestMaxDuration lets a promotion and a rollback outlive MaxDuration (in
// a synctest bubble, so the clock is fake and nothing sleeps): each fails
// with LimitDuration and leaves the tree as it was.
func TestMaxDuration(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ctx := context.Background()
		const max = 2 * time.Second
		dir, sb := newSandbox(t, sandbox.Limits{MaxDuration: max}, stageFixture)
		before := treeHash(t, dir)
		slow := true
		sandbox.SetTestHooks(sb, func(kind, path string) error {
			if slow && path == "/sandbox/notes.md" {
				time.Sleep(2 * max)
			}
			return nil
		}, nil)
		st, err := sb.Stage(ctx, composite)
		if err != nil {
			t.Fatal(err)
		}
		_, err = sb.Promote(ctx, st)
		var le *sandbox.LimitError
		if !errors.As(err, &le) || le.Limit != sandbox.LimitDuration || le.Max != max.Milliseconds() ||
			!errors.Is(err, context.DeadlineExceeded) || le.Path != "/sandbox/notes.md" {
			t.Fatalf("slow Promote = %v", err)
		}
		if treeHash(t, dir) != before {
			t.Fatal("a timed-out promotion left changes")
		}

		slow = false
		snap, err := sb.Promote(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		slow = true
		if err := sb.Rollback(ctx, snap); !errors.Is(err, sandbox.ErrLimit) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("slow Rollback = %v", err)
		}
		slow = false
		if err := sb.Rollback(ctx, snap); err != nil {
			t.Fatalf("Rollback after a timed-out one = %v", err)
		}
		if treeHash(t, dir) != before {
			t.Fatal("the tree is not back")
		}
	})
}

// TestPromoteSyncFails fails the directory sync that follows each step in
// turn: the step's effect has happened, so it is undone with the others.
func TestPromoteSyncFails(t *testing.T) {
	ctx := context.Background()
	for k := range 6 {
		dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
		before := treeHash(t, dir)
		n, failed := 0, false
		sandbox.SetSyncHook(sb, func() error {
			if n++; n-1 == k {
				failed = true
				return errInjected
			}
			return nil
		})
		st, err := sb.Stage(ctx, composite)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := sb.Promote(ctx, st); !errors.Is(err, errInjected) || errors.Is(err, sandbox.ErrIncomplete) || !failed {
			t.Fatalf("sync %d: Promote = %v", k, err)
		}
		if treeHash(t, dir) != before {
			t.Fatalf("sync %d: a failed promotion left changes", k)
		}
		if left := reservedFiles(t, dir); left != nil {
			t.Fatalf("sync %d: temporary files left: %v", k, left)
		}
	}
}
