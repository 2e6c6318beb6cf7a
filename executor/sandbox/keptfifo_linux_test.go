package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/snapnode/snapnode/executor/sandbox"
	"golang.org/x/sys/unix"
)

// TestKeptRecordSwappedForFIFO puts a FIFO in place of the record of the
// files kept, between the recovery's look at it (a regular file) and its
// open. The open must not wait for a writer (a recovery blocked there
// holds the folder lock for good), nor read what a writer sends: the
// recovery fails, naming the record.
func TestKeptRecordSwappedForFIFO(t *testing.T) {
	ctx := context.Background()
	dir, sb := newSandbox(t, sandbox.Limits{}, stageFixture)
	st := stage(t, sb, []sandbox.Change{sandbox.Write{Path: "/sandbox/notes.md", Content: []byte("new\n")}})
	snap, err := sb.Promote(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	name := sandbox.KeptRecordName(snap, "a1")
	record := filepath.Join(dir, name)
	if err := os.WriteFile(record, []byte("[]"), 0o600); err != nil {
		t.Fatal(err)
	}
	wrote := make(chan error, 1)
	swapped := false
	sandbox.SetSwapHook(sb, func(step, path string) error {
		if step != "record" || swapped {
			return nil
		}
		swapped = true
		if err := os.Remove(record); err != nil {
			return err
		}
		if err := unix.Mkfifo(record, 0o600); err != nil {
			return err
		}
		// A writer that waits for a reader, then sends a record.
		go func() {
			f, err := os.OpenFile(record, os.O_WRONLY, 0)
			if err != nil {
				wrote <- err
				return
			}
			_, err = f.Write([]byte("[]"))
			f.Close()
			wrote <- err
		}()
		return nil
	})
	t.Cleanup(func() {
		if !swapped {
			return
		}
		// A reader held open until the writer is done, so that a writer
		// waiting for one (or yet to open) goes.
		f, err := os.OpenFile(record, os.O_RDWR, 0)
		if err != nil {
			t.Error(err)
			return
		}
		defer f.Close()
		<-wrote
	})
	_, err = sb.RecoverAroundFor(ctx, snap, "a1")
	if !swapped {
		t.Fatal("the recovery never opened the record")
	}
	if err == nil {
		t.Fatal("RecoverAroundFor read a FIFO put in place of the record; want an error naming it")
	}
	t.Log(err)
}
