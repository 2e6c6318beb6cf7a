package sandbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
)

// TestForgetKeptExcept: a recovery's record of the files it kept stays
// for ever when the process stops after its caller recorded the result
// and before ForgetKept (or the caller's commit stood, its answer lost):
// nothing reads it again, nothing removed it, and a node that crashed so
// now and then gathered them at the root of its workspace. ForgetKeptExcept
// removes every such record but those of the changes live names (still to
// be recovered: their records are what names their kept files again), and
// leaves the workspace's files, the files set aside and the lock alone.
// Should live fail, nothing is removed.
func TestForgetKeptExcept(t *testing.T) {
	ctx := context.Background()
	eachWayKept(t, func(t *testing.T, dir string, sb *sandbox.Sandbox) {
		snap := crashAsideEdited(t, dir, sb, "hand edit\n")
		if _, err := sb.RecoverAroundFor(ctx, snap, "done"); err != nil {
			t.Fatal(err)
		}
		// The caller recorded the result, then stopped before ForgetKept.
		done := filepath.Join(dir, sandbox.KeptRecordName(snap, "done"))
		b, err := os.ReadFile(done)
		if err != nil {
			t.Fatalf("no record of the files kept: %v", err)
		}
		// The record of another change, its recovery not yet recorded.
		pending := filepath.Join(dir, sandbox.KeptRecordName(snap, "pending"))
		if err := os.WriteFile(pending, b, 0o600); err != nil {
			t.Fatal(err)
		}
		aside := filepath.Join(dir, "sub", sandbox.AsideName("a.txt"))
		if err := os.WriteFile(aside, []byte("set aside\n"), 0o644); err != nil {
			t.Fatal(err)
		}

		// Hidden from the model and from peers: not listed, not readable,
		// not counted.
		entries, err := sb.List(ctx, "/sandbox/")
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if strings.HasPrefix(e.Name, sandbox.ReservedPrefix) {
				t.Errorf("List shows %s", e.Path)
			}
		}
		if _, err := sb.Read(ctx, "/sandbox/"+filepath.Base(done)); !errors.Is(err, sandbox.RuleReserved) {
			t.Errorf("Read of the record = %v; want it refused (%s)", err, sandbox.RuleReserved)
		}

		failed := errors.New("the database is down")
		if n, err := sb.ForgetKeptExcept(ctx, func(context.Context) ([]sandbox.KeptOwner, error) { return nil, failed }); n != 0 || !errors.Is(err, failed) {
			t.Errorf("ForgetKeptExcept with live failing = %d, %v; want 0 and its error", n, err)
		}
		for _, p := range []string{done, pending} {
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s gone though live failed: %v", filepath.Base(p), err)
			}
		}

		n, err := sb.ForgetKeptExcept(ctx, func(context.Context) ([]sandbox.KeptOwner, error) {
			return []sandbox.KeptOwner{{Snapshot: snap, ID: "pending"}}, nil
		})
		if n != 1 || err != nil {
			t.Fatalf("ForgetKeptExcept = %d, %v; want the one left behind removed", n, err)
		}
		if _, err := os.Stat(done); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the record of the change recorded recovered is still there (%v)", err)
		}
		for _, p := range []string{pending, aside, filepath.Join(dir, sandbox.LockFile)} {
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s removed: %v", p, err)
			}
		}
		if got := keptFiles(t, dir); len(got) != 1 {
			t.Errorf("kept files = %v; want the one, left", got)
		}
		// The pending change's recovery still finds its record.
		if n, err := sb.ForgetKeptExcept(ctx, func(context.Context) ([]sandbox.KeptOwner, error) { return nil, nil }); n != 1 || err != nil {
			t.Errorf("ForgetKeptExcept with none live = %d, %v; want the pending one's removed", n, err)
		}
	})
}

// TestForgetKeptExceptManyEntries: the workspace's root, which
// ForgetKeptExcept reads for the records it removes, may hold many more
// entries than it reads at once (sandbox.ListBatch). Every record left
// behind among them is removed, whichever batch it is read in, and
// neither the records of live changes nor the workspace's files are.
func TestForgetKeptExceptManyEntries(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, nil)
	files := 3*sandbox.ListBatch + 7
	for i := range files {
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("file-%04d.txt", i)), []byte("kept\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	snap := &sandbox.Snapshot{Version: sandbox.SnapshotVersion}
	var live []sandbox.KeptOwner
	var stale, kept []string
	for i := range 12 {
		id := fmt.Sprintf("change-%d", i)
		name := sandbox.KeptRecordName(snap, id)
		if err := os.WriteFile(filepath.Join(dir, name), []byte("[]"), 0o600); err != nil {
			t.Fatal(err)
		}
		if i%4 == 0 {
			live = append(live, sandbox.KeptOwner{Snapshot: snap, ID: id})
			kept = append(kept, name)
		} else {
			stale = append(stale, name)
		}
	}
	n, err := sb.ForgetKeptExcept(ctx, func(context.Context) ([]sandbox.KeptOwner, error) { return live, nil })
	if n != len(stale) || err != nil {
		t.Fatalf("ForgetKeptExcept = %d, %v; want the %d records left behind removed", n, err, len(stale))
	}
	for _, name := range stale {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s, left behind, is still there (%v)", name, err)
		}
	}
	for _, name := range kept {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			t.Errorf("%s, a live change's, was removed: %v", name, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := 0
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "file-") {
			got++
		}
	}
	if got != files {
		t.Errorf("%d of the workspace's %d files left", got, files)
	}
}
