package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// needLocks skips a test of the folder lock where there is none.
func needLocks(t *testing.T) {
	if !sandbox.FolderLocks() {
		t.Skip("no folder lock on this platform")
	}
}

// openSecond opens dir again, as another replica of the node would.
func openSecond(t *testing.T, dir string) *sandbox.Sandbox {
	t.Helper()
	b, err := sandbox.Open(dir, sandbox.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// stageWrite stages one write of notes.md in sb.
func stageWrite(t *testing.T, sb *sandbox.Sandbox, content string) *sandbox.Staged {
	t.Helper()
	st, err := sb.Stage(context.Background(), []sandbox.Change{sandbox.Write{Path: "/sandbox/notes.md", Content: []byte(content)}})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// race runs other in its own goroutine while the caller is stopped at
// one of its hooks, and returns once other either waits for the folder
// lock (busy, which the caller installed on other's sandbox, fired) or is
// done; wait then waits for it to finish. Without the lock other runs to
// its end in the middle of the caller's promotion or rollback.
type race struct {
	busy chan struct{}
	done chan struct{}
	once sync.Once
}

func newRace(b *sandbox.Sandbox) *race {
	r := &race{busy: make(chan struct{}), done: make(chan struct{})}
	sandbox.SetLockHook(b, func() { r.once.Do(func() { close(r.busy) }) })
	return r
}

func (r *race) start(other func()) (waited bool) {
	go func() {
		defer close(r.done)
		other()
	}()
	select {
	case <-r.busy:
		return true
	case <-r.done:
		return false
	}
}

func (r *race) wait() { <-r.done }

// TestPromotionsAcrossProcessesSerialize: two sandboxes on one folder (two
// replicas sharing their workspace) both stage a write of notes.md from
// the same content. The second promotes while the first is between its
// check of notes.md and its rename. It waits for the folder lock; once
// the first is done it finds notes.md changed, and applies nothing: the
// file keeps the first's content, and no promotion reports a write the
// file does not hold (before, both reported success and the second's
// write was lost).
func TestPromotionsAcrossProcessesSerialize(t *testing.T) {
	needLocks(t)
	ctx := context.Background()
	dir, a := newSandbox(t, sandbox.Limits{}, stageFixture)
	b := openSecond(t, dir)
	stA, stB := stageWrite(t, a, "A\n"), stageWrite(t, b, "B\n")
	r := newRace(b)
	var errB error
	waited := false
	sandbox.SetTestHooks(a, nil, func(string) error {
		waited = r.start(func() { _, errB = b.Promote(ctx, stB) })
		return nil
	})
	_, errA := a.Promote(ctx, stA)
	r.wait()
	got, _ := os.ReadFile(filepath.Join(dir, "notes.md"))
	if errA != nil {
		t.Fatalf("first Promote = %v", errA)
	}
	if !waited {
		t.Errorf("the second promotion ran inside the first (its result: %v)", errB)
	}
	if !errors.Is(errB, sandbox.ErrChanged) {
		t.Errorf("second Promote = %v; want ErrChanged (notes.md holds %q)", errB, got)
	}
	if string(got) != "A\n" {
		t.Errorf("notes.md = %q; want the first promotion's", got)
	}
}

// TestRollbackAcrossProcessesSerializes: a rollback in one sandbox, between
// its check that notes.md still holds what its promotion wrote and its
// restoring the old content, and a promotion of notes.md by another
// sandbox on the same folder: the promotion waits, then finds notes.md
// changed (before, it was applied and the rollback overwrote it, both
// reporting success).
func TestRollbackAcrossProcessesSerializes(t *testing.T) {
	needLocks(t)
	ctx := context.Background()
	dir, a := newSandbox(t, sandbox.Limits{}, stageFixture)
	snap, err := a.Promote(ctx, stageWrite(t, a, "A\n"))
	if err != nil {
		t.Fatal(err)
	}
	b := openSecond(t, dir)
	stB := stageWrite(t, b, "B\n") // from "A\n"
	r := newRace(b)
	var errB error
	started, waited := false, false
	sandbox.SetTestHooks(a, func(kind, path string) error {
		if !started {
			started = true
			waited = r.start(func() { _, errB = b.Promote(ctx, stB) })
		}
		return nil
	}, nil)
	errA := a.Rollback(ctx, snap)
	r.wait()
	got, _ := os.ReadFile(filepath.Join(dir, "notes.md"))
	if errA != nil {
		t.Fatalf("Rollback = %v", errA)
	}
	if !waited {
		t.Errorf("the promotion ran inside the rollback (its result: %v)", errB)
	}
	if !errors.Is(errB, sandbox.ErrChanged) {
		t.Errorf("Promote = %v; want ErrChanged (notes.md holds %q)", errB, got)
	}
	if string(got) != stageFixture["notes.md"] {
		t.Errorf("notes.md = %q; want the content restored", got)
	}
}

// TestLockWaitEndsWithContext: a promotion waiting for the folder lock
// that another sandbox holds stops when its context is canceled, with the
// context's error, and applies nothing.
func TestLockWaitEndsWithContext(t *testing.T) {
	needLocks(t)
	ctx := context.Background()
	dir, a := newSandbox(t, sandbox.Limits{}, stageFixture)
	b := openSecond(t, dir)
	stA, stB := stageWrite(t, a, "A\n"), stageWrite(t, b, "B\n")
	bctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sandbox.SetLockHook(b, cancel)
	var errB error
	sandbox.SetTestHooks(a, nil, func(string) error {
		// The first holds the lock: the second waits, is canceled, and
		// returns while the first is still here.
		_, errB = b.Promote(bctx, stB)
		return nil
	})
	if _, err := a.Promote(ctx, stA); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(errB, context.Canceled) {
		t.Fatalf("waiting Promote = %v; want context.Canceled", errB)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "notes.md")); string(got) != "A\n" {
		t.Fatalf("notes.md = %q", got)
	}
}

// TestLockFileIsPrivate: the folder's lock file is not listed, not
// counted, not swept, and no proposal path reaches it.
func TestLockFileIsPrivate(t *testing.T) {
	needLocks(t)
	ctx := context.Background()
	dir, a := newSandbox(t, sandbox.Limits{}, stageFixture)
	if _, err := a.Promote(ctx, stageWrite(t, a, "A\n")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(dir, sandbox.LockFile)); err != nil {
		t.Fatalf("lock file: %v", err)
	}
	ents, err := a.List(ctx, "/sandbox/")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.Name == sandbox.LockFile {
			t.Fatal("List shows the lock file")
		}
	}
	if _, err := sandbox.Normalize("/sandbox/" + sandbox.LockFile); !errors.Is(err, sandbox.RuleReserved) {
		t.Fatalf("Normalize(lock file) = %v", err)
	}
	if _, err := a.Read(ctx, "/sandbox/"+sandbox.LockFile); err == nil {
		t.Fatal("Read of the lock file succeeded")
	}
	if n, err := openSecond(t, dir).Sweep(ctx); err != nil || n != 0 {
		t.Fatalf("Sweep = %d, %v", n, err)
	}
	if _, err := os.Lstat(filepath.Join(dir, sandbox.LockFile)); err != nil {
		t.Fatalf("lock file after Sweep: %v", err)
	}
}
