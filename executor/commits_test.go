package executor_test

import (
	"context"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
)

// TestCommitsPerStep counts the database commits (SQLite's group
// commits; one writer at a time here, so one commit per transaction) of
// each operation: an action's record and the audit of its steps share
// their commits. A promoted WRITE_FILE takes two: the audit entries and
// the record with its snapshot before the file changes, the record
// promoted and its entry after.
func TestCommitsPerStep(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	ctx := context.Background()
	v.file("a.txt", "hello\n")
	v.file("b.txt", "bye\n")
	var write, del, del2 string
	for _, tc := range []struct {
		name    string
		do      func(t *testing.T)
		commits int64
	}{
		{"WRITE_FILE promoted", func(t *testing.T) {
			res := v.run(agent, prop("WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": "new\n"}))
			wantOutcome(t, res, executor.Completed)
			wantSteps(t, v.steps(res.ActionID), "received", "validated", "judged", "sandboxed", "promoted")
			write = res.ActionID
		}, 2},
		{"READ_FILE", func(t *testing.T) {
			wantOutcome(t, v.run(agent, prop("READ_FILE", map[string]string{"path": "/sandbox/a.txt"})), executor.Completed)
		}, 1},
		{"invalid proposal", func(t *testing.T) {
			wantOutcome(t, v.run(agent, []byte(`{"schema_version":"1.0.0"}`)), executor.Failed)
		}, 1},
		{"rollback", func(t *testing.T) {
			if err := v.ex.Rollback(ctx, write); err != nil {
				t.Fatal(err)
			}
			if c, _ := v.content("a.txt"); c != "hello\n" {
				t.Fatalf("a.txt = %q after rollback", c)
			}
		}, 2}, // the claim before the files change, the record and its entry after
		{"DELETE_FILE held", func(t *testing.T) {
			res := v.run(agent, prop("DELETE_FILE", map[string]string{"path": "/sandbox/a.txt"}))
			wantOutcome(t, res, executor.NeedsConfirmation)
			del = res.ActionID
		}, 1},
		{"approved", func(t *testing.T) {
			res, err := v.ex.Approve(ctx, del, operator)
			if err != nil {
				t.Fatal(err)
			}
			wantOutcome(t, res, executor.Completed)
			wantSteps(t, v.steps(del), "received", "validated", "judged", "sandboxed", "held", "judged", "confirmed", "promoted")
		}, 3}, // the claim, then as a promotion
		{"second DELETE_FILE held", func(t *testing.T) {
			res := v.run(agent, prop("DELETE_FILE", map[string]string{"path": "/sandbox/b.txt"}))
			wantOutcome(t, res, executor.NeedsConfirmation)
			del2 = res.ActionID
		}, 1},
		{"denied", func(t *testing.T) {
			res, err := v.ex.Deny(ctx, del2, operator, "no")
			if err != nil {
				t.Fatal(err)
			}
			wantOutcome(t, res, executor.Failed)
		}, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := v.db.GroupCommits()
			tc.do(t)
			after, _ := v.db.GroupCommits()
			if n := after - before; n != tc.commits {
				t.Fatalf("%d commits, want %d", n, tc.commits)
			}
		})
	}
	v.verify()
}

// A record that cannot be stored stops the promotion before anything
// changes, and the steps that led to it are audited all the same. Here
// the action id is taken already (NewID gives the same id twice): the
// second record's insert fails.
func TestRecordRefusedBeforePromotion(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		d := proposal.NewDefaults()
		d.NewID = func() string { return "0190f3a2-7c4e-7a1b-9f1e-2b6c8d0e4f11" }
		ex, err := executor.New(ctx, executor.Config{DB: v.db, Sandbox: v.sb, Policy: v.holder, Audit: v.log,
			Defaults: d, Now: v.clock.Now})
		if err != nil {
			t.Fatal(err)
		}
		run := func(content string) (*executor.Result, error) {
			return ex.Run(ctx, executor.Request{TaskID: "task-1", Requester: agent,
				Data: prop("WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": content})})
		}
		res, err := run("first\n")
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, res, executor.Completed)
		if _, err := run("second\n"); err == nil {
			t.Fatal("a second record with the same action id was stored")
		}
		if c, _ := v.content("a.txt"); c != "first\n" {
			t.Fatalf("a.txt = %q: promoted without a stored record", c)
		}
		wantSteps(t, v.steps(res.ActionID),
			"received", "validated", "judged", "sandboxed", "promoted",
			"received", "validated", "judged", "sandboxed")
		v.verify()
	})
}

// The audit log must live in the executor's database, for the two to
// commit together.
func TestNewRefusesAuditElsewhere(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	ctx := context.Background()
	db, err := sqldb.Open(ctx, testdb.SQLite(t), sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	log, err := audit.New(ctx, db, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	_, err = executor.New(ctx, executor.Config{DB: v.db, Sandbox: v.sb, Policy: v.holder, Audit: log})
	if err == nil || !strings.Contains(err.Error(), "Config.Audit") {
		t.Fatalf("New with the log in another database: %v", err)
	}
}
