package executor_test

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/testdb"
)

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// TestWriteFilePromoted: a WRITE_FILE is validated, judged, staged and
// promoted; the file is there, the diff is returned, every step is in
// the audit chain with the hashes and the policy version, and the chain
// verifies.
func TestWriteFilePromoted(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		res := v.run(agent, prop("WRITE_FILE", map[string]string{"path": "/sandbox/log.txt", "content": "Hello World!\n"}))
		wantOutcome(t, res, executor.Completed)
		if got, ok := v.content("log.txt"); !ok || got != "Hello World!\n" {
			t.Fatalf("log.txt = %q, %v", got, ok)
		}
		if want := "--- /dev/null\n+++ /sandbox/log.txt\n@@ -0,0 +1 @@\n+Hello World!\n"; res.Diff != want {
			t.Errorf("diff = %q, want %q", res.Diff, want)
		}
		if res.ProposalID != "6a1f0c3e-2b4d-4e5f-8a9b-0c1d2e3f4a5b" || res.ActionID == "" || res.ActionID == res.ProposalID {
			t.Errorf("ids: action %q, proposal %q", res.ActionID, res.ProposalID)
		}
		es := v.entries(res.ActionID)
		wantSteps(t, v.steps(res.ActionID), "received", "validated", "judged", "sandboxed", "promoted")
		for _, e := range es {
			if e.Task != "task-1" || e.Actor != agent {
				t.Errorf("%s: task %q actor %q", e.Step, e.Task, e.Actor)
			}
		}
		judged, sandboxed, promoted := es[2], es[3], es[4]
		if judged.Decision != "promote" || judged.PolicyVersion != policy.Default().Version() {
			t.Errorf("judged: decision %q, policy version %q", judged.Decision, judged.PolicyVersion)
		}
		for _, e := range []audit.Entry{sandboxed, promoted} {
			if e.PreHash != "" || e.PostHash != sha("Hello World!\n") {
				t.Errorf("%s: pre %q post %q", e.Step, e.PreHash, e.PostHash)
			}
		}
		v.verify()
	})
}

// TestDeleteConfirmed: a DELETE_FILE needs confirmation; an operator
// approves; the file is gone.
func TestDeleteConfirmed(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		v.file("a.txt", "hello world\n")
		res := v.run(agent, prop("DELETE_FILE", map[string]string{"path": "/sandbox/a.txt"}))
		wantOutcome(t, res, executor.NeedsConfirmation)
		if res.Diff != "--- /sandbox/a.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-hello world\n" {
			t.Errorf("diff = %q", res.Diff)
		}
		if !strings.Contains(res.Reason, `"destructive"`) || res.Output != nil {
			t.Errorf("reason %q, output %s", res.Reason, res.Output)
		}
		if _, ok := v.content("a.txt"); !ok {
			t.Fatal("a.txt deleted before confirmation")
		}
		ps, err := v.ex.Pending(context.Background(), "task-1")
		if err != nil || len(ps) != 1 || ps[0].ActionID != res.ActionID || ps[0].Requester != agent || ps[0].Diff != res.Diff {
			t.Fatalf("Pending = %+v, %v", ps, err)
		}
		if want := []executor.PreImage{{Path: "/sandbox/a.txt", Kind: sandbox.KindFile, Size: 12, SHA256: sha("hello world\n")}}; !slices.Equal(ps[0].PreImages, want) {
			t.Errorf("pre-images = %+v, want %+v", ps[0].PreImages, want)
		}

		got, err := v.ex.Approve(context.Background(), res.ActionID, operator)
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, got, executor.Completed)
		if _, ok := v.content("a.txt"); ok {
			t.Fatal("a.txt still there after approval")
		}
		if string(got.Output) != `{"status":"success","action":"DELETE_FILE","result":{"path":"/sandbox/a.txt"}}` {
			t.Errorf("output = %s", got.Output)
		}
		wantSteps(t, v.steps(res.ActionID),
			"received", "validated", "judged", "sandboxed", "held", "judged", "confirmed", "promoted")
		es := v.entries(res.ActionID)
		if c := es[6]; c.Actor != "operator:"+operator {
			t.Errorf("confirmed by %q", c.Actor)
		}
		if ps, _ := v.ex.Pending(context.Background(), "task-1"); len(ps) != 0 {
			t.Errorf("still pending: %+v", ps)
		}
		if _, err := v.ex.Approve(context.Background(), res.ActionID, operator); !errors.Is(err, executor.ErrNoPending) {
			t.Errorf("second Approve: %v, want ErrNoPending", err)
		}
		v.verify()
	})
}

// TestSelfApprovalRefused: the proposer cannot approve its own proposal,
// even with the operator role or another letter case; someone without
// the role cannot either; both are audited; the host can.
func TestSelfApprovalRefused(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		v.file("a.txt", "x")
		res := v.run(operator, prop("DELETE_FILE", map[string]string{"path": "/sandbox/a.txt"}))
		wantOutcome(t, res, executor.NeedsConfirmation)
		ctx := context.Background()
		for _, who := range []string{operator, strings.ToUpper(operator)} {
			if _, err := v.ex.Approve(ctx, res.ActionID, who); !errors.Is(err, executor.ErrSelfApproval) {
				t.Errorf("Approve by the proposer %s: %v, want ErrSelfApproval", who, err)
			}
		}
		if _, err := v.ex.Approve(ctx, res.ActionID, other); !errors.Is(err, executor.ErrNotOperator) {
			t.Errorf("Approve by a non-operator: %v, want ErrNotOperator", err)
		}
		if _, ok := v.content("a.txt"); !ok {
			t.Fatal("a.txt deleted by a refused approval")
		}
		refused := 0
		for _, e := range v.entries(res.ActionID) {
			if e.Step == audit.StepRejected && e.Decision == "approval_refused" {
				refused++
			}
		}
		if refused != 3 {
			t.Errorf("%d refusals audited, want 3", refused)
		}
		got, err := v.ex.Approve(ctx, res.ActionID, executor.Host)
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, got, executor.Completed)
		if _, ok := v.content("a.txt"); ok {
			t.Fatal("a.txt still there after the host approved")
		}
		v.verify()
	})
}

// TestDenied: an operator denies; the action fails with the reason and
// nothing changes.
func TestDenied(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		v.file("a.txt", "keep me\n")
		res := v.run(agent, prop("RENAME_FILE", map[string]string{"source": "/sandbox/a.txt", "destination": "/sandbox/b.md"}))
		wantOutcome(t, res, executor.NeedsConfirmation)
		ctx := context.Background()
		if _, err := v.ex.Deny(ctx, res.ActionID, other, "no"); !errors.Is(err, executor.ErrNotOperator) {
			t.Errorf("Deny by a non-operator: %v", err)
		}
		got, err := v.ex.Deny(ctx, res.ActionID, operator, "not now")
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, got, executor.Failed)
		want := `{"error_code":"CONFIRMATION_DENIED","message":"An operator denied the action.","reason":"not now"}`
		if string(got.Output) != want {
			t.Errorf("output = %s, want %s", got.Output, want)
		}
		if c, ok := v.content("a.txt"); !ok || c != "keep me\n" {
			t.Error("a.txt changed by a denied action")
		}
		if _, ok := v.content("b.md"); ok {
			t.Error("b.md made by a denied action")
		}
		if _, err := v.ex.Approve(ctx, res.ActionID, operator); !errors.Is(err, executor.ErrNoPending) {
			t.Errorf("Approve after Deny: %v, want ErrNoPending", err)
		}
		if _, err := v.ex.Deny(ctx, res.ActionID, operator, "again"); !errors.Is(err, executor.ErrNoPending) {
			t.Errorf("Deny after Deny: %v, want ErrNoPending", err)
		}
		if _, err := v.ex.Approve(ctx, "no-such-action", operator); !errors.Is(err, executor.ErrNoPending) {
			t.Errorf("Approve of an unknown action: %v, want ErrNoPending", err)
		}
		steps := v.steps(res.ActionID)
		if steps[len(steps)-1] != "denied" {
			t.Errorf("steps %v do not end with denied", steps)
		}
		v.verify()
	})
}

// TestChangedBeforeApproval: the file changes between the request for
// confirmation and the approval: the operator is asked again with the new
// diff, and a second approval promotes it.
func TestChangedBeforeApproval(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		v.file("a.txt", "first\n")
		ctx := context.Background()
		res := v.run(agent, prop("DELETE_FILE", map[string]string{"path": "/sandbox/a.txt"}))
		wantOutcome(t, res, executor.NeedsConfirmation)
		v.file("a.txt", "second\n")

		again, err := v.ex.Approve(ctx, res.ActionID, operator)
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, again, executor.NeedsConfirmation)
		if again.ActionID != res.ActionID || again.Diff != "--- /sandbox/a.txt\n+++ /dev/null\n@@ -1 +0,0 @@\n-second\n" {
			t.Errorf("new diff %q (action %s)", again.Diff, again.ActionID)
		}
		if !strings.Contains(again.Reason, "changed since confirmation") {
			t.Errorf("reason = %q", again.Reason)
		}
		if c, _ := v.content("a.txt"); c != "second\n" {
			t.Fatal("a.txt deleted without a confirmation of what it now holds")
		}
		p, err := v.ex.PendingAction(ctx, res.ActionID)
		if err != nil || p.Diff != again.Diff || p.PreImages[0].SHA256 != sha("second\n") {
			t.Fatalf("pending record not updated: %+v, %v", p, err)
		}

		done, err := v.ex.Approve(ctx, res.ActionID, operator)
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, done, executor.Completed)
		if _, ok := v.content("a.txt"); ok {
			t.Fatal("a.txt still there")
		}
		wantSteps(t, v.steps(res.ActionID),
			"received", "validated", "judged", "sandboxed", "held",
			"judged", "sandboxed", "held",
			"judged", "confirmed", "promoted")
		v.verify()
	})
}

// TestRollback: a promoted write is rolled back (a new file removed, a
// modified one restored); the same proposal again within the cooldown
// needs confirmation, from any requester, and not after it; a
// rollback over a file changed since is refused and changes nothing.
func TestRollback(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		v.file("a.txt", "original\n")
		write := prop("WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": "agent's\n"})
		res := v.run(agent, write)
		wantOutcome(t, res, executor.Completed)
		if err := v.ex.Rollback(ctx, res.ActionID); err != nil {
			t.Fatal(err)
		}
		if c, _ := v.content("a.txt"); c != "original\n" {
			t.Fatalf("a.txt = %q after rollback", c)
		}
		if err := v.ex.Rollback(ctx, res.ActionID); !errors.Is(err, executor.ErrNotPromoted) || !errors.Is(err, executor.ErrAlreadyRolledBack) {
			t.Errorf("second Rollback: %v, want ErrAlreadyRolledBack (an ErrNotPromoted)", err)
		}
		es := v.entries(res.ActionID)
		last := es[len(es)-1]
		if last.Step != audit.StepRolledBack || last.Actor != executor.Host || last.Decision != "restored" ||
			last.PreHash != sha("agent's\n") || last.PostHash != sha("original\n") {
			t.Errorf("rollback entry %+v", last)
		}

		v.clock.Advance(5 * time.Minute)
		repeat := v.run(agent, write)
		wantOutcome(t, repeat, executor.NeedsConfirmation)
		if !strings.Contains(repeat.Reason, policy.RuleRollbackCooldown) {
			t.Errorf("reason = %q", repeat.Reason)
		}
		if c, _ := v.content("a.txt"); c != "original\n" {
			t.Fatal("a repeat within the cooldown was promoted")
		}
		if r := v.run(other, write); r.Outcome != executor.NeedsConfirmation {
			t.Errorf("another requester's proposal: %s", r.Outcome)
		}
		v.file("a.txt", "original\n")

		v.clock.Advance(6 * time.Minute)
		after := v.run(agent, write)
		wantOutcome(t, after, executor.Completed)

		// Someone changes the file after the promotion: no rollback.
		v.file("a.txt", "edited by hand\n")
		if err := v.ex.Rollback(ctx, after.ActionID); !errors.Is(err, sandbox.ErrDiverged) {
			t.Fatalf("Rollback over a changed file: %v, want ErrDiverged", err)
		}
		if c, _ := v.content("a.txt"); c != "edited by hand\n" {
			t.Fatalf("a refused rollback changed a.txt to %q", c)
		}
		es = v.entries(after.ActionID)
		if last := es[len(es)-1]; last.Step != audit.StepRolledBack || last.Decision != "refused" {
			t.Errorf("refused rollback audited as %s/%s", last.Step, last.Decision)
		}
		// Put the post-image back: the rollback is possible again.
		v.file("a.txt", "agent's\n")
		if err := v.ex.Rollback(ctx, after.ActionID); err != nil {
			t.Fatal(err)
		}
		if c, _ := v.content("a.txt"); c != "original\n" {
			t.Fatalf("a.txt = %q", c)
		}

		// A new file is removed by its rollback.
		created := v.run(agent, prop("WRITE_FILE", map[string]string{"path": "/sandbox/new.md", "content": "new"}))
		wantOutcome(t, created, executor.Completed)
		if err := v.ex.Rollback(ctx, created.ActionID); err != nil {
			t.Fatal(err)
		}
		if _, ok := v.content("new.md"); ok {
			t.Fatal("new.md still there after rollback")
		}
		if err := v.ex.Rollback(ctx, "no-such-action"); !errors.Is(err, executor.ErrNotPromoted) {
			t.Errorf("Rollback of an unknown action: %v", err)
		}
		v.verify()
	})
}

// TestPendingSurvivesRestart: a pending action is found and approved by
// an Executor opened anew on the same database.
func TestPendingSurvivesRestart(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		v.file("a.txt", "x\n")
		res := v.run(agent, prop("DELETE_FILE", map[string]string{"path": "/sandbox/a.txt"}))
		wantOutcome(t, res, executor.NeedsConfirmation)
		v.reopen()
		ctx := context.Background()
		ps, err := v.ex.Pending(ctx, "task-1")
		if err != nil || len(ps) != 1 || ps[0].ActionID != res.ActionID || ps[0].Diff != res.Diff {
			t.Fatalf("Pending after restart = %+v, %v", ps, err)
		}
		if all, _ := v.ex.Pending(ctx, ""); len(all) != 1 {
			t.Errorf("Pending of every task = %d actions", len(all))
		}
		if none, _ := v.ex.Pending(ctx, "another-task"); len(none) != 0 {
			t.Errorf("Pending of another task = %+v", none)
		}
		got, err := v.ex.Approve(ctx, ps[0].ActionID, operator)
		if err != nil {
			t.Fatal(err)
		}
		wantOutcome(t, got, executor.Completed)
		if _, ok := v.content("a.txt"); ok {
			t.Fatal("a.txt still there")
		}
		v.verify()
	})
}

// TestNotAllowed: run_command and spawn_process in any case, and a
// descriptor of a type the core never runs, are ACTION_NOT_ALLOWED.
func TestNotAllowed(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	for _, data := range [][]byte{
		[]byte(`{"schema_version":"1.2.0","action":"run_command","args":{"command":"rm -rf /"}}`),
		prop("RUN_COMMAND", map[string]string{"command": "ls"}),
		prop("spawn_process", nil),
		[]byte(`{"descriptor_version":"1.0","action_type":"COMMAND_EXECUTION"}`),
	} {
		res := v.run(agent, data)
		wantOutcome(t, res, executor.Failed)
		if c := errorCode(t, res.Output); c != "ACTION_NOT_ALLOWED" {
			t.Errorf("%s: error_code %s", data, c)
		}
		wantSteps(t, v.steps(res.ActionID), "received", "rejected")
	}
	v.verify()
}

const secretsPolicy = `
@id("all") permit (principal, action, resource in Path::"/sandbox/");
@id("no-secrets") @reason("secrets/ is off limits")
forbid (principal, action, resource in Path::"/sandbox/secrets/");
@id("ask-private") @confirm("private/ is read with confirmation")
permit (principal, action == Action::"READ_FILE", resource in Path::"/sandbox/private/");
`

// TestPolicyDenies: an operator policy's forbid blocks the action with
// ACTION_NOT_ALLOWED, its reasons and the policy version; nothing is
// staged.
func TestPolicyDenies(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	eng, err := policy.Parse("ops.cedar", []byte(secretsPolicy))
	if err != nil {
		t.Fatal(err)
	}
	v.holder.Swap(eng)
	v.file("secrets/key.txt", "s3cret")
	res := v.run(agent, prop("WRITE_FILE", map[string]string{"path": "/sandbox/secrets/key.txt", "content": "mine"}))
	wantOutcome(t, res, executor.Failed)
	var f executor.Failure
	if err := json.Unmarshal(res.Output, &f); err != nil {
		t.Fatal(err)
	}
	if f.Code != "ACTION_NOT_ALLOWED" || f.PolicyVersion != eng.Version() ||
		!slices.ContainsFunc(f.Reasons, func(r string) bool { return strings.Contains(r, "no-secrets") }) {
		t.Errorf("failure = %+v", f)
	}
	if c, _ := v.content("secrets/key.txt"); c != "s3cret" {
		t.Fatal("a denied write reached the file")
	}
	wantSteps(t, v.steps(res.ActionID), "received", "validated", "judged")
	if j := v.entries(res.ActionID)[2]; j.Decision != "block" || j.PolicyVersion != eng.Version() {
		t.Errorf("judged %q by %q", j.Decision, j.PolicyVersion)
	}
}

// TestReadNeedsConfirmation: a policy may want a read confirmed; it runs
// when approved, and a file that is not UTF-8 comes back in base64.
func TestReadNeedsConfirmation(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	eng, err := policy.Parse("ops.cedar", []byte(secretsPolicy))
	if err != nil {
		t.Fatal(err)
	}
	v.holder.Swap(eng)
	v.file("private/bin.txt", "\xff\x00\x01")
	res := v.run(agent, prop("READ_FILE", map[string]string{"path": "/sandbox/private/bin.txt"}))
	wantOutcome(t, res, executor.NeedsConfirmation)
	if res.Diff != "" || !strings.Contains(res.Reason, "private/ is read with confirmation") {
		t.Errorf("diff %q reason %q", res.Diff, res.Reason)
	}
	got, err := v.ex.Approve(context.Background(), res.ActionID, executor.Host)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, got, executor.Completed)
	want := `{"status":"success","action":"READ_FILE","result":{"content":"/wAB","encoding":"base64"}}`
	if string(got.Output) != want {
		t.Errorf("output %s, want %s", got.Output, want)
	}
	wantSteps(t, v.steps(res.ActionID), "received", "validated", "judged", "held", "judged", "confirmed", "completed")
}

// TestApprovalJudgedAgain: a policy that denies by the time of approval
// wins over the confirmation.
func TestApprovalJudgedAgain(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	v.file("secrets/a.txt", "x")
	res := v.run(agent, prop("DELETE_FILE", map[string]string{"path": "/sandbox/secrets/a.txt"}))
	wantOutcome(t, res, executor.NeedsConfirmation)
	eng, err := policy.Parse("ops.cedar", []byte(secretsPolicy))
	if err != nil {
		t.Fatal(err)
	}
	v.holder.Swap(eng)
	got, err := v.ex.Approve(context.Background(), res.ActionID, operator)
	if err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, got, executor.Failed)
	if c := errorCode(t, got.Output); c != "ACTION_NOT_ALLOWED" {
		t.Errorf("error_code %s", c)
	}
	if _, ok := v.content("secrets/a.txt"); !ok {
		t.Fatal("deleted although the policy now forbids it")
	}
	if _, err := v.ex.Approve(context.Background(), res.ActionID, operator); !errors.Is(err, executor.ErrNoPending) {
		t.Errorf("a failed action is still pending: %v", err)
	}
}

// TestLimitExceeded: a write larger than the sandbox's file cap fails
// with LIMIT_EXCEEDED and writes nothing.
func TestLimitExceeded(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	big := strings.Repeat("x", int(sandbox.DefaultLimits().MaxFileSize)+1)
	res := v.run(operator, prop("WRITE_FILE", map[string]string{"path": "/sandbox/big.txt", "content": big}))
	wantOutcome(t, res, executor.Failed)
	var f executor.Failure
	if err := json.Unmarshal(res.Output, &f); err != nil {
		t.Fatal(err)
	}
	if f.Code != executor.CodeLimitExceeded || f.Limit != string(sandbox.LimitFileSize) {
		t.Errorf("failure = %+v", f)
	}
	if _, ok := v.content("big.txt"); ok {
		t.Fatal("big.txt written")
	}
	wantSteps(t, v.steps(res.ActionID), "received", "validated", "judged", "failed")
}

// TestConcurrentApprovals: of two approvals at once, one promotes and
// the other finds nothing pending.
func TestConcurrentApprovals(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		v.file("a.txt", "x")
		res := v.run(agent, prop("DELETE_FILE", map[string]string{"path": "/sandbox/a.txt"}))
		wantOutcome(t, res, executor.NeedsConfirmation)
		var wg sync.WaitGroup
		results := make([]error, 2)
		outcomes := make([]executor.Outcome, 2)
		for i, who := range []string{operator, executor.Host} {
			wg.Go(func() {
				r, err := v.ex.Approve(context.Background(), res.ActionID, who)
				results[i] = err
				if r != nil {
					outcomes[i] = r.Outcome
				}
			})
		}
		wg.Wait()
		completed, none := 0, 0
		for i := range results {
			switch {
			case results[i] == nil && outcomes[i] == executor.Completed:
				completed++
			case errors.Is(results[i], executor.ErrNoPending):
				none++
			default:
				t.Errorf("approval %d: %v, %s", i, results[i], outcomes[i])
			}
		}
		if completed != 1 || none != 1 {
			t.Errorf("%d completed, %d found nothing pending", completed, none)
		}
		promoted := 0
		for _, s := range v.steps(res.ActionID) {
			if s == "promoted" {
				promoted++
			}
		}
		if promoted != 1 {
			t.Errorf("promoted %d times", promoted)
		}
		v.verify()
	})
}

// TestInvalidRequest: a requester or task id that cannot be recorded is
// the caller's error, not a result.
func TestInvalidRequest(t *testing.T) {
	v := newEnv(t, testdb.SQLite(t))
	ctx := context.Background()
	for _, req := range []executor.Request{
		{Requester: "", Data: prop("THINK", nil)},
		{Requester: "bc1p\x00", Data: prop("THINK", nil)},
		{Requester: agent, TaskID: "t\n1", Data: prop("THINK", nil)},
		{Requester: strings.Repeat("a", 201), Data: prop("THINK", nil)},
	} {
		if _, err := v.ex.Run(ctx, req); !errors.Is(err, executor.ErrInvalidIdentity) {
			t.Errorf("Run(%q, %q): %v, want ErrInvalidIdentity", req.Requester, req.TaskID, err)
		}
	}
}

// An approval's before runs in its first commit: its error stops the
// approval before anything runs and the action waits again. An approval
// that finds another action of the task being promoted fails with
// ErrBusy, and nothing runs; once the other is done, it goes through.
func TestApprovalBoundToItsTask(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		v.file("a.txt", "a\n")
		v.file("b.txt", "b\n")
		hold := func(p string) string {
			t.Helper()
			res, err := v.ex.Run(ctx, executor.Request{TaskID: "task-1", Requester: agent, Data: prop("DELETE_FILE", map[string]string{"path": p})})
			if err != nil || res.Outcome != executor.NeedsConfirmation {
				t.Fatalf("hold %s: %+v %v", p, res, err)
			}
			return res.ActionID
		}
		a, b := hold("/sandbox/a.txt"), hold("/sandbox/b.txt")
		waiting := func(want ...string) {
			t.Helper()
			ps, err := v.ex.Pending(ctx, "task-1")
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range ps {
				got = append(got, p.ActionID)
			}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("pending %v, want %v", got, want)
			}
		}

		ended := errors.New("the task ended")
		if _, err := v.ex.ApproveThen(ctx, a, operator, func(context.Context, *sql.Tx) error { return ended }, nil); !errors.Is(err, ended) {
			t.Fatalf("approval whose before fails: %v", err)
		}
		if _, ok := v.content("a.txt"); !ok {
			t.Fatal("the approval ran although its before failed")
		}
		waiting(a, b)
		// The log ends on the refusal, not on a step that led nowhere.
		if es := v.entries(a); es[len(es)-1].Step != audit.StepRejected || es[len(es)-1].Decision != "refused" || !strings.Contains(es[len(es)-1].Reason, "the task ended") {
			t.Fatalf("the refused approval's last audit entry: %+v", es[len(es)-1])
		}

		setState := func(id, state string) {
			t.Helper()
			if _, err := v.db.W.ExecContext(ctx, v.db.Dialect.Rebind(`UPDATE executor_actions SET state = ? WHERE action_id = ?`), state, id); err != nil {
				t.Fatal(err)
			}
		}
		setState(a, "promoting") // as an approval of a does between its two commits
		if _, err := v.ex.Approve(ctx, b, operator); !errors.Is(err, executor.ErrBusy) || !strings.Contains(err.Error(), a) {
			t.Fatalf("approval while another action of the task is promoted: %v", err)
		}
		if _, ok := v.content("b.txt"); !ok {
			t.Fatal("the busy approval ran")
		}
		waiting(b)
		setState(a, "pending")
		if res, err := v.ex.Approve(ctx, b, operator); err != nil || res.Outcome != executor.Completed {
			t.Fatalf("approval once the other is done: %+v %v", res, err)
		}
		if _, ok := v.content("b.txt"); ok {
			t.Fatal("the approval did not run")
		}
		waiting(a)
		v.verify()
	})
}
