package executor_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/testdb"
)

// TestPromotionWritesAhead: the new content of a WRITE_FILE is written
// (and synced) beside its target while the action's first commit is
// made, not after it: inside that commit's transaction the temporary file
// appears holding the whole content, the target still unchanged. The two
// waits for the disk overlap.
func TestPromotionWritesAhead(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		v.file("a.txt", "before\n")
		const content = "written ahead\n"
		var seen string
		also := func(ctx context.Context, _ *sql.Tx) error {
			// Bounded: on a promotion that writes only after this
			// commit, nothing ever appears and the test fails.
			deadline := time.Now().Add(10 * time.Second)
			for time.Now().Before(deadline) {
				if seen = aheadFile(t, v.dir, content); seen != "" {
					break
				}
				runtime.Gosched()
			}
			if c, _ := v.content("a.txt"); c != "before\n" {
				t.Errorf("a.txt = %q before the record is committed", c)
			}
			return nil
		}
		res, err := v.ex.Run(context.Background(), executor.Request{TaskID: "task-1", Requester: agent,
			Data: prop("WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": content}), Also: also})
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, res, executor.Completed)
		if seen == "" {
			t.Fatal("no temporary file with the new content while the record was being committed")
		}
		if c, _ := v.content("a.txt"); c != content {
			t.Fatalf("a.txt = %q", c)
		}
		if left := aheadFile(t, v.dir, ""); left != "" {
			t.Fatalf("temporary file left behind: %s", left)
		}
	})
}

// TestRecordFailsAfterWriteAhead: when the first commit fails (the
// caller's write refuses it), nothing is applied and the content written
// ahead is removed.
func TestRecordFailsAfterWriteAhead(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	v.file("a.txt", "before\n")
	lost := errors.New("the caller no longer holds the work")
	_, err := v.ex.Run(context.Background(), executor.Request{TaskID: "task-1", Requester: agent,
		Data: prop("WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": "after\n"}),
		Also: func(context.Context, *sql.Tx) error { return lost }})
	if !errors.Is(err, lost) {
		t.Fatalf("Run = %v, want the caller's error", err)
	}
	if c, _ := v.content("a.txt"); c != "before\n" {
		t.Fatalf("a.txt = %q", c)
	}
	if left := aheadFile(t, v.dir, ""); left != "" {
		t.Fatalf("temporary file left behind: %s", left)
	}
}

// TestCrashBetweenRecordAndRename: a node killed after the action's first
// commit and before the rename leaves the record "promoting" with its
// snapshot, the new content written ahead beside an unchanged target. At
// the next start the sandbox's sweep removes the temporary file and the
// executor's recovery records the action as not applied; the same write
// sent again is applied once.
func TestCrashBetweenRecordAndRename(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		st, snap := v.stagedRewrite(ctx)
		p, err := v.sb.Prepare(ctx, st)
		if err != nil {
			t.Fatal(err)
		}
		// The process died: its file written ahead stays, and its lock
		// on it goes (the same file again, which nothing holds).
		name := aheadFile(t, v.dir, "after\n")
		if name == "" {
			t.Fatal("nothing written ahead")
		}
		p.Discard()
		if err := os.WriteFile(filepath.Join(v.dir, name), []byte("after\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		v.insertRecord("killed-before-rename", "promoting", snap, prop("WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": "after\n"}))
		v.reopen()

		// What the node does at start: the sweep, then the recovery.
		if n, err := v.sb.Sweep(ctx); err != nil || n != 1 {
			t.Fatalf("Sweep = %d, %v; want the one file written ahead", n, err)
		}
		if n, err := v.ex.RecoverInterrupted(ctx); err != nil || n != 1 {
			t.Fatalf("RecoverInterrupted = %d, %v", n, err)
		}
		if c, _ := v.content("a.txt"); c != "before\n" {
			t.Fatalf("a.txt = %q, want it untouched", c)
		}
		es := v.entries("killed-before-rename")
		if len(es) != 1 || es[0].Step != audit.StepFailed || es[0].Decision != "recovered" {
			t.Fatalf("audit of the interrupted promotion: %+v", es)
		}
		res := v.run(agent, prop("WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": "after\n"}))
		wantOutcome(t, res, executor.Completed)
		if c, _ := v.content("a.txt"); c != "after\n" {
			t.Fatalf("a.txt = %q after the write sent again", c)
		}
		v.verify()
	})
}

// aheadFile returns the name of a temporary file of the sandbox in dir
// (holding content, unless content is ""), or "".
func aheadFile(t testing.TB, dir, content string) string {
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Error(err)
		return ""
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), sandbox.ReservedPrefix) || e.Name() == sandbox.LockFile || e.Name() == sandbox.CountFile {
			continue
		}
		if content == "" {
			return e.Name()
		}
		if b, err := os.ReadFile(dir + "/" + e.Name()); err == nil && string(b) == content {
			return e.Name()
		}
	}
	return ""
}
