package proposals_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/sqlstore"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

const (
	alice    = "bc1palice"
	operator = "bc1poperator"
)

// countingExec is the real executor, counting the proposals it ran per
// task.
type countingExec struct {
	*executor.Executor
	mu   sync.Mutex
	runs map[string]int
	// actions, when set, runs once at the next Actions call, before it
	// reads.
	actions atomic.Pointer[func()]
}

func (c *countingExec) Actions(ctx context.Context, taskID string) ([]executor.Action, error) {
	if f := c.actions.Swap(nil); f != nil {
		(*f)()
	}
	return c.Executor.Actions(ctx, taskID)
}

func (c *countingExec) Run(ctx context.Context, req executor.Request) (*executor.Result, error) {
	c.mu.Lock()
	c.runs[req.TaskID]++
	c.mu.Unlock()
	return c.Executor.Run(ctx, req)
}

func (c *countingExec) count(taskID string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs[taskID]
}

// replica is one process's parts on a database: an executor on its own
// sandbox folder, the task service on the runner, and the proposals.
type replica struct {
	db      *sqldb.DB
	exec    *countingExec
	svc     *tasks.Service
	props   *proposals.Proposals
	sandbox string
	// during, when set, runs once in the middle of the next approval
	// (after its claim, when the executor asks whether the approver is
	// an operator).
	during atomic.Pointer[func()]
	// between, when set, runs once at the next decision's
	// proposals.PointApproving.
	between atomic.Pointer[func()]
}

// newReplica builds a replica on dsn; claims gives it the database's
// claims (proposals.DBClaims).
func newReplica(t *testing.T, dsn string, claims bool) *replica {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "sandbox")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	return newReplicaOn(t, dsn, claims, dir)
}

// newReplicaOn is newReplica with the sandbox folder dir, which replicas
// may share.
func newReplicaOn(t *testing.T, dsn string, claims bool, dir string) *replica {
	t.Helper()
	return newReplicaWith(t, dsn, claims, dir, false)
}

// newReplicaWith is newReplicaOn whose tasks are kept in a
// tasks.MemoryStore when memory is set (the executor's records stay on
// dsn), as a node with database = "memory" keeps them.
func newReplicaWith(t *testing.T, dsn string, claims bool, dir string, memory bool) *replica {
	t.Helper()
	ctx := context.Background()
	db, err := sqldb.Open(ctx, dsn, sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	sb, err := sandbox.Open(dir, sandbox.DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	log, err := audit.New(ctx, db, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	r := &replica{db: db, sandbox: dir}
	holder := &policy.Holder{}
	holder.Set(policy.InForce{Engine: policy.Default(), Operator: func(addr string) bool {
		if f := r.during.Swap(nil); f != nil {
			(*f)()
		}
		return addr == operator
	}})
	ex, err := executor.New(ctx, executor.Config{DB: db, Sandbox: sb, Policy: holder, Audit: log})
	if err != nil {
		t.Fatal(err)
	}
	var store tasks.Store = tasks.NewMemoryStore(tasks.MemoryStoreOptions{MaxTasks: 100})
	if !memory {
		store = mustStore(t, db)
	}
	exec := &countingExec{Executor: ex, runs: map[string]int{}}
	svc := tasks.NewService(store, tasks.ServiceOptions{Runner: proposals.NewRunner(exec, nil, nil), Operators: []string{operator}})
	cfg := proposals.Config{Executor: exec, Tasks: svc, Pause: func(point string) {
		if point == proposals.PointApproving {
			if f := r.between.Swap(nil); f != nil {
				(*f)()
			}
		}
	}}
	if claims {
		cfg.Claims = proposals.DBClaims(db)
	}
	props, err := proposals.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r.exec, r.svc, r.props = exec, svc, props
	return r
}

// send sends a message of proposal parts (action, path) from alice, as
// a follow-up of taskID when it is not "", and returns the task.
func (r *replica) send(t *testing.T, svc *tasks.Service, taskID string, actions ...[2]string) *tasks.Task {
	t.Helper()
	var parts []any
	for _, a := range actions {
		args := map[string]any{"path": a[1]}
		if a[0] == "WRITE_FILE" {
			args["content"] = "hi\n"
		}
		parts = append(parts, map[string]any{"data": map[string]any{"schema_version": "1.0.0", "id": uuid.NewString(),
			"reasoning": "test", "action": a[0], "args": args}})
	}
	p := map[string]any{"message": map[string]any{"messageId": uuid.NewString(), "role": "user", "parts": parts}}
	if taskID != "" {
		p["taskId"] = taskID
	}
	b, _ := json.Marshal(p)
	got, err := taskstest.Send(context.Background(), svc, alice, b)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (r *replica) file(name string) string { return filepath.Join(r.sandbox, name) }

// cancel cancels taskID as its requester, alice.
func (r *replica) cancel(taskID string) error {
	b, _ := json.Marshal(map[string]any{"taskId": taskID})
	_, err := taskstest.Cancel(context.Background(), r.svc, alice, b)
	return err
}

// oneHeld writes one.txt and sends a task that proposes to delete it,
// which the default policy holds: the task and its one held action.
func (r *replica) oneHeld(t *testing.T) (*tasks.Task, executor.Pending) {
	t.Helper()
	if err := os.WriteFile(r.file("one.txt"), []byte("one"), 0o600); err != nil {
		t.Fatal(err)
	}
	task := r.send(t, r.svc, "", [2]string{"DELETE_FILE", "/sandbox/one.txt"})
	held, err := r.props.Held(context.Background(), task.ID)
	if err != nil || len(held) != 1 || task.Status.State != tasks.StateInputRequired {
		t.Fatalf("task %s, held %v %v", task.Status.State, held, err)
	}
	return task, held[0]
}

// twoHeld makes a task that holds two deletes, of one.txt and two.txt,
// and returns it with the ids of its held actions in order.
func (r *replica) twoHeld(t *testing.T) (*tasks.Task, []string) {
	t.Helper()
	for _, f := range []string{"one.txt", "two.txt"} {
		if err := os.WriteFile(r.file(f), []byte(f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	task := r.send(t, r.svc, "", [2]string{"DELETE_FILE", "/sandbox/one.txt"})
	if task = r.send(t, r.svc, task.ID, [2]string{"DELETE_FILE", "/sandbox/two.txt"}); task.Status.State != tasks.StateInputRequired {
		t.Fatalf("task %s %q", task.Status.State, task.Status.Message)
	}
	held, err := r.props.Held(context.Background(), task.ID)
	if err != nil || len(held) != 2 {
		t.Fatalf("held %v %v", held, err)
	}
	return task, []string{held[0].ActionID, held[1].ActionID}
}

func exists(t *testing.T, path string) bool {
	t.Helper()
	_, err := os.Stat(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	return err == nil
}

// A task holding two actions lists both; a decision without an action id
// is refused naming both; each is decided by its id; when the decision on
// one ends the task, the other is withdrawn: it never runs, no longer
// waits in the list, and a decision on it is refused naming the state.
func TestTwoHeldDecidedByID(t *testing.T) {
	r := newReplica(t, testdb.SQLite(t), false)
	ctx := context.Background()
	task, ids := r.twoHeld(t)
	_, err := r.props.Decide(ctx, proposals.Decision{TaskID: task.ID, Approver: executor.Host, Approve: true})
	var he *proposals.HeldError
	if !errors.Is(err, proposals.ErrAmbiguous) || !errors.As(err, &he) || !strings.Contains(err.Error(), ids[0]) || !strings.Contains(err.Error(), ids[1]) {
		t.Fatalf("decision without an id: %v", err)
	}
	if _, err := r.props.Decide(ctx, proposals.Decision{TaskID: task.ID, ActionID: "nope", Approver: executor.Host, Approve: true}); !errors.Is(err, proposals.ErrNotHeld) {
		t.Fatalf("decision on an action the task does not hold: %v", err)
	}
	if !exists(t, r.file("one.txt")) || !exists(t, r.file("two.txt")) {
		t.Fatal("a refused decision ran an action")
	}
	got, err := r.props.Decide(ctx, proposals.Decision{TaskID: task.ID, ActionID: ids[1], Approver: executor.Host, Approve: true})
	if err != nil || got.Status.State != tasks.StateCompleted {
		t.Fatalf("approve %s: %v %v", ids[1], got, err)
	}
	if exists(t, r.file("two.txt")) || !exists(t, r.file("one.txt")) {
		t.Fatal("the approval ran another action than the one named")
	}
	if held, err := r.props.Held(ctx, ""); err != nil || len(held) != 0 {
		t.Fatalf("held after the task ended: %v %v", held, err)
	}
	for _, approve := range []bool{true, false} {
		_, err = r.props.Decide(ctx, proposals.Decision{TaskID: task.ID, ActionID: ids[0], Approver: executor.Host, Approve: approve})
		var se *proposals.StateError
		if !errors.Is(err, proposals.ErrTaskEnded) || !errors.As(err, &se) || se.State != tasks.StateCompleted {
			t.Fatalf("decision (approve %v) on the withdrawn action: %v", approve, err)
		}
	}
	if !exists(t, r.file("one.txt")) {
		t.Fatal("the withdrawn action ran")
	}
}

// A held action cannot be approved nor denied once its task has ended,
// however it ended, and nothing runs; the task keeps its state and no
// held action is left behind.
func TestDecisionOnEndedTaskRefused(t *testing.T) {
	for _, c := range []struct {
		name string
		end  func(t *testing.T, r *replica, task *tasks.Task, ids []string)
		want tasks.State
	}{
		{"canceled", func(t *testing.T, r *replica, task *tasks.Task, _ []string) {
			if err := r.cancel(task.ID); err != nil {
				t.Fatal(err)
			}
			if n, err := r.props.TaskEnded(context.Background(), task.ID); err != nil || n != 2 {
				t.Fatalf("TaskEnded withdrew %d: %v", n, err)
			}
		}, tasks.StateCanceled},
		{"completed", func(t *testing.T, r *replica, task *tasks.Task, ids []string) {
			if _, err := r.props.Decide(context.Background(), proposals.Decision{TaskID: task.ID, ActionID: ids[1], Approver: executor.Host, Approve: true}); err != nil {
				t.Fatal(err)
			}
		}, tasks.StateCompleted},
		{"failed", func(t *testing.T, r *replica, task *tasks.Task, ids []string) {
			if _, err := r.props.Decide(context.Background(), proposals.Decision{TaskID: task.ID, ActionID: ids[1], Approver: executor.Host}); err != nil {
				t.Fatal(err)
			}
		}, tasks.StateFailed},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newReplica(t, testdb.SQLite(t), false)
			ctx := context.Background()
			task, ids := r.twoHeld(t)
			c.end(t, r, task, ids)
			if held, err := r.props.Held(ctx, task.ID); err != nil || len(held) != 0 {
				t.Fatalf("actions still held by the %s task: %v %v", c.name, held, err)
			}
			for _, approve := range []bool{true, false} {
				_, err := r.props.Decide(ctx, proposals.Decision{TaskID: task.ID, ActionID: ids[0], Approver: operator, Approve: approve})
				if !errors.Is(err, proposals.ErrTaskEnded) || !strings.Contains(err.Error(), string(c.want)) {
					t.Fatalf("decision (approve %v) on a %s task: %v", approve, c.name, err)
				}
			}
			if !exists(t, r.file("one.txt")) {
				t.Fatal("the held delete ran after its task ended")
			}
			if got, err := r.svc.Task(ctx, task.ID); err != nil || got.Status.State != c.want {
				t.Fatalf("task after the refused decisions: %v %v", got, err)
			}
		})
	}
}

// A task that ends while its held action is being approved — canceled by
// its requester, or completed by the approval of its other held action —
// ends the approval before anything runs: the decision is refused naming
// the state, the action is withdrawn, and nothing is left held.
func TestApprovalRacingTheTaskEnd(t *testing.T) {
	for _, c := range []struct {
		name string
		end  func(t *testing.T, r *replica, task *tasks.Task, ids []string)
		want tasks.State
	}{
		{"canceled", func(t *testing.T, r *replica, task *tasks.Task, _ []string) {
			if err := r.cancel(task.ID); err != nil {
				t.Error(err)
			}
			// The withdrawal after the cancel finds the action being
			// approved, not held: it cannot withdraw it.
			if _, err := r.props.TaskEnded(context.Background(), task.ID); err != nil {
				t.Error(err)
			}
		}, tasks.StateCanceled},
		{"completed by the other approval", func(t *testing.T, r *replica, task *tasks.Task, ids []string) {
			if got, err := r.props.Decide(context.Background(), proposals.Decision{TaskID: task.ID, ActionID: ids[0], Approver: executor.Host, Approve: true}); err != nil || got.Status.State != tasks.StateCompleted {
				t.Errorf("the other approval: %v %v", got, err)
			}
		}, tasks.StateCompleted},
	} {
		t.Run(c.name, func(t *testing.T) {
			testdb.Each(t, func(t *testing.T, dsn string) {
				r := newReplica(t, dsn, false)
				ctx := context.Background()
				task, ids := r.twoHeld(t)
				end := func() { c.end(t, r, task, ids) }
				r.during.Store(&end)
				_, err := r.props.Decide(ctx, proposals.Decision{TaskID: task.ID, ActionID: ids[1], Approver: executor.Host, Approve: true})
				var se *proposals.StateError
				if !errors.Is(err, proposals.ErrTaskEnded) || !errors.As(err, &se) || se.State != c.want {
					t.Fatalf("approval of a task that ended meanwhile: %v", err)
				}
				if !exists(t, r.file("two.txt")) {
					t.Fatal("the approved delete ran although its task had ended")
				}
				if held, err := r.props.Held(ctx, ""); err != nil || len(held) != 0 {
					t.Fatalf("held after the task ended: %v %v", held, err)
				}
				acts, err := r.exec.Actions(ctx, task.ID)
				if err != nil {
					t.Fatal(err)
				}
				for _, a := range acts {
					if a.ActionID == ids[1] && a.State != "denied" {
						t.Fatalf("the refused approval's action is %s, want withdrawn (denied)", a.State)
					}
				}
				if got, err := r.svc.Task(ctx, task.ID); err != nil || got.Status.State != c.want {
					t.Fatalf("task: %v %v", got, err)
				}
			})
		})
	}
}

// A task that ends elsewhere (a withdrawal that failed, another
// process's cancel) with actions still held: the next reconcile pass
// withdraws them.
func TestReconcileWithdrawsOrphans(t *testing.T) {
	dsn := testdb.SQLite(t)
	r := newReplica(t, dsn, false)
	ctx := context.Background()
	task, _ := r.twoHeld(t)
	b, _ := json.Marshal(map[string]any{"taskId": task.ID})
	if _, err := taskstest.Cancel(ctx, r.svc, alice, b); err != nil {
		t.Fatal(err)
	}
	rec, err := r.props.Reconcile(ctx, time.Now())
	if err != nil || rec.Withdrawn != 2 {
		t.Fatalf("reconcile: %+v %v", rec, err)
	}
	if held, err := r.props.Held(ctx, ""); err != nil || len(held) != 0 {
		t.Fatalf("held after the pass: %v %v", held, err)
	}
}

// listSpy is the task service, recording the filters of List.
type listSpy struct {
	proposals.Tasks
	mu      sync.Mutex
	filters []tasks.Filter
}

func (l *listSpy) List(ctx context.Context, f tasks.Filter) ([]*tasks.Task, error) {
	l.mu.Lock()
	l.filters = append(l.filters, f)
	l.mu.Unlock()
	return l.Tasks.List(ctx, f)
}

// A reconcile pass scans the live tasks by their status alone (Brief):
// it reads each one it takes up again, under its claim, and a scan of
// every live task's history (up to 1,000 messages each) every minute
// is not needed for that.
func TestReconcileScansBriefly(t *testing.T) {
	r := newReplica(t, testdb.SQLite(t), false)
	ctx := context.Background()
	// Another process accepted it and stopped before running it.
	stopped := tasks.NewService(mustStore(t, r.db), tasks.ServiceOptions{})
	task := r.send(t, stopped, "", [2]string{"WRITE_FILE", "/sandbox/late.txt"})
	spy := &listSpy{Tasks: r.svc}
	props, err := proposals.New(proposals.Config{Executor: r.exec, Tasks: spy})
	if err != nil {
		t.Fatal(err)
	}
	if rec, err := props.Reconcile(ctx, time.Now()); err != nil || rec.Resumed != 1 {
		t.Fatalf("reconcile: %+v %v", rec, err)
	}
	if got, err := r.svc.Task(ctx, task.ID); err != nil || got.Status.State != tasks.StateCompleted {
		t.Fatalf("task after the pass: %v %v", got, err)
	}
	if len(spy.filters) == 0 {
		t.Fatal("the pass listed no task")
	}
	for _, f := range spy.filters {
		if !f.Brief {
			t.Errorf("the pass listed %+v: the tasks' histories and artifacts with them", f)
		}
	}
}

// A task younger than the cutoff (on PostgreSQL, one a replica may be
// running) is left alone at start; the periodic pass takes it up once it
// stood still for the age, at the time its clock (the ticks) gives.
func TestReconcileEveryTakesUpOldTasks(t *testing.T) {
	dsn := testdb.SQLite(t)
	r := newReplica(t, dsn, false)
	ctx := context.Background()
	// Another process accepted it and stopped before running it.
	stopped := tasks.NewService(mustStore(t, r.db), tasks.ServiceOptions{})
	task := r.send(t, stopped, "", [2]string{"WRITE_FILE", "/sandbox/late.txt"})
	if task.Status.State != tasks.StateSubmitted {
		t.Fatalf("task %s", task.Status.State)
	}
	start := task.Status.Timestamp
	if rec, err := r.props.Reconcile(ctx, start.Add(-proposals.InterruptedAfter)); err != nil || rec.Resumed != 0 {
		t.Fatalf("start-up pass: %+v %v", rec, err)
	}
	ticks := make(chan time.Time)
	reports := make(chan proposals.Reconciled)
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.props.ReconcileEvery(pctx, ticks, proposals.InterruptedAfter, 0, func(rec proposals.Reconciled, err error) {
			if err != nil {
				t.Error(err)
			}
			reports <- rec
		})
	}()
	defer func() { cancel(); <-done }()
	ticks <- start.Add(time.Minute) // still young: left alone
	if rec := <-reports; rec.Resumed != 0 || exists(t, r.file("late.txt")) {
		t.Fatalf("pass a minute later: %+v", rec)
	}
	ticks <- start.Add(proposals.InterruptedAfter + time.Second)
	if rec := <-reports; rec.Resumed != 1 || rec.Ended != 1 {
		t.Fatalf("pass past the age: %+v", rec)
	}
	if got, err := r.svc.Task(ctx, task.ID); err != nil || got.Status.State != tasks.StateCompleted || !exists(t, r.file("late.txt")) {
		t.Fatalf("task after the pass: %v %v", got, err)
	}
	ticks <- start.Add(2 * proposals.InterruptedAfter)
	if rec := <-reports; rec.Resumed != 0 || r.exec.count(task.ID) != 1 {
		t.Fatalf("a later pass: %+v, %d runs", rec, r.exec.count(task.ID))
	}
}

func mustStore(t *testing.T, db *sqldb.DB) tasks.Store {
	t.Helper()
	s, err := sqlstore.New(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// Two replicas on one PostgreSQL database reconcile the same 50
// interrupted tasks at once: each task is run by exactly one of them.
func TestReplicasReconcileEachTaskOnce(t *testing.T) {
	dsn := testdb.Postgres(t)
	a, b := newReplica(t, dsn, true), newReplica(t, dsn, true)
	ctx := context.Background()
	stopped := tasks.NewService(mustStore(t, a.db), tasks.ServiceOptions{})
	const n = 50
	ids := make([]string, n)
	for i := range ids {
		ids[i] = a.send(t, stopped, "", [2]string{"WRITE_FILE", "/sandbox/f" + uuid.NewString()[:8] + ".txt"}).ID
	}
	cutoff := time.Now()
	var wg sync.WaitGroup
	var recs [2]proposals.Reconciled
	for i, r := range []*replica{a, b} {
		wg.Go(func() {
			rec, err := r.props.Reconcile(ctx, cutoff)
			if err != nil {
				t.Error(err)
			}
			recs[i] = rec
		})
	}
	wg.Wait()
	if got := recs[0].Resumed + recs[1].Resumed; got != n {
		t.Errorf("resumed %d + %d, want %d in all", recs[0].Resumed, recs[1].Resumed, n)
	}
	for _, id := range ids {
		if runs := a.exec.count(id) + b.exec.count(id); runs != 1 {
			t.Errorf("task %s run %d times", id, runs)
		}
		if got, err := a.svc.Task(ctx, id); err != nil || got.Status.State != tasks.StateCompleted {
			t.Errorf("task %s: %v %v", id, got, err)
		}
	}
}

// Two replicas on one PostgreSQL database and one sandbox start at once
// while 50 actions look caught mid-promotion (their process died) and one
// more is being promoted right now by a live replica: each old promotion
// is undone by exactly one of them, and the live one is left alone.
func TestReplicasRecoverPromotionsOnce(t *testing.T) {
	dsn := testdb.Postgres(t)
	a := newReplica(t, dsn, true)
	b := newReplicaOn(t, dsn, true, a.sandbox)
	ctx := context.Background()
	const n = 50
	old := time.Now().Add(-time.Hour).UnixMicro()
	var actions []string
	for i := range n + 1 {
		task := a.send(t, a.svc, "", [2]string{"WRITE_FILE", fmt.Sprintf("/sandbox/p%d.txt", i)})
		acts, err := a.exec.Actions(ctx, task.ID)
		if err != nil || len(acts) != 1 {
			t.Fatalf("actions: %v %v", acts, err)
		}
		at := old
		if i == n {
			at = time.Now().UnixMicro() // the live replica's
		}
		if _, err := a.db.W.ExecContext(ctx, `UPDATE executor_actions SET state = 'promoting', updated_at = $1 WHERE action_id = $2`, at, acts[0].ActionID); err != nil {
			t.Fatal(err)
		}
		actions = append(actions, acts[0].ActionID)
	}
	cutoff := time.Now().Add(-proposals.InterruptedAfter)
	var wg sync.WaitGroup
	var got [2]int
	for i, r := range []*replica{a, b} {
		wg.Go(func() {
			m, err := proposals.RecoverInterrupted(ctx, r.exec, proposals.DBClaims(r.db), cutoff)
			if err != nil {
				t.Error(err)
			}
			got[i] = m
		})
	}
	wg.Wait()
	if got[0]+got[1] != n {
		t.Errorf("recovered %d + %d, want %d in all", got[0], got[1], n)
	}
	for i, id := range actions {
		var state string
		if err := a.db.R.QueryRowContext(ctx, `SELECT state FROM executor_actions WHERE action_id = $1`, id).Scan(&state); err != nil {
			t.Fatal(err)
		}
		live := i == n
		if want := map[bool]string{false: "failed", true: "promoting"}[live]; state != want {
			t.Errorf("action %d: %s, want %s", i, state, want)
		}
		if exists(t, a.file(fmt.Sprintf("p%d.txt", i))) != live {
			t.Errorf("p%d.txt: the recovery undid the live promotion, or left an old one", i)
		}
	}
}

// An approval that names the diff it was taken on (Decision.Diff) is
// refused once the action's diff is another, and nothing runs; naming
// the diff as it is, it goes through.
func TestApprovalOfAnotherDiffRefused(t *testing.T) {
	r := newReplica(t, testdb.SQLite(t), false)
	ctx := context.Background()
	task, one := r.oneHeld(t)
	_, err := r.props.Decide(ctx, proposals.Decision{TaskID: task.ID, ActionID: one.ActionID, Approver: executor.Host, Approve: true,
		Diff: proposals.DiffSum(one.Diff + "\n(the diff as it was)")})
	if !errors.Is(err, proposals.ErrDiffChanged) || !strings.Contains(err.Error(), one.ActionID) {
		t.Fatalf("approval of another diff: %v", err)
	}
	if !exists(t, r.file("one.txt")) {
		t.Fatal("the approval of another diff ran")
	}
	got, err := r.props.Decide(ctx, proposals.Decision{TaskID: task.ID, ActionID: one.ActionID, Approver: executor.Host, Approve: true,
		Diff: proposals.DiffSum(one.Diff)})
	if err != nil || got.Status.State != tasks.StateCompleted || exists(t, r.file("one.txt")) {
		t.Fatalf("approval of the diff shown: %v %v", got, err)
	}
}

// An approval that names the diff it was shown runs only that diff, even
// when a second approval of the same action, in between, found the files
// changed and held it again with another: the check is made where the
// approval has the action to itself.
func TestApprovalOfAReheldActionRefused(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newReplica(t, dsn, false)
		ctx := context.Background()
		task, one := r.oneHeld(t)
		shown := proposals.DiffSum(one.Diff)
		other := func() {
			if err := os.WriteFile(r.file("one.txt"), []byte("precious new content"), 0o600); err != nil {
				t.Error(err)
			}
			if _, err := r.props.Decide(ctx, proposals.Decision{TaskID: task.ID, ActionID: one.ActionID, Approver: executor.Host, Approve: true}); err != nil {
				t.Errorf("the second approval: %v", err)
			}
			if again, _ := r.props.Held(ctx, task.ID); len(again) != 1 || proposals.DiffSum(again[0].Diff) == shown {
				t.Errorf("the second approval did not hold the action again with a new diff: %v", again)
			}
		}
		r.between.Store(&other)
		_, err := r.props.Decide(ctx, proposals.Decision{TaskID: task.ID, ActionID: one.ActionID, Approver: executor.Host, Approve: true, Diff: shown})
		if !errors.Is(err, proposals.ErrDiffChanged) {
			t.Fatalf("approval of the diff shown, held again meanwhile with another: %v", err)
		}
		if b, err := os.ReadFile(r.file("one.txt")); err != nil || string(b) != "precious new content" {
			t.Fatalf("the new content is gone: %q %v", b, err)
		}
		if again, err := r.props.Held(ctx, task.ID); err != nil || len(again) != 1 {
			t.Fatalf("the action does not wait again: %v %v", again, err)
		}
	})
}

// An approval on one replica that stands still past reconcile_after
// (here: a reconcile pass on another replica, on the same database and
// sandbox, with a cutoff after the approval's claim) is taken for a
// crashed one and handed back to the operators. The approval that was
// live all along must then record nothing: the task keeps waiting, the
// action is held again, and neither says something the other does not.
// Before, an approval that went on to fail the action (its file gone by
// then) recorded the task failed although the record it no longer held
// was pending again, and the held action was then withdrawn: the task
// failed on an approval that the executor's record and the audit log say
// was a withdrawal.
func TestSlowApprovalHandedBackRecordsNothing(t *testing.T) {
	for _, c := range []struct {
		name string
		// meanwhile runs in the approval, before it stages.
		meanwhile func(t *testing.T, r *replica)
	}{
		{"the file is gone by then", func(t *testing.T, r *replica) {
			if err := os.Remove(r.file("one.txt")); err != nil {
				t.Error(err)
			}
		}},
		{"the file is as it was", func(*testing.T, *replica) {}},
	} {
		t.Run(c.name, func(t *testing.T) {
			dsn := testdb.Postgres(t)
			a := newReplica(t, dsn, true)
			b := newReplicaOn(t, dsn, true, a.sandbox)
			ctx := context.Background()
			if err := os.WriteFile(a.file("one.txt"), []byte("one"), 0o600); err != nil {
				t.Fatal(err)
			}
			task := a.send(t, a.svc, "", [2]string{"DELETE_FILE", "/sandbox/one.txt"})
			held, err := a.props.Held(ctx, task.ID)
			if err != nil || len(held) != 1 {
				t.Fatalf("held %v %v", held, err)
			}
			slow := func() {
				c.meanwhile(t, a)
				// reconcile_after has passed since the approval's claim.
				rec, err := b.props.Reconcile(ctx, time.Now().Add(time.Second))
				if err != nil || rec.Recovered != 1 {
					t.Errorf("the other replica's pass: %+v %v", rec, err)
				}
			}
			a.during.Store(&slow)
			got, err := a.props.Decide(ctx, proposals.Decision{TaskID: task.ID, ActionID: held[0].ActionID, Approver: executor.Host, Approve: true})
			if err == nil {
				t.Fatalf("the approval handed back went on: task %s %q", got.Status.State, got.Status.Message)
			}
			// The operator is told what happened and what to do, whatever
			// the path the approval came by (they all show this error).
			var te *proposals.TakenUpError
			if !errors.Is(err, proposals.ErrTakenUp) || !errors.As(err, &te) || !te.HeldAgain || te.ActionID != held[0].ActionID {
				t.Errorf("approval refused with %v (%T), want proposals.ErrTakenUp, held again", err, err)
			}
			for _, want := range []string{"reconcile_after", "another process took the action up as interrupted", "held again", "approve"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal %q does not say %q", err, want)
				}
			}
			if got, err := a.svc.Task(ctx, task.ID); err != nil || got.Status.State != tasks.StateInputRequired {
				t.Fatalf("task: %v %v", got, err)
			}
			if again, err := a.props.Held(ctx, task.ID); err != nil || len(again) != 1 {
				t.Fatalf("the action does not wait again: %v %v", again, err)
			}
		})
	}
}

// A claim belongs to the call that took it, not to whoever finds the
// record in its state. An approval on one replica stands still past
// reconcile_after; another replica's reconcile pass hands the action back
// to the operators, and an operator approves it again there, whose claim
// makes the record approving again. When the first approval wakes up, it
// must find it no longer holds the action (ErrTakenUp) and change
// nothing, and the second approval must go on as if the first had never
// been. Before, the first one's writes, conditioned on the state alone,
// found the second's claim and went on: it promoted the action under the
// second approval's feet, which then failed.
func TestSlowApprovalReclaimedElsewhereRecordsNothing(t *testing.T) {
	dsn := testdb.Postgres(t)
	a := newReplica(t, dsn, true)
	b := newReplicaOn(t, dsn, true, a.sandbox)
	ctx := context.Background()
	task, pa := a.oneHeld(t)
	row := func() string {
		var state, diff, reason, snap string
		var updated int64
		err := a.db.R.QueryRowContext(ctx, a.db.Dialect.Rebind(`SELECT state, diff, reason, snapshot, updated_at FROM executor_actions WHERE action_id = ?`),
			pa.ActionID).Scan(&state, &diff, &reason, &snap, &updated)
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%s %d %q %q %q", state, updated, diff, reason, snap)
	}
	var (
		claimed  = make(chan string, 1) // the record as B's claim left it
		goOn     = make(chan struct{})  // A's approval has returned
		bDecided = make(chan error, 1)
		bTask    *tasks.Task
	)
	wait := func(what string, c <-chan struct{}) {
		select {
		case <-c:
		case <-time.After(30 * time.Second):
			t.Errorf("timed out waiting for %s", what)
		}
	}
	// B's approval, once it has claimed the action, waits for A's to end.
	bHold := func() {
		claimed <- row()
		wait("A's approval", goOn)
	}
	b.during.Store(&bHold)
	var seen string
	slow := func() {
		// reconcile_after has passed since A's claim.
		rec, err := b.props.Reconcile(ctx, time.Now().Add(time.Second))
		if err != nil || rec.Recovered != 1 {
			t.Errorf("the other replica's pass: %+v %v", rec, err)
		}
		go func() {
			var err error
			bTask, err = b.props.Decide(ctx, proposals.Decision{TaskID: task.ID, ActionID: pa.ActionID, Approver: executor.Host, Approve: true})
			bDecided <- err
		}()
		select {
		case seen = <-claimed:
		case err := <-bDecided:
			t.Errorf("B's approval ended before A went on: %v", err)
			bDecided <- err
		case <-time.After(30 * time.Second):
			t.Error("timed out waiting for B's claim")
		}
	}
	a.during.Store(&slow)
	got, err := a.props.Decide(ctx, proposals.Decision{TaskID: task.ID, ActionID: pa.ActionID, Approver: executor.Host, Approve: true})
	after := row()
	_, fileErr := os.Stat(a.file("one.txt"))
	close(goOn)
	if err == nil {
		t.Errorf("A's approval, taken up and claimed again elsewhere, went on: task %s %q", got.Status.State, got.Status.Message)
	} else if !errors.Is(err, executor.ErrTakenUp) || !errors.Is(err, proposals.ErrTakenUp) {
		t.Errorf("A's approval refused with %v, want ErrTakenUp", err)
	}
	if fileErr != nil {
		t.Errorf("A's approval changed the workspace: %v", fileErr)
	}
	if !strings.HasPrefix(seen, "approving ") || after != seen {
		t.Errorf("A's approval changed the record B holds:\n  B's claim left %s\n  A left         %s", seen, after)
	}
	select {
	case err = <-bDecided:
	case <-time.After(30 * time.Second):
		t.Fatal("B's approval does not end")
	}
	if err != nil || bTask == nil || bTask.Status.State != tasks.StateCompleted {
		t.Fatalf("B's approval: %v %v", bTask, err)
	}
	if _, err := os.Stat(a.file("one.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("one.txt after B's approval: %v", err)
	}
	if s := row(); !strings.HasPrefix(s, "promoted ") {
		t.Errorf("record after B's approval: %s", s)
	}
}

// A copy of an approval refused because the task held no action while
// another copy approved it, that copy then failing and giving the action
// back before the refusal looked for an approval under way, is answered
// ErrUnderWay too, its claim left pending: answered as the refusal, its
// record would spend the message's id, and nothing would be decided.
func TestDecisionRefusedWhileActionGivenBack(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newReplica(t, dsn, false)
		ctx := context.Background()
		task, pa := r.oneHeld(t)
		claim := r.svc.TxClaim(&snap.ReplayClaim{From: operator, ID: "copy-b"})
		actx, failA := context.WithCancel(ctx)
		defer failA()
		bAtCheck, aDone, bErr := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		during := func() {
			// A holds the action approving: B is refused for it, and
			// stops before it looks for an approval under way.
			atCheck := func() { close(bAtCheck); <-aDone }
			r.exec.actions.Store(&atCheck)
			go func() {
				_, err := r.props.Decide(ctx, proposals.Decision{TaskID: task.ID, Approver: executor.Host, Approve: true, Claim: claim})
				bErr <- err
			}()
			<-bAtCheck
			failA() // A fails, and gives the action back
		}
		r.during.Store(&during)
		if _, err := r.props.Decide(actx, proposals.Decision{TaskID: task.ID, Approver: executor.Host, Approve: true}); err == nil {
			t.Fatal("copy A: carried out; want it failed by its context")
		}
		close(aDone)
		if err := <-bErr; !errors.Is(err, proposals.ErrUnderWay) {
			t.Fatalf("copy B: %v; want ErrUnderWay", err)
		}
		if !claim.Pending() {
			t.Fatal("copy B's claim settled: its id spent")
		}
		got, err := r.props.Decide(ctx, proposals.Decision{TaskID: task.ID, ActionID: pa.ActionID, Approver: executor.Host, Approve: true, Claim: claim})
		if err != nil || got.Status.State != tasks.StateCompleted {
			t.Fatalf("copy B's retry: %v %v", got, err)
		}
	})
}

// failingJobs owns every task and fails to hand it a decision's outcome:
// the agent runtime's store busy after the executor's commit.
type failingJobs struct{}

func (failingJobs) Owns(context.Context, string) (bool, error) { return true, nil }

func (failingJobs) Decided(context.Context, string, *executor.Result, bool, string) (*tasks.Task, error) {
	return nil, errors.New("agent: database is locked")
}

// A decision carried out, whose outcome then fails to reach the task
// (the agent's job), answers with the task as it stands rather than an
// error: the decision is recorded, a signed decision's replay record
// with it, and the agent's reconcile gives its job the outcome.
func TestDecisionAnsweredWithTheTaskAfterItsCommit(t *testing.T) {
	r := newReplica(t, testdb.SQLite(t), false)
	ctx := context.Background()
	task, held := r.oneHeld(t)
	props, err := proposals.New(proposals.Config{Executor: r.exec, Tasks: r.svc, Jobs: failingJobs{}})
	if err != nil {
		t.Fatal(err)
	}
	got, err := props.Decide(ctx, proposals.Decision{TaskID: task.ID, ActionID: held.ActionID, Approver: executor.Host, Approve: true})
	if err != nil || got == nil || got.ID != task.ID || got.Status.State != tasks.StateInputRequired {
		t.Fatalf("decision: %v %v; want the task as it stands", got, err)
	}
	if exists(t, r.file("one.txt")) {
		t.Fatal("the approved delete did not run")
	}
}
