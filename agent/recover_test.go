package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/sqlstore"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

// scripted is a Model that answers from a list and records the prompts.
type scripted struct {
	mu      sync.Mutex
	answers []string
	prompts [][]agent.ChatMessage
}

func (s *scripted) Complete(ctx context.Context, p agent.Prompt) (*agent.Completion, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.prompts = append(s.prompts, p.Messages)
	if len(s.answers) == 0 {
		<-ctx.Done()
		return nil, ctx.Err()
	}
	a := s.answers[0]
	s.answers = s.answers[1:]
	return &agent.Completion{Text: a, PromptTokens: 10, CompletionTokens: 5}, nil
}

// rig is the agent on a real executor, sandbox, task service and SQLite
// database: what a node wires, without the transports.
type rig struct {
	db    *sqldb.DB
	svc   *tasks.Service
	exec  *executor.Executor
	store *agent.Store
	queue *agent.Queue
	sb    *sandbox.Sandbox
	dir   string
	// ts is the task store svc keeps its tasks in.
	ts *sqlstore.Store
	// runExec, when set, is the executor run gives the runtime instead
	// of exec.
	runExec agent.Executor
}

// newRig makes a rig on the database dsn whose queue has the default
// limits, or limits when given.
func newRig(t testing.TB, dsn string, limits ...agent.QueueLimits) *rig {
	t.Helper()
	ctx := context.Background()
	db, err := sqldb.Open(ctx, dsn, sqldb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	ts, err := sqlstore.New(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(t.TempDir(), "sandbox")
	os.MkdirAll(dir, 0o700)
	sb, err := sandbox.Open(dir, sandbox.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Close() })
	log, err := audit.New(ctx, db, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { log.Close() })
	ex, err := executor.New(ctx, executor.Config{DB: db, Sandbox: sb, Policy: policy.NewHolder(policy.Default()), Audit: log})
	if err != nil {
		t.Fatal(err)
	}
	store, err := agent.OpenStore(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	q := agent.NewQueue(store, nil)
	if len(limits) > 0 {
		q = agent.NewLimitedQueue(store, nil, limits[0])
	}
	svc := tasks.NewService(ts, tasks.ServiceOptions{Agent: q})
	return &rig{db: db, svc: svc, exec: ex, store: store, queue: q, sb: sb, dir: dir, ts: ts}
}

// run works on jobs until the task is in one of the states.
// send sends a task of alice's whose message is text, and returns it.
func (r *rig) send(t *testing.T, text string) *tasks.Task {
	t.Helper()
	b, err := json.Marshal(map[string]any{"message": map[string]any{"messageId": "m", "role": "user", "parts": []any{map[string]string{"text": text}}}})
	if err != nil {
		t.Fatal(err)
	}
	task, err := taskstest.Send(context.Background(), r.svc, "alice", b)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

func (r *rig) run(t *testing.T, m agent.Model, taskID string, states ...tasks.State) *tasks.Task {
	t.Helper()
	return r.runWith(t, nil, m, taskID, states...)
}

// completes runs the job of taskID (runWith, set nil: unchanged) until
// its task ends or waits for a human, and fails the test unless it
// completed.
func (r *rig) completes(t *testing.T, set func(*agent.Config), m agent.Model, taskID string) {
	t.Helper()
	if got := r.runWith(t, set, m, taskID, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
		t.Fatalf("task %s %q; want completed", got.Status.State, got.Status.Message)
	}
}

// runWith is run with the runtime's configuration changed by set (nil:
// unchanged).
func (r *rig) runWith(t *testing.T, set func(*agent.Config), m agent.Model, taskID string, states ...tasks.State) *tasks.Task {
	t.Helper()
	var ex agent.Executor = r.exec
	if r.runExec != nil {
		ex = r.runExec
	}
	cfg := agent.Config{Queue: r.queue, Store: r.store, Tasks: r.svc, Executor: ex, Model: m,
		ContextTokens: 8000, Lease: time.Second, Poll: 10 * time.Millisecond}
	if set != nil {
		set(&cfg)
	}
	rt, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { rt.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.After(20 * time.Second)
	for {
		cur, events, err := r.svc.Subscribe(ctx, "alice", taskID)
		if err != nil {
			t.Fatal(err)
		}
		for {
			for _, s := range states {
				if cur.Status.State == s {
					return cur
				}
			}
			var ev tasks.Event
			var ok bool
			select {
			case ev, ok = <-events:
			case <-deadline:
				t.Fatalf("task %s stayed %s %q", taskID, cur.Status.State, cur.Status.Message)
			}
			if !ok {
				break
			}
			if ev.Status != nil {
				cur.Status = *ev.Status
			}
		}
	}
}

func proposalJSON(action string, args map[string]any) string {
	b, _ := json.Marshal(map[string]any{"schema_version": "1.0.0", "id": uuid.NewString(), "reasoning": "r",
		"action": action, "args": args})
	return string(b)
}

// A node stopped between storing the model's answer and storing what the
// executor made of it: on the next claim the job is completed from the
// executor's record when the action ran (never run twice), and the action
// runs when it had not.
func TestInterruptedStep(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		for _, ran := range []bool{true, false} {
			name := "the action had run"
			if !ran {
				name = "the action had not run"
			}
			t.Run(name, func(t *testing.T) {
				r := newRig(t, dsn)
				ctx := context.Background()
				payload, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": uuid.NewString(), "role": "user",
					"parts": []any{map[string]any{"text": "write a.md"}}}})
				task, err := taskstest.Send(ctx, r.svc, "alice", payload)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := r.svc.Transition(ctx, task.ID, tasks.StateWorking, "working"); err != nil {
					t.Fatal(err)
				}
				write := proposalJSON("WRITE_FILE", map[string]any{"path": "/sandbox/a.md", "content": "once\n"})
				// What the node had stored when it stopped: the answer, no
				// observation, the job running under a lapsed lease.
				j, err := r.store.Get(ctx, task.ID)
				if err != nil {
					t.Fatal(err)
				}
				at := time.Now().UTC().Add(-time.Minute)
				it := &agent.Interaction{Sequence: 0, Timestamp: at, StateBefore: agent.Running,
					Request:  agent.Request{Messages: []agent.ChatMessage{{Role: "user", Content: "write a.md"}}, Metadata: agent.RequestMetadata{Role: "Worker", Phase: "work"}},
					Response: agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: "WRITE_FILE", RawResponse: write, NewStatus: agent.Running}}
				j.Status, j.NextSeq, j.Steps, j.LeaseUntil = agent.Running, 1, 1, at
				if err := r.store.Write(ctx, agent.Save{Job: j, Interaction: it}); err != nil {
					t.Fatal(err)
				}
				if ran {
					if res, err := r.exec.Run(ctx, executor.Request{TaskID: task.ID, Requester: "alice", Data: []byte(write)}); err != nil || res.Outcome != executor.Completed {
						t.Fatalf("run: %+v %v", res, err)
					}
				}
				m := &scripted{answers: []string{proposalJSON("FINISH", map[string]any{"response": "done"})}}
				got := r.run(t, m, task.ID, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
				if got.Status.State != tasks.StateCompleted {
					t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
				}
				acts, err := r.exec.Actions(ctx, task.ID)
				if err != nil || len(acts) != 1 || acts[0].State != "promoted" {
					t.Fatalf("the write ran %d times: %+v %v", len(acts), acts, err)
				}
				if b, _ := os.ReadFile(filepath.Join(r.dir, "a.md")); string(b) != "once\n" {
					t.Fatalf("a.md = %q", b)
				}
				h, err := r.store.History(ctx, task.ID)
				if err != nil {
					t.Fatal(err)
				}
				if o := h.Interactions[0].Observation; o == nil || o.ActionID != acts[0].ActionID || o.Outcome != agent.ObsCompleted {
					t.Fatalf("interaction 0's observation: %+v", o)
				}
				if err := agent.Replay(h, 64<<10); err != nil {
					t.Fatalf("replay: %v", err)
				}
				if len(m.prompts) != 1 || !strings.Contains(m.prompts[0][len(m.prompts[0])-1].Content, "WRITE_FILE") {
					t.Fatalf("the model was not told of the write: %+v", m.prompts)
				}
			})
		}
	})
}

// A node stopped after writing a job's end but before its task's: the
// next start brings the task to the job's state (reconcile). A task
// canceled while its job waited for a human ends the job.
func TestReconcile(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		ctx := context.Background()
		newTask := func(text string) string {
			payload, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": uuid.NewString(), "role": "user",
				"parts": []any{map[string]any{"text": text}}}})
			task, err := taskstest.Send(ctx, r.svc, "alice", payload)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := r.svc.Transition(ctx, task.ID, tasks.StateWorking, "working"); err != nil {
				t.Fatal(err)
			}
			return task.ID
		}
		// The job's last writes as the node made them before it died:
		// the status and its reason, unsettled; the task still working.
		ended := func(id string, st agent.Status, reason string) {
			j, err := r.store.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			j.Status, j.Reason = st, reason
			if err := r.store.Write(ctx, agent.Save{Job: j, Unsettled: true}); err != nil {
				t.Fatal(err)
			}
		}
		done, stuck, halted, waiting := newTask("a"), newTask("b"), newTask("c"), newTask("d")
		ended(done, agent.Success, "the answer")
		ended(stuck, agent.InterventionRequired, "stuck (monologue): THINK after THINK")
		ended(halted, agent.HaltedCost, "halted (HALTED_COST): max_cost_cents reached")
		ended(waiting, agent.InterventionRequired, "which file?")
		if err := r.store.Settle(ctx, waiting, agent.InterventionRequired); err != nil { // its task did say input_required…
			t.Fatal(err)
		}
		if _, err := r.svc.Transition(ctx, waiting, tasks.StateInputRequired, "which file?"); err != nil {
			t.Fatal(err)
		}
		// …and was canceled while it waited.
		if _, err := taskstest.Cancel(ctx, r.svc, "alice", []byte(`{"taskId":"`+waiting+`"}`)); err != nil {
			t.Fatal(err)
		}

		rt, err := agent.New(agent.Config{Queue: r.queue, Store: r.store, Tasks: r.svc, Executor: r.exec, Model: &scripted{},
			ContextTokens: 8000, Poll: 10 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		rctx, cancel := context.WithCancel(ctx)
		stopped := make(chan struct{})
		go func() { rt.Run(rctx); close(stopped) }()
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			left, err := r.store.Unsettled(ctx, time.Now(), 10)
			if err == nil && len(left) == 0 || time.Now().After(deadline) {
				if j, _ := r.store.Get(ctx, waiting); j.Status == agent.Canceled || time.Now().After(deadline) {
					break
				}
			}
		}
		cancel()
		<-stopped
		for id, want := range map[string]tasks.State{done: tasks.StateCompleted, stuck: tasks.StateInputRequired, halted: tasks.StateFailed, waiting: tasks.StateCanceled} {
			got, err := r.svc.Task(ctx, id)
			if err != nil || got.Status.State != want {
				t.Errorf("task %s: %s %q, want %s", id, got.Status.State, got.Status.Message, want)
			}
		}
		if got, _ := r.svc.Task(ctx, done); got.Status.Message != "the answer" || len(got.Artifacts) != 1 || *got.Artifacts[0].Parts[0].Text != "the answer" {
			t.Errorf("the completed task: %+v", got)
		}
		if j, _ := r.store.Get(ctx, waiting); j.Status != agent.Canceled {
			t.Errorf("the job of the canceled task: %s", j.Status)
		}
		if left, err := r.store.Unsettled(ctx, time.Now(), 10); err != nil || len(left) != 0 {
			t.Errorf("left unsettled: %d (%v)", len(left), err)
		}
	})
}

// A stored answer that had secrets taken out is not the model's answer:
// interrupted before it ran, it is not run (it would write "[REDACTED]"),
// and the model is told to send it again.
func TestInterruptedRedactedStepNotRun(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	ctx := context.Background()
	payload, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": uuid.NewString(), "role": "user",
		"parts": []any{map[string]any{"text": "store the key"}}}})
	task, err := taskstest.Send(ctx, r.svc, "alice", payload)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.svc.Transition(ctx, task.ID, tasks.StateWorking, "working"); err != nil {
		t.Fatal(err)
	}
	stored := proposalJSON("WRITE_FILE", map[string]any{"path": "/sandbox/key.md", "content": "[REDACTED]"})
	j, err := r.store.Get(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Add(-time.Minute)
	it := &agent.Interaction{Sequence: 0, Timestamp: at, StateBefore: agent.Running,
		Request:  agent.Request{Messages: []agent.ChatMessage{{Role: "user", Content: "store the key"}}, Metadata: agent.RequestMetadata{Role: "Worker", Phase: "work"}},
		Response: agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: "WRITE_FILE", RawResponse: stored, Redacted: true, NewStatus: agent.Running}}
	j.Status, j.NextSeq, j.Steps = agent.Running, 1, 1
	if err := r.store.Write(ctx, agent.Save{Job: j, Interaction: it}); err != nil {
		t.Fatal(err)
	}
	m := &scripted{answers: []string{proposalJSON("FINISH", map[string]any{"response": "not stored"})}}
	if got := r.run(t, m, task.ID, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
		t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
	}
	if acts, _ := r.exec.Actions(ctx, task.ID); len(acts) != 0 {
		t.Fatalf("the redacted answer ran: %+v", acts)
	}
	if _, err := os.Stat(filepath.Join(r.dir, "key.md")); !os.IsNotExist(err) {
		t.Fatalf("key.md: %v", err)
	}
	if last := m.prompts[0][len(m.prompts[0])-1].Content; !strings.Contains(last, "was not carried out") {
		t.Fatalf("the model was not told: %q", last)
	}
}

// stealer answers with a write, and while it "thinks" another node takes
// the job (its lease looked lapsed there: a pause longer than the lease).
type stealer struct {
	store *agent.Store
	task  string
	done  chan struct{}
}

func (s *stealer) Complete(ctx context.Context, p agent.Prompt) (*agent.Completion, error) {
	far := time.Now().Add(time.Hour)
	if ok, err := s.store.Claim(ctx, s.task, "another-node", far, far.Add(time.Hour)); err != nil || !ok {
		return nil, fmt.Errorf("steal: %v %v", ok, err)
	}
	defer close(s.done)
	return &agent.Completion{Text: proposalJSON("WRITE_FILE", map[string]any{"path": "/sandbox/late.md", "content": "late\n"})}, nil
}

// A node that lost its job's lease while it waited for the model never
// carries out the answer: the answer is stored in the executor's first
// commit only while the node holds the job, and nothing runs otherwise.
func TestLostLeaseFencesTheAction(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	ctx := context.Background()
	payload, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": uuid.NewString(), "role": "user",
		"parts": []any{map[string]any{"text": "write late.md"}}}})
	task, err := taskstest.Send(ctx, r.svc, "alice", payload)
	if err != nil {
		t.Fatal(err)
	}
	m := &stealer{store: r.store, task: task.ID, done: make(chan struct{})}
	rt, err := agent.New(agent.Config{Queue: r.queue, Store: r.store, Tasks: r.svc, Executor: r.exec, Model: m,
		ContextTokens: 8000, Lease: time.Minute, Poll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { rt.Run(rctx); close(stopped) }()
	<-m.done
	for deadline := time.Now().Add(10 * time.Second); rt.Running() > 0 && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
	}
	cancel()
	<-stopped
	if _, err := os.Stat(filepath.Join(r.dir, "late.md")); !os.IsNotExist(err) {
		t.Fatalf("the answer of a node that lost the job ran: %v", err)
	}
	if acts, _ := r.exec.Actions(ctx, task.ID); len(acts) != 0 {
		t.Fatalf("executor records: %+v", acts)
	}
	if its, _ := r.store.Interactions(ctx, task.ID); len(its) != 0 {
		t.Fatalf("the lost node stored %d interactions", len(its))
	}
}
