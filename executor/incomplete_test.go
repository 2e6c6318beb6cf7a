package executor_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/testdb"
)

// errDisk is the failure the tests' disk injects.
var errDisk = errors.New("injected: the disk failed, and failed the undo too")

// halfWay is a promotion (or rollback) that the disk stopped half-way: it
// gets as far as writing path with content, through the sandbox itself,
// and fails with sandbox.ErrIncomplete; the action's other paths are left
// as they were.
func halfWay(t *testing.T, path, content string) func(ctx context.Context, sb *sandbox.Sandbox) error {
	return func(ctx context.Context, sb *sandbox.Sandbox) error {
		st, err := sb.Stage(ctx, []sandbox.Change{sandbox.Write{Path: path, Content: []byte(content)}})
		if err != nil {
			t.Errorf("half-way stage: %v", err)
			return err
		}
		if _, err := sb.Promote(ctx, st); err != nil {
			t.Errorf("half-way promotion: %v", err)
			return err
		}
		return errors.Join(sandbox.ErrIncomplete, &sandbox.OpError{Op: "write", Path: "/sandbox/a.txt", Err: errDisk})
	}
}

// promoteHalfWay sets v's executor to promote half-way (halfWay), once;
// the promotions after it reach the sandbox again.
func (v *env) promoteHalfWay(path, content string) {
	t := v.t.(*testing.T)
	half := halfWay(t, path, content)
	executor.SetFaults(v.ex, func(ctx context.Context, sb *sandbox.Sandbox, _ *sandbox.Staged) error {
		executor.SetFaults(v.ex, nil, nil)
		return half(ctx, sb)
	}, nil)
}

// twoWrites is a composite that rewrites a.txt and b.txt (promoted at
// once by the default policy), and the workspace it starts from.
func (v *env) twoWrites() []byte {
	v.file("a.txt", "a before\n")
	v.file("b.txt", "b before\n")
	return composite(v.t,
		leaf(v.t, "WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": "a after\n"}),
		leaf(v.t, "WRITE_FILE", map[string]string{"path": "/sandbox/b.txt", "content": "b after\n"}),
	)
}

// actions returns the records of task-1's actions.
func (v *env) actions() []executor.Action {
	v.t.Helper()
	acts, err := v.ex.Actions(context.Background(), "task-1")
	if err != nil {
		v.t.Fatal(err)
	}
	return acts
}

// action returns the record of actionID among task-1's.
func (v *env) action(actionID string) executor.Action {
	v.t.Helper()
	for _, a := range v.actions() {
		if a.ActionID == actionID {
			return a
		}
	}
	v.t.Fatalf("no record of action %s", actionID)
	return executor.Action{}
}

// wantUndone checks that the action actionID, whose promotion was left
// half-way, was undone at once: a.txt and b.txt hold their pre-images,
// its record failed with the reason, and the audit's last entry is the
// host's recovery.
func (v *env) wantUndone(actionID string) {
	v.t.Helper()
	for p, want := range map[string]string{"a.txt": "a before\n", "b.txt": "b before\n"} {
		if c, _ := v.content(p); c != want {
			v.t.Errorf("%s = %q, want its pre-image %q", p, c, want)
		}
	}
	if a := v.action(actionID); a.State != "failed" || !strings.Contains(a.Reason, "interrupted during promotion; its effects were undone") {
		v.t.Errorf("record: state %s, reason %q; want failed, undone", a.State, a.Reason)
	}
	es := v.entries(actionID)
	if last := es[len(es)-1]; last.Step != audit.StepFailed || last.Decision != "recovered" || last.Actor != executor.Host ||
		!strings.Contains(last.Reason, "its effects were undone") {
		v.t.Errorf("last audit entry: %s %s by %s (%q), want the host's failed/recovered", last.Step, last.Decision, last.Actor, last.Reason)
	}
}

// TestIncompletePromotionUndoneAtOnce: a promotion the sandbox leaves
// half-way (one path written, the other not, and the undo failing) is
// undone in the running process, as the next start's recovery would: the
// files are back, the action failed with the reason (the Result, the
// record, the audit, the caller's Then in the same commit), and the
// task's held action can be approved at once rather than refused as busy
// until a restart.
func TestIncompletePromotionUndoneAtOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		n := newThenNotes(t, v)
		v.file("c.txt", "c\n")
		held := v.run(agent, prop("DELETE_FILE", map[string]string{"path": "/sandbox/c.txt"}))
		wantOutcome(t, held, executor.NeedsConfirmation)

		data := v.twoWrites()
		v.promoteHalfWay("/sandbox/b.txt", "b after\n")
		res, err := v.ex.Run(ctx, executor.Request{TaskID: "task-1", Requester: agent, Data: data, Then: n.then(nil)})
		var id string
		if err != nil {
			t.Errorf("Run of a promotion left half-way: %v; want a failed Result", err)
			id = v.otherThan(held.ActionID).ActionID
		} else {
			id = res.ActionID
			wantOutcome(t, res, executor.Failed)
			if !strings.Contains(res.Reason, "interrupted during promotion; its effects were undone") || errorCode(t, res.Output) != executor.CodeExecutionFailed {
				t.Errorf("Result: reason %q, output %s", res.Reason, res.Output)
			}
		}
		v.wantUndone(id)
		if got := n.of(id); got != "failed" {
			t.Errorf("the caller's Then recorded %q, want failed", got)
		}

		ok, err := v.ex.Approve(ctx, held.ActionID, operator)
		if err != nil {
			t.Fatalf("approval of the task's other action: %v", err)
		}
		wantOutcome(t, ok, executor.Completed)
		if _, there := v.content("c.txt"); there {
			t.Error("the approved delete did not run")
		}
		if n, err := v.ex.RecoverInterrupted(ctx); n != 0 || err != nil {
			t.Errorf("RecoverInterrupted after = %d, %v; want nothing left", n, err)
		}
		v.verify()
	})
}

// TestIncompleteApprovalUndoneAtOnce: the same for an approved action:
// ApproveThen returns the failed Result, its then records it, and the
// task's next approval runs.
func TestIncompleteApprovalUndoneAtOnce(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		n := newThenNotes(t, v)
		v.file("c.txt", "c\n")
		data := composite(t,
			leaf(t, "WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": "a after\n"}),
			leaf(t, "WRITE_FILE", map[string]string{"path": "/sandbox/b.txt", "content": "b after\n"}),
			leaf(t, "DELETE_FILE", map[string]string{"path": "/sandbox/c.txt"}),
		)
		v.file("a.txt", "a before\n")
		v.file("b.txt", "b before\n")
		first := v.run(agent, data)
		wantOutcome(t, first, executor.NeedsConfirmation)
		v.file("d.txt", "d\n")
		second := v.run(agent, prop("DELETE_FILE", map[string]string{"path": "/sandbox/d.txt"}))
		wantOutcome(t, second, executor.NeedsConfirmation)

		v.promoteHalfWay("/sandbox/b.txt", "b after\n")
		res, err := v.ex.ApproveThen(ctx, first.ActionID, operator, nil, n.then(nil))
		if err != nil {
			t.Fatalf("approval of a promotion left half-way: %v; want a failed Result", err)
		}
		wantOutcome(t, res, executor.Failed)
		v.wantUndone(first.ActionID)
		if c, _ := v.content("c.txt"); c != "c\n" {
			t.Errorf("c.txt = %q, want it kept", c)
		}
		if got := n.of(first.ActionID); got != "failed" {
			t.Errorf("the approval's then recorded %q, want failed", got)
		}
		if res, err := v.ex.Approve(ctx, second.ActionID, operator); err != nil || res.Outcome != executor.Completed {
			t.Fatalf("approval of the task's other action: %+v, %v", res, err)
		}
		v.verify()
	})
}

// TestIncompleteUndoFails: when the undo in place fails too (here a.txt
// holds neither image any more, which sandbox.Recover refuses), the
// record stays promoting for the next start, the error says both, the
// caller's Then never runs, and the task's approvals wait as before; the
// start's recovery then settles it.
func TestIncompleteUndoFails(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		n := newThenNotes(t, v)
		v.file("c.txt", "c\n")
		held := v.run(agent, prop("DELETE_FILE", map[string]string{"path": "/sandbox/c.txt"}))
		data := v.twoWrites()
		half := halfWay(t, "/sandbox/b.txt", "b after\n")
		executor.SetFaults(v.ex, func(ctx context.Context, sb *sandbox.Sandbox, _ *sandbox.Staged) error {
			err := half(ctx, sb)
			v.file("a.txt", "something else\n")
			return err
		}, nil)
		res, err := v.ex.Run(ctx, executor.Request{TaskID: "task-1", Requester: agent, Data: data, Then: n.then(nil)})
		if res != nil || !errors.Is(err, sandbox.ErrIncomplete) || !errors.Is(err, sandbox.ErrDiverged) || !strings.Contains(err.Error(), "undoing it failed too") {
			t.Fatalf("Run = %+v, %v; want the promotion's and the undo's errors", res, err)
		}
		last := v.otherThan(held.ActionID)
		if last.State != "promoting" {
			t.Fatalf("record %s, want promoting for the next start", last.State)
		}
		if k := n.count(); k != 0 {
			t.Errorf("the caller's Then ran %d times", k)
		}
		if _, err := v.ex.Approve(ctx, held.ActionID, operator); !errors.Is(err, executor.ErrBusy) {
			t.Errorf("approval while the other is left promoting: %v, want ErrBusy", err)
		}

		v.file("a.txt", "a before\n") // the operator puts it back
		v.reopen()
		if n, err := v.ex.RecoverInterrupted(ctx); n != 1 || err != nil {
			t.Fatalf("RecoverInterrupted = %d, %v", n, err)
		}
		v.wantUndone(last.ActionID)
		v.verify()
	})
}

// TestIncompleteRollbackCompleted: a rollback the sandbox leaves
// half-way (b.txt restored, a.txt not) is completed at once from the
// snapshot rather than recorded as promoted over a workspace that no
// longer holds the promotion: both files are back, the record is rolled
// back, audited as the host's recovery, and a second rollback is refused
// as done.
func TestIncompleteRollbackCompleted(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		res := v.run(agent, v.twoWrites())
		wantOutcome(t, res, executor.Completed)
		half := halfWay(t, "/sandbox/b.txt", "b before\n")
		executor.SetFaults(v.ex, nil, func(ctx context.Context, _ *sandbox.Sandbox, _ *sandbox.Snapshot) error { return half(ctx, v.sb) })
		if err := v.ex.Rollback(ctx, res.ActionID); err != nil {
			t.Errorf("Rollback left half-way: %v; want it completed", err)
		}
		for p, want := range map[string]string{"a.txt": "a before\n", "b.txt": "b before\n"} {
			if c, _ := v.content(p); c != want {
				t.Errorf("%s = %q, want its pre-image", p, c)
			}
		}
		if a := v.action(res.ActionID); a.State != "rolled_back" {
			t.Errorf("record %s, want rolled_back", a.State)
		}
		es := v.entries(res.ActionID)
		if last := es[len(es)-1]; last.Step != audit.StepRolledBack || last.Decision != "recovered" {
			t.Errorf("last audit entry: %s %s (%q), want rolled_back/recovered", last.Step, last.Decision, last.Reason)
		}
		if err := v.ex.Rollback(ctx, res.ActionID); !errors.Is(err, executor.ErrAlreadyRolledBack) {
			t.Errorf("second Rollback: %v", err)
		}
		v.verify()
	})
}

// otherThan returns the newest action recorded other than id.
func (v *env) otherThan(id string) executor.Action {
	var last executor.Action
	for _, a := range v.actions() {
		if a.ActionID != id {
			last = a
		}
	}
	return last
}

// TestRollbackTakenUpAsInterrupted: a rollback that stands still past
// reconcile_after is taken up by another process's recovery pass (here:
// one whose cutoff is after the rollback's claim), which completes it and
// takes its bytes off the requester's usage. The rollback that was live
// all along must then record nothing more: before, its commit found the
// record rolled back already, left it, and took the bytes off the usage
// a second time, so that the requester's other, promoted, write no
// longer counted against its quotas.
func TestRollbackTakenUpAsInterrupted(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		kept := v.run(agent, prop("WRITE_FILE", map[string]string{"path": "/sandbox/kept.txt", "content": "kept, and counted\n"}))
		wantOutcome(t, kept, executor.Completed)
		want, err := v.ex.Usage(ctx, agent)
		if err != nil || want.Bytes == 0 {
			t.Fatalf("usage after the first write: %+v %v", want, err)
		}
		res := v.run(agent, prop("WRITE_FILE", map[string]string{"path": "/sandbox/undone.txt", "content": "undone\n"}))
		wantOutcome(t, res, executor.Completed)
		executor.SetFaults(v.ex, nil, func(ctx context.Context, _ *sandbox.Sandbox, snap *sandbox.Snapshot) error {
			if err := v.sb.Rollback(ctx, snap); err != nil {
				return err
			}
			// reconcile_after has passed since the rollback's claim.
			v.clock.Advance(time.Hour)
			n, err := v.ex.RecoverInterruptedWith(ctx, executor.RecoverOptions{Before: v.clock.Now().Add(-time.Minute)})
			if n != 1 || err != nil {
				t.Errorf("the other process's recovery: %d %v", n, err)
			}
			return nil
		})
		_ = v.ex.Rollback(ctx, res.ActionID) // taken from it: an error, or not
		if got, err := v.ex.Usage(ctx, agent); err != nil || got != want {
			t.Errorf("usage = %+v %v, want %+v: the write still promoted counts", got, err, want)
		}
		if _, ok := v.content("undone.txt"); ok {
			t.Error("undone.txt is back")
		}
		if a := v.action(res.ActionID); a.State != "rolled_back" {
			t.Errorf("record %s, want rolled_back", a.State)
		}
		v.verify()
	})
}

// TestRefusedRollbackTakenUpAsInterrupted: a rollback that stands still
// past reconcile_after, is completed meanwhile by another process's
// recovery and then finds the sandbox refusing it, no longer holds the
// action: its release (back to promoted, audited "refused") must fail
// with ErrTakenUp and record nothing. Before, the release found the
// record rolled back, left it, and committed the refusal all the same.
func TestRefusedRollbackTakenUpAsInterrupted(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		res := v.run(agent, prop("WRITE_FILE", map[string]string{"path": "/sandbox/undone.txt", "content": "undone\n"}))
		wantOutcome(t, res, executor.Completed)
		executor.SetFaults(v.ex, nil, func(ctx context.Context, _ *sandbox.Sandbox, snap *sandbox.Snapshot) error {
			v.clock.Advance(time.Hour)
			n, err := v.ex.RecoverInterruptedWith(ctx, executor.RecoverOptions{Before: v.clock.Now().Add(-time.Minute)})
			if n != 1 || err != nil {
				t.Errorf("the other process's recovery: %d %v", n, err)
			}
			return errors.New("refused by the sandbox")
		})
		if err := v.ex.Rollback(ctx, res.ActionID); !errors.Is(err, executor.ErrTakenUp) {
			t.Errorf("rollback: %v, want ErrTakenUp", err)
		}
		if a := v.action(res.ActionID); a.State != "rolled_back" {
			t.Errorf("record %s, want rolled_back", a.State)
		}
		if es := v.entries(res.ActionID); es[len(es)-1].Decision != "recovered" {
			t.Errorf("last audit entry %+v, want the recovery's", es[len(es)-1])
		}
		v.verify()
	})
}

// recoveryStandingStill starts, on a goroutine of its own, another
// process's recovery pass, reconcile_after past the action's last change
// (the clock moves an hour), and returns once that pass has read the
// record of the action it takes up: it then stands still there until
// resume is called, which returns what the pass returned.
func (v *env) recoveryStandingStill(t *testing.T) (resume func() (int, error)) {
	t.Helper()
	var once sync.Once
	read, goOn := make(chan struct{}), make(chan struct{})
	executor.SetRecovering(v.ex, func(string) {
		once.Do(func() { close(read) })
		<-goOn
	})
	type result struct {
		n   int
		err error
	}
	done := make(chan result, 1)
	v.clock.Advance(time.Hour)
	before := v.clock.Now().Add(-time.Minute)
	go func() {
		n, err := v.ex.RecoverInterruptedWith(context.Background(), executor.RecoverOptions{Before: before})
		done <- result{n, err}
	}()
	select {
	case <-read:
	case r := <-done:
		t.Fatalf("the other process's recovery took nothing up: %d, %v", r.n, r.err)
	}
	return func() (int, error) {
		close(goOn)
		r := <-done
		executor.SetRecovering(v.ex, nil)
		return r.n, r.err
	}
}

// TestPromotedWhileRecoveryStandsStill: a promotion stands still past
// reconcile_after, its files written; another process's recovery reads
// its record, promoting, and stands still in turn; the promotion's
// commit (promoted) lands; then the recovery goes on. The workspace must
// agree with the record: before, the recovery put the file back to its
// pre-image first, then found the record no longer promoting and left
// it promoted, the write undone under it.
func TestPromotedWhileRecoveryStandsStill(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		v.file("a.txt", "before\n")
		var resume func() (int, error)
		executor.SetFaults(v.ex, func(ctx context.Context, sb *sandbox.Sandbox, st *sandbox.Staged) error {
			if _, err := sb.Promote(ctx, st); err != nil {
				return err
			}
			resume = v.recoveryStandingStill(t)
			return nil
		}, nil)
		res, err := v.ex.Run(ctx, executor.Request{TaskID: "task-1", Requester: agent,
			Data: prop("WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": "after\n"})})
		executor.SetFaults(v.ex, nil, nil)
		if resume == nil {
			t.Fatalf("Run = %+v, %v before its promotion", res, err)
		}
		n, rerr := resume()
		acts := v.actions()
		a := acts[len(acts)-1]
		c, _ := v.content("a.txt")
		switch a.State {
		case "promoted":
			if err != nil || res.Outcome != executor.Completed {
				t.Errorf("record promoted, but Run = %+v, %v", res, err)
			}
			if c != "after\n" {
				t.Errorf("record promoted, but a.txt = %q (the recovery: %d, %v)", c, n, rerr)
			}
		case "failed":
			if !errors.Is(err, executor.ErrTakenUp) {
				t.Errorf("record failed by the recovery, but Run = %+v, %v; want ErrTakenUp", res, err)
			}
			if c != "before\n" {
				t.Errorf("record failed by the recovery, but a.txt = %q", c)
			}
		default:
			t.Errorf("record %s (the recovery: %d, %v)", a.State, n, rerr)
		}
		v.verify()
	})
}

// TestRollbackRefusedWhileRecoveryStandsStill: the mirror case. A rollback
// stands still past reconcile_after; another process's recovery reads its
// record, rolling_back, and stands still in turn; the sandbox refuses the
// rollback and its release (back to promoted) lands; then the recovery
// goes on. The workspace must agree with the record: before, the recovery
// removed the file first, then found the record no longer rolling_back
// and left it promoted.
func TestRollbackRefusedWhileRecoveryStandsStill(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		res := v.run(agent, prop("WRITE_FILE", map[string]string{"path": "/sandbox/kept.txt", "content": "kept\n"}))
		wantOutcome(t, res, executor.Completed)
		var resume func() (int, error)
		executor.SetFaults(v.ex, nil, func(ctx context.Context, _ *sandbox.Sandbox, _ *sandbox.Snapshot) error {
			resume = v.recoveryStandingStill(t)
			return errors.New("refused by the sandbox")
		})
		err := v.ex.Rollback(ctx, res.ActionID)
		executor.SetFaults(v.ex, nil, nil)
		if resume == nil {
			t.Fatalf("Rollback = %v before the sandbox's", err)
		}
		n, rerr := resume()
		a := v.action(res.ActionID)
		c, ok := v.content("kept.txt")
		switch a.State {
		case "promoted":
			if err == nil || errors.Is(err, executor.ErrTakenUp) {
				t.Errorf("record promoted, but Rollback = %v; want the sandbox's refusal", err)
			}
			if c != "kept\n" {
				t.Errorf("record promoted, but kept.txt = %q, %v (the recovery: %d, %v)", c, ok, n, rerr)
			}
		case "rolled_back":
			if !errors.Is(err, executor.ErrTakenUp) {
				t.Errorf("record rolled back by the recovery, but Rollback = %v; want ErrTakenUp", err)
			}
			if ok {
				t.Errorf("record rolled back by the recovery, but kept.txt = %q", c)
			}
		default:
			t.Errorf("record %s (the recovery: %d, %v)", a.State, n, rerr)
		}
		v.verify()
	})
}

// TestPromotionTakenUpBeforeItsWrite: a promotion stands still past
// reconcile_after after recording its action promoting but before it
// writes anything; another process's recovery takes the action up
// meanwhile, has nothing to put back, and fails it; then the promotion
// goes on. It must write nothing and fail with ErrTakenUp: before, it
// wrote the file and only then found its record taken (ErrTakenUp from
// its commit), which left the action failed, "its effects were undone",
// over a workspace that holds them.
func TestPromotionTakenUpBeforeItsWrite(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		v.file("a.txt", "before\n")
		recovered := -1
		executor.SetFaults(v.ex, func(ctx context.Context, sb *sandbox.Sandbox, st *sandbox.Staged) error {
			v.clock.Advance(time.Hour) // reconcile_after has passed
			n, err := v.ex.RecoverInterruptedWith(ctx, executor.RecoverOptions{Before: v.clock.Now().Add(-time.Minute)})
			if err != nil {
				t.Errorf("the other process's recovery: %v", err)
			}
			recovered = n
			_, err = sb.Promote(ctx, st) // the promotion goes on
			return err
		}, nil)
		res, err := v.ex.Run(ctx, executor.Request{TaskID: "task-1", Requester: agent,
			Data: prop("WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": "after\n"})})
		executor.SetFaults(v.ex, nil, nil)
		if recovered != 1 {
			t.Fatalf("the other process's recovery settled %d actions, want 1 (Run = %+v, %v)", recovered, res, err)
		}
		if !errors.Is(err, executor.ErrTakenUp) {
			t.Errorf("Run = %+v, %v; want ErrTakenUp", res, err)
		}
		if c, _ := v.content("a.txt"); c != "before\n" {
			t.Errorf("a.txt = %q, want its pre-image: the action failed, its effects undone", c)
		}
		acts := v.actions()
		a := acts[len(acts)-1]
		if a.State != "failed" || !strings.Contains(a.Reason, "its effects were undone") {
			t.Errorf("record: state %s, reason %q; want failed by the recovery", a.State, a.Reason)
		}
		es := v.entries(a.ActionID)
		if last := es[len(es)-1]; last.Step != audit.StepFailed || last.Decision != "recovered" {
			t.Errorf("last audit entry: %s %s (%q), want the recovery's failed/recovered", last.Step, last.Decision, last.Reason)
		}
		v.verify()
	})
}

// TestRollbackTakenUpBeforeItsWrite: the mirror case. A rollback stands
// still past reconcile_after after recording its action rolling_back but
// before it restores anything; another process's recovery completes it
// meanwhile; then another action writes the same file as the one rolled
// back did, and is promoted; then the rollback goes on. It must restore
// nothing and fail with ErrTakenUp: before, it found the file as its
// promotion had left it and put the pre-image back, undoing the other
// action's write under its record, promoted.
func TestRollbackTakenUpBeforeItsWrite(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		v.file("a.txt", "before\n")
		write := prop("WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": "after\n"})
		first := v.run(agent, write)
		wantOutcome(t, first, executor.Completed)
		var again *executor.Result
		recovered := -1
		executor.SetFaults(v.ex, nil, func(ctx context.Context, sb *sandbox.Sandbox, snap *sandbox.Snapshot) error {
			v.clock.Advance(time.Hour) // reconcile_after has passed
			n, err := v.ex.RecoverInterruptedWith(ctx, executor.RecoverOptions{Before: v.clock.Now().Add(-time.Minute)})
			if err != nil {
				t.Errorf("the other process's recovery: %v", err)
			}
			recovered = n
			v.clock.Advance(time.Hour) // past the rollback cooldown
			again = v.run(agent, write)
			return sb.Rollback(ctx, snap) // the rollback goes on
		})
		err := v.ex.Rollback(ctx, first.ActionID)
		executor.SetFaults(v.ex, nil, nil)
		if recovered != 1 {
			t.Fatalf("the other process's recovery settled %d actions, want 1 (Rollback: %v)", recovered, err)
		}
		wantOutcome(t, again, executor.Completed)
		if !errors.Is(err, executor.ErrTakenUp) {
			t.Errorf("Rollback = %v; want ErrTakenUp", err)
		}
		if a := v.action(first.ActionID); a.State != "rolled_back" {
			t.Errorf("record of the rolled back action: %s, want rolled_back by the recovery", a.State)
		}
		if a := v.action(again.ActionID); a.State != "promoted" {
			t.Errorf("record of the second write: %s, want promoted", a.State)
		}
		if c, _ := v.content("a.txt"); c != "after\n" {
			t.Errorf("a.txt = %q, want the second write's content: its record is promoted", c)
		}
		v.verify()
	})
}

// TestPromotionTakenUpOverChangedFile: a promotion stands still past
// reconcile_after before it writes anything, and meanwhile something else
// changes the file it writes. Another process's recovery takes the action
// over, leaves the file as found (it is neither the pre- nor the
// post-image) and fails the action, naming it; the promotion then goes on
// and is refused (ErrTakenUp), having written nothing, as after any
// take-over. The record must not be left promoting, which no later pass
// could settle (the file stays as it is), holding the task busy and the
// requester's quota.
func TestPromotionTakenUpOverChangedFile(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		v := newEnv(t, dsn)
		ctx := context.Background()
		v.file("a.txt", "before\n")
		executor.SetFaults(v.ex, func(ctx context.Context, sb *sandbox.Sandbox, st *sandbox.Staged) error {
			v.file("a.txt", "edited by someone else\n")
			v.clock.Advance(time.Hour) // reconcile_after has passed
			v.ex.RecoverInterruptedWith(ctx, executor.RecoverOptions{Before: v.clock.Now().Add(-time.Minute)})
			_, err := sb.Promote(ctx, st) // the promotion goes on
			return err
		}, nil)
		res, err := v.ex.Run(ctx, executor.Request{TaskID: "task-1", Requester: agent,
			Data: prop("WRITE_FILE", map[string]string{"path": "/sandbox/a.txt", "content": "after\n"})})
		executor.SetFaults(v.ex, nil, nil)
		// Later passes, as the node's reconcile would run them.
		for range 2 {
			v.clock.Advance(time.Hour)
			n, rerr := v.ex.RecoverInterruptedWith(ctx, executor.RecoverOptions{Before: v.clock.Now().Add(-time.Minute)})
			t.Logf("later pass: %d, %v", n, rerr)
		}
		acts := v.actions()
		if a := acts[len(acts)-1]; a.State != "failed" || !strings.Contains(a.Reason, "/sandbox/a.txt") {
			t.Errorf("record %s (reason %q); want failed by the recovery, naming the file it left", a.State, a.Reason)
		}
		if !errors.Is(err, executor.ErrTakenUp) {
			t.Errorf("Run = %+v, %v; want ErrTakenUp: the recovery settled the action", res, err)
		}
		if c, _ := v.content("a.txt"); c != "edited by someone else\n" {
			t.Errorf("a.txt = %q", c)
		}
	})
}
