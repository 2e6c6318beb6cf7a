package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// promote stages changes and promotes them, failing the test on error.
func promote(t *testing.T, sb *sandbox.Sandbox, changes ...sandbox.Change) {
	t.Helper()
	ctx := context.Background()
	st, err := sb.Stage(ctx, changes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Promote(ctx, st); err != nil {
		t.Fatal(err)
	}
}

// TestRunningCount: the count the total-bytes cap is checked against
// follows every promotion and rollback exactly (it equals a walk of the
// tree), without walking the tree again.
func TestRunningCount(t *testing.T) {
	ctx := context.Background()
	_, sb := newSandbox(t, sandbox.Limits{}, map[string]string{"a.txt": "aaaa", "d/b.txt": "bb"})
	if _, known := sandbox.RunningCounts(sb); known {
		t.Fatal("a count before anything needed one")
	}
	promote(t, sb, sandbox.Write{Path: "/sandbox/c.md", Content: []byte("ccc")})
	want := sandbox.Counts{Bytes: 9, Files: 3, Dirs: 1}
	if c, known := sandbox.RunningCounts(sb); !known || c != want {
		t.Fatalf("after the first growing write: %+v (known %v), want %+v", c, known, want)
	}
	steps := [][]sandbox.Change{
		{sandbox.Write{Path: "/sandbox/a.txt", Content: []byte("a")}},
		{sandbox.Mkdir{Path: "/sandbox/e"}, sandbox.Write{Path: "/sandbox/e/f.txt", Content: []byte("ffffff")}},
		{sandbox.Rename{From: "/sandbox/d/b.txt", To: "/sandbox/e/b.txt"}},
		{sandbox.Delete{Path: "/sandbox/c.md"}},
	}
	var snaps []*sandbox.Snapshot
	for i, changes := range steps {
		st, err := sb.Stage(ctx, changes)
		if err != nil {
			t.Fatal(err)
		}
		snap, err := sb.Promote(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		snaps = append(snaps, snap)
		c, known := sandbox.RunningCounts(sb)
		walked, err := sb.Counts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !known || c != walked {
			t.Fatalf("step %d: running count %+v (known %v), the tree holds %+v", i, c, known, walked)
		}
	}
	for i := len(snaps) - 1; i >= 0; i-- {
		if err := sb.Rollback(ctx, snaps[i]); err != nil {
			t.Fatal(err)
		}
		c, _ := sandbox.RunningCounts(sb)
		walked, err := sb.Counts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c != walked {
			t.Fatalf("rollback %d: running count %+v, the tree holds %+v", i, c, walked)
		}
	}
	if c, _ := sandbox.RunningCounts(sb); c != want {
		t.Fatalf("after every rollback: %+v, want %+v", c, want)
	}
}

// TestRunningCountOutside: an action never walks the tree while there is
// a running count, however old: what changed from outside (files added or
// removed by an operator) is counted at the next Recount, run outside the
// actions (the node runs it every minute); a promotion that fails
// half-way leaves no count, and the next check walks.
func TestRunningCountOutside(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{MaxTotalBytes: 100}, map[string]string{"a.txt": string(make([]byte, 50))})
	now := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	sandbox.SetClock(sb, func() time.Time { return now })
	promote(t, sb, sandbox.Write{Path: "/sandbox/b.txt", Content: make([]byte, 10)})

	// 30 bytes copied in by the operator: uncounted until a Recount, an
	// hour later as a second later.
	if err := os.WriteFile(filepath.Join(dir, "op.txt"), make([]byte, 30), 0o644); err != nil {
		t.Fatal(err)
	}
	c30 := []sandbox.Change{sandbox.Write{Path: "/sandbox/c.txt", Content: make([]byte, 30)}}
	if _, err := sb.Stage(ctx, c30); err != nil {
		t.Fatalf("the count is the sandbox's own: %v", err)
	}
	now = now.Add(time.Hour)
	if _, err := sb.Stage(ctx, c30); err != nil {
		t.Fatalf("an hour later, the action walked the tree: %v", err)
	}
	if c, err := sb.Recount(ctx); err != nil || c.Bytes != 90 {
		t.Fatalf("Recount = %+v, %v; want 90 bytes", c, err)
	}
	_, err := sb.Stage(ctx, c30)
	var le *sandbox.LimitError
	if !errors.As(err, &le) || le.Limit != sandbox.LimitTotalBytes || le.Got != 120 {
		t.Fatalf("after the Recount the operator's file counts: %v", err)
	}

	// The operator removes a.txt: the count frees its 50 bytes at the
	// next Recount, not before.
	if err := os.Remove(filepath.Join(dir, "a.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Stage(ctx, c30); !errors.As(err, &le) {
		t.Fatalf("before the Recount: %v, want the refusal of the running count", err)
	}
	if _, err := sb.Recount(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Stage(ctx, c30); err != nil {
		t.Fatalf("after the Recount: %v", err)
	}
	if c, _ := sandbox.RunningCounts(sb); c.Bytes != 40 {
		t.Fatalf("after the Recount: %+v, want 40 bytes", c)
	}

	// A promotion that fails and is undone leaves the workspace as it
	// was: the count stays, and no action walks the tree.
	boom := errors.New("boom")
	sandbox.SetTestHooks(sb, func(kind, path string) error {
		if path == "/sandbox/e.txt" {
			return boom
		}
		return nil
	}, nil)
	st, err := sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: "/sandbox/d.txt", Content: []byte("d")}, sandbox.Write{Path: "/sandbox/e.txt", Content: []byte("e")}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sb.Promote(ctx, st); !errors.Is(err, boom) {
		t.Fatalf("promote: %v", err)
	}
	if c, known := sandbox.RunningCounts(sb); !known || c.Bytes != 40 {
		t.Fatalf("after a promotion that failed and was undone: %+v (known %v), want the 40 bytes it held", c, known)
	}
}

// TestRunningCountIncomplete: a promotion that fails half-way and whose
// undo fails too (ErrIncomplete) keeps a count of what it did and
// undid, equal to a walk of the tree: an action after it does not walk
// the whole tree on its own time (under the promotion locks), and a
// rollback of the promotion brings the count back.
func TestRunningCountIncomplete(t *testing.T) {
	ctx := context.Background()
	_, sb := newSandbox(t, sandbox.Limits{}, map[string]string{"a.txt": "aaaa", "d/b.txt": "bb"})
	if _, err := sb.Recount(ctx); err != nil {
		t.Fatal(err)
	}
	st := stage(t, sb, []sandbox.Change{
		sandbox.Delete{Path: "/sandbox/a.txt"},
		sandbox.Mkdir{Path: "/sandbox/e"},
		sandbox.Write{Path: "/sandbox/e/f.txt", Content: []byte("ffffff")},
		sandbox.Write{Path: "/sandbox/g.txt", Content: []byte("g")},
	})
	// Every directory sync fails from the mkdir on: the mkdir is done and
	// fails, its undo (the rmdir) is done and fails too; the unlink
	// before it was done and its undo (the write back) fails.
	syncs := 0
	sandbox.SetSyncHook(sb, func() error {
		if syncs++; syncs >= 2 {
			return errors.New("sync failed")
		}
		return nil
	})
	if _, err := sb.Promote(ctx, st); !errors.Is(err, sandbox.ErrIncomplete) {
		t.Fatalf("promote: %v, want ErrIncomplete", err)
	}
	sandbox.SetSyncHook(sb, nil)
	c, known := sandbox.RunningCounts(sb)
	walked, err := sb.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !known || c != walked {
		t.Fatalf("after ErrIncomplete: running count %+v (known %v), the tree holds %+v", c, known, walked)
	}
}

// TestRecountDuringPromotion: a Recount during whose walk promotions
// ran is kept, not thrown away (under a steady stream of actions no walk
// would ever be kept, and what an operator copied in or removed would
// never count): what the walk found, plus at most what the promotions
// during it could have added that the walk did not see. The count is
// then never below what the workspace holds, and above it by no more
// than those promotions' images.
func TestRecountDuringPromotion(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, map[string]string{"a/x.txt": "xx", "b/y.txt": "yyyy", "c/z.txt": "z"})
	if _, err := sb.Recount(ctx); err != nil {
		t.Fatal(err)
	}
	// The operator's file, and a promotion in the middle of the walk.
	if err := os.WriteFile(filepath.Join(dir, "op.txt"), make([]byte, 30), 0o644); err != nil {
		t.Fatal(err)
	}
	ran := false
	sandbox.SetWalkHook(sb, func(path string) {
		if ran {
			return
		}
		ran = true
		promote(t, sb, sandbox.Write{Path: "/sandbox/new.txt", Content: make([]byte, 10)},
			sandbox.Delete{Path: "/sandbox/c/z.txt"})
	})
	if _, err := sb.Recount(ctx); err != nil {
		t.Fatal(err)
	}
	sandbox.SetWalkHook(sb, nil)
	if !ran {
		t.Fatal("no promotion during the walk")
	}
	c, known := sandbox.RunningCounts(sb)
	walked, err := sb.Counts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if walked.Bytes != 46 {
		t.Fatalf("the tree holds %+v, want 46 bytes", walked)
	}
	if !known || c.Bytes < walked.Bytes || c.Files < walked.Files || c.Dirs < walked.Dirs ||
		c.Bytes > walked.Bytes+10+1 || c.Files > walked.Files+2 || c.Dirs != walked.Dirs {
		t.Fatalf("after a Recount during a promotion: %+v (known %v), the tree holds %+v", c, known, walked)
	}
}

// TestPartialCount: a walk cut short (its time limit, a stop) while there
// is no count yet, as at start-up on a folder too large to count in
// time, leaves what it counted as the running count: a lower bound, with
// which the caps are enforced (an action it already puts past a cap is
// refused, and no action walks the tree again), and Recount's error says
// so (ErrPartialCount). A complete walk replaces it; a walk cut short
// never replaces a complete count.
func TestPartialCount(t *testing.T) {
	files := map[string]string{}
	for i := range 20 {
		files[fmt.Sprintf("d%02d/f.txt", i)] = "ffff"
	}
	_, sb := newSandbox(t, sandbox.Limits{MaxTotalEntries: 10}, files)
	cut := func() (sandbox.Counts, error) {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		seen := 0
		sandbox.SetWalkHook(sb, func(string) {
			if seen++; seen == 13 {
				cancel()
			}
		})
		defer sandbox.SetWalkHook(sb, nil)
		return sb.Recount(ctx)
	}
	c, err := cut()
	if !errors.Is(err, sandbox.ErrPartialCount) || !errors.Is(err, context.Canceled) {
		t.Fatalf("a walk cut short: %v, want ErrPartialCount and the cause", err)
	}
	running, known := sandbox.RunningCounts(sb)
	if !known || running != c || c.Files+c.Dirs < 10 || c.Files+c.Dirs >= 40 {
		t.Fatalf("running count %+v (known %v), the walk's %+v: want the partial count", running, known, c)
	}
	sandbox.SetWalkHook(sb, func(string) { t.Fatal("an action walked the tree") })
	_, err = sb.Stage(context.Background(), []sandbox.Change{sandbox.Write{Path: "/sandbox/x.txt", Content: []byte("x")}})
	var le *sandbox.LimitError
	if !errors.As(err, &le) || le.Limit != sandbox.LimitTotalEntries {
		t.Fatalf("past the cap on the partial count: %v", err)
	}
	sandbox.SetWalkHook(sb, nil)
	if c, err := sb.Recount(context.Background()); err != nil || c.Files+c.Dirs != 40 {
		t.Fatalf("a complete walk: %+v, %v", c, err)
	}
	if _, err := cut(); errors.Is(err, sandbox.ErrPartialCount) || !errors.Is(err, context.Canceled) {
		t.Fatalf("a walk cut short after a complete one: %v, want the cause alone", err)
	}
	if running, _ := sandbox.RunningCounts(sb); running.Files+running.Dirs != 40 {
		t.Fatalf("a walk cut short replaced the complete count: %+v", running)
	}
}

// TestRunningCountAcrossRecoverAround: a recovery that moves a file a
// crash left set aside to a visible name (it holds an edit made
// meanwhile) counts it in, and the count stays: before, it was
// forgotten, and the next action walked the whole tree on its own time.
func TestRunningCountAcrossRecoverAround(t *testing.T) {
	ctx := context.Background()
	eachWayKept(t, func(t *testing.T, dir string, sb *sandbox.Sandbox) {
		snap := crashAsideEdited(t, dir, sb, "edited by hand\n")
		if _, err := sb.Recount(ctx); err != nil {
			t.Fatal(err)
		}
		left, err := sb.RecoverAround(ctx, snap)
		if err != nil {
			t.Fatal(err)
		}
		if len(left) != 1 || left[0].Kept == "" {
			t.Fatalf("RecoverAround left %+v, want the file kept", left)
		}
		c, known := sandbox.RunningCounts(sb)
		walked, err := sb.Counts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !known || c != walked {
			t.Fatalf("after RecoverAround: running count %+v (known %v), the tree holds %+v", c, known, walked)
		}
	})
}
