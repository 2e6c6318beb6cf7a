package sandbox_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// TestCheckedRefusesBeforeAnyChange: a view's check (Checked) runs in
// Promote, PromotePrepared, Rollback and Recover, and in a Narrow of the
// view; its error is returned as it is, and nothing changes.
func TestCheckedRefusesBeforeAnyChange(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
	snap, err := sb.Promote(ctx, stageWrite(t, sb, "promoted\n"))
	if err != nil {
		t.Fatal(err)
	}
	errGone := errors.New("the record is no longer the caller's")
	calls := 0
	refused := sb.Checked(func(context.Context) error { calls++; return errGone })
	narrowed := refused.Narrow(sandbox.Limits{MaxFileSize: 1 << 10})
	prepared, err := sb.Prepare(ctx, stageWrite(t, sb, "prepared\n"))
	if err != nil {
		t.Fatal(err)
	}
	defer prepared.Discard()
	for name, op := range map[string]func() error{
		"Promote":         func() error { _, err := refused.Promote(ctx, stageWrite(t, sb, "other\n")); return err },
		"Promote, Narrow": func() error { _, err := narrowed.Promote(ctx, stageWrite(t, sb, "other\n")); return err },
		"PromotePrepared": func() error { _, err := refused.PromotePrepared(ctx, prepared); return err },
		"Rollback":        func() error { return refused.Rollback(ctx, snap) },
		"Recover":         func() error { return refused.Recover(ctx, snap) },
	} {
		before := calls
		if err := op(); err != errGone {
			t.Errorf("%s = %v; want the check's error as it is", name, err)
		}
		if calls != before+1 {
			t.Errorf("%s called the check %d times", name, calls-before)
		}
		if got, _ := os.ReadFile(filepath.Join(dir, "notes.md")); string(got) != "promoted\n" {
			t.Errorf("after %s, notes.md = %q; want it unchanged", name, got)
		}
	}
	// The locks were let go: the sandbox itself goes on.
	if err := sb.Checked(func(context.Context) error { return nil }).Rollback(ctx, snap); err != nil {
		t.Errorf("Rollback with a check that passes: %v", err)
	}
}

// TestCheckedHoldsTheFolderLock: the check runs holding the folder lock,
// so that another process's change of the folder cannot come between
// it and the change it allows: a promotion by another sandbox on the same
// folder, started during the check, waits for the lock and then finds
// notes.md changed.
func TestCheckedHoldsTheFolderLock(t *testing.T) {
	needLocks(t)
	ctx := context.Background()
	dir, a := newSandbox(t, sandbox.Limits{}, stageFixture)
	b := openSecond(t, dir)
	stA, stB := stageWrite(t, a, "A\n"), stageWrite(t, b, "B\n")
	r := newRace(b)
	var errB error
	waited := false
	_, errA := a.Checked(func(context.Context) error {
		waited = r.start(func() { _, errB = b.Promote(ctx, stB) })
		return nil
	}).Promote(ctx, stA)
	r.wait()
	if errA != nil {
		t.Fatalf("checked Promote = %v", errA)
	}
	if !waited {
		t.Errorf("the other promotion ran during the check (its result: %v)", errB)
	}
	if !errors.Is(errB, sandbox.ErrChanged) {
		t.Errorf("other Promote = %v; want ErrChanged", errB)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "notes.md")); string(got) != "A\n" {
		t.Errorf("notes.md = %q; want the checked promotion's", got)
	}
}
