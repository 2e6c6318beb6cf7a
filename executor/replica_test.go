package executor_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"runtime"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/testdb"
)

// TestReplicaStartsDuringPromotion: two executors on one PostgreSQL
// database and one workspace folder, as two replicas of a node. While
// the first promotes a write (its new content written ahead, the record
// being committed "promoting"), the second starts and sweeps the sandbox,
// as a node does at start. The write is promoted all the same, and the
// workspace, the record and the audit log agree.
func TestReplicaStartsDuringPromotion(t *testing.T) {
	dsn := testdb.Postgres(t)
	a := newEnv(t, dsn)
	a.file("a.txt", "before\n")
	b := a.replica()
	const content = "after\n"
	also := func(ctx context.Context, _ *sql.Tx) error {
		// Bounded, as in TestPromotionWritesAhead: wait for the content
		// written ahead, then start the second replica.
		deadline := time.Now().Add(10 * time.Second)
		for aheadFile(t, a.dir, content) == "" && time.Now().Before(deadline) {
			runtime.Gosched()
		}
		b.open()
		t.Cleanup(b.close)
		if n, err := b.sb.Sweep(ctx); err != nil || n != 0 {
			t.Errorf("the second replica's Sweep = %d, %v; want nothing removed", n, err)
		}
		return nil
	}
	res, err := a.ex.Run(context.Background(), executor.Request{TaskID: "task-1", Requester: agent,
		Data: prop("WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": content}), Also: also})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, res, executor.Completed)
	if c, _ := a.content("a.txt"); c != content {
		t.Fatalf("a.txt = %q", c)
	}
	if left := aheadFile(t, a.dir, ""); left != "" {
		t.Fatalf("temporary file left behind: %s", left)
	}
	a.verify()
	b.verify()
}

// TestQuotaAcrossReplicas: two executors on one PostgreSQL database and one
// workspace folder, as two replicas of a node, and a requester whose
// quota is one file. The first replica checks the quota for its write and
// records it "promoting"; before its promotion is counted, the second
// runs a write of another file for the same requester, start to end. Only
// one of the two may complete: the requester holds one file at most. The
// second is refused as a check before its commit would refuse it: the
// same LIMIT_EXCEEDED, the same audit steps, its caller's Also and Then
// in the commit that records the failure.
func TestQuotaAcrossReplicas(t *testing.T) {
	dsn := testdb.Postgres(t)
	a := newEnv(t, dsn)
	a.quotas = executor.Quotas{Files: 1}
	a.reopen()
	b := a.replica()
	b.open()
	t.Cleanup(b.close)
	ctx := context.Background()
	if _, err := a.db.W.ExecContext(ctx, `CREATE TABLE caller_notes (note TEXT NOT NULL)`); err != nil {
		t.Fatal(err)
	}
	var resB *executor.Result
	var thenB []executor.Outcome
	executor.SetFaults(a.ex, func(ctx context.Context, sb *sandbox.Sandbox, st *sandbox.Staged) error {
		// The first's quota checked and its record committed promoting;
		// its promotion not yet done nor counted.
		var err error
		resB, err = b.ex.Run(ctx, executor.Request{TaskID: "task-2", Requester: agent,
			Data: prop("WRITE_FILE", map[string]string{"path": "/sandbox/b.txt", "content": "b\n"}),
			Also: func(ctx context.Context, tx *sql.Tx) error {
				_, err := tx.ExecContext(ctx, `INSERT INTO caller_notes (note) VALUES ('b')`)
				return err
			},
			Then: func(_ context.Context, _ *sql.Tx, res *executor.Result) error {
				thenB = append(thenB, res.Outcome)
				return nil
			}})
		if err != nil {
			t.Error(err)
		}
		_, err = sb.Promote(ctx, st)
		return err
	}, nil)
	resA, err := a.ex.Run(ctx, executor.Request{TaskID: "task-1", Requester: agent,
		Data: prop("WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": "a\n"})})
	if err != nil {
		t.Fatal(err)
	}
	if resB == nil {
		t.Fatal("the second replica did not run")
	}
	done := 0
	for _, r := range []*executor.Result{resA, resB} {
		if r.Outcome == executor.Completed {
			done++
		}
	}
	usage, err := a.ex.Usage(ctx, agent)
	if err != nil {
		t.Fatal(err)
	}
	if done != 1 || usage.Files != 1 {
		t.Fatalf("%d of 2 writes completed (%s, %s), usage %+v; a quota of 1 file allows one", done, resA.Outcome, resB.Outcome, usage)
	}
	wantOutcome(t, resA, executor.Completed)
	var f executor.Failure
	if err := json.Unmarshal(resB.Output, &f); err != nil {
		t.Fatal(err)
	}
	if f.Code != executor.CodeLimitExceeded || f.Limit != string(executor.LimitRequesterFiles) || f.Max != 1 || f.Got != 2 {
		t.Fatalf("second write's output %s, want LIMIT_EXCEEDED requester_files max 1 got 2", resB.Output)
	}
	wantSteps(t, b.steps(resB.ActionID), "received", "validated", "judged", "sandboxed", "failed")
	if len(thenB) != 1 || thenB[0] != executor.Failed {
		t.Fatalf("the second write's Then saw %v, want [failed]", thenB)
	}
	var notes int
	if err := a.db.R.QueryRowContext(ctx, `SELECT count(*) FROM caller_notes`).Scan(&notes); err != nil {
		t.Fatal(err)
	}
	if notes != 1 {
		t.Fatalf("the second write's Also committed %d times, want once", notes)
	}
	if _, ok := a.content("b.txt"); ok {
		t.Fatal("b.txt was written")
	}
	a.verify()
	b.verify()
}

// TestQuotaAcrossReplicasApproval: as TestQuotaAcrossReplicas, for an
// action held for confirmation and approved on the second replica while
// the first promotes another write of the same requester: the approval
// fails LIMIT_EXCEEDED, its record failed, and the requester holds one
// file.
func TestQuotaAcrossReplicasApproval(t *testing.T) {
	dsn := testdb.Postgres(t)
	a := newEnv(t, dsn)
	a.quotas = executor.Quotas{Files: 1}
	a.reopen()
	b := a.replica()
	b.open()
	t.Cleanup(b.close)
	ctx := context.Background()
	d := leaf(t, "WRITE_FILE", map[string]string{"path": "/sandbox/b.txt", "content": "b\n"})
	d.Confirmation.Required, d.Confirmation.Reason = true, "check with me"
	held, err := b.ex.Run(ctx, executor.Request{TaskID: "task-2", Requester: agent, Data: descriptorJSON(t, d)})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, held, executor.NeedsConfirmation)
	var approved *executor.Result
	executor.SetFaults(a.ex, func(ctx context.Context, sb *sandbox.Sandbox, st *sandbox.Staged) error {
		var err error
		if approved, err = b.ex.Approve(ctx, held.ActionID, executor.Host); err != nil {
			t.Error(err)
		}
		_, err = sb.Promote(ctx, st)
		return err
	}, nil)
	resA, err := a.ex.Run(ctx, executor.Request{TaskID: "task-1", Requester: agent,
		Data: prop("WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": "a\n"})})
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, resA, executor.Completed)
	if approved == nil {
		t.Fatal("the approval did not run")
	}
	wantOutcome(t, approved, executor.Failed)
	if code := errorCode(t, approved.Output); code != executor.CodeLimitExceeded {
		t.Fatalf("approval output %s, want LIMIT_EXCEEDED", approved.Output)
	}
	wantSteps(t, b.steps(held.ActionID), "received", "validated", "judged", "sandboxed", "held", "judged", "confirmed", "failed")
	usage, err := a.ex.Usage(ctx, agent)
	if err != nil {
		t.Fatal(err)
	}
	if usage.Files != 1 {
		t.Fatalf("usage %+v, want 1 file", usage)
	}
	if _, ok := a.content("b.txt"); ok {
		t.Fatal("b.txt was written")
	}
	a.verify()
	b.verify()
}

// replica is another executor's env on v's database and workspace folder,
// with v's clock, policy and settings, as a second process of a node:
// open it (and close it) yourself.
func (v *env) replica() *env {
	return &env{t: v.t, dsn: v.dsn, dir: v.dir, clock: v.clock, holder: v.holder, cooldown: v.cooldown, defaults: v.defaults, quotas: v.quotas}
}
