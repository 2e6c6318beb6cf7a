package agent_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// interrupted stores, for the task of a new rig, the job as a node that
// stopped between the model's answer (raw, as stored) and its outcome left
// it: the answer, no observation, the job running under a lapsed lease.
func (r *rig) interrupted(t *testing.T, raw string, redacted bool) *tasks.Task {
	t.Helper()
	ctx := context.Background()
	task := r.send(t, "write a.md")
	if _, err := r.svc.Transition(ctx, task.ID, tasks.StateWorking, "working"); err != nil {
		t.Fatal(err)
	}
	j, err := r.store.Get(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Now().UTC().Add(-time.Minute)
	it := &agent.Interaction{Sequence: 0, Timestamp: at, StateBefore: agent.Running,
		Request: agent.Request{Messages: []agent.ChatMessage{{Role: "user", Content: "write a.md"}}, Metadata: agent.RequestMetadata{Role: "Worker", Phase: "work"}},
		Response: agent.Response{Status: agent.ResponseSuccess, Kind: agent.KindProposal, Action: "WRITE_FILE", RawResponse: raw,
			Redacted: redacted, NewStatus: agent.Running}}
	j.Status, j.NextSeq, j.Steps, j.LeaseUntil = agent.Running, 1, 1, at
	if err := r.store.Write(ctx, agent.Save{Job: j, Interaction: it}); err != nil {
		t.Fatal(err)
	}
	return task
}

// recoveredAfterLook is the executor as a replica's reconcile pass finds
// it: the first time the job reads the task's records, the pass settles
// the interrupted promotions right after (RecoverInterrupted).
type recoveredAfterLook struct {
	*executor.Executor
	once   sync.Once
	looked chan []executor.Action
}

func (x *recoveredAfterLook) Actions(ctx context.Context, taskID string) ([]executor.Action, error) {
	acts, err := x.Executor.Actions(ctx, taskID)
	x.once.Do(func() {
		x.looked <- acts
		if _, rerr := x.Executor.RecoverInterrupted(ctx); rerr != nil && err == nil {
			err = rerr
		}
	})
	return acts, err
}

// A step whose action a crash left promoting (the files renamed into place,
// the record not yet moved on) has no outcome yet: the executor's recovery
// undoes it and records it failed. The job taken up meanwhile (its lease
// lapses long before reconcile_after on a shared database) must not tell
// the model, and record, that it was carried out.
func TestInterruptedStepStillPromoting(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		ctx := context.Background()
		write := proposalJSON("WRITE_FILE", map[string]any{"path": "/sandbox/a.md", "content": "once\n"})
		task := r.interrupted(t, write, false)
		// The promotion ran; its record's last commit never happened.
		lost := errors.New("the node stopped")
		_, err := r.exec.Run(ctx, executor.Request{TaskID: task.ID, Requester: "alice", Data: []byte(write),
			Then: func(context.Context, *sql.Tx, *executor.Result) error { return lost }})
		if !errors.Is(err, lost) {
			t.Fatalf("run: %v", err)
		}
		if acts, _ := r.exec.Actions(ctx, task.ID); len(acts) != 1 || acts[0].State != "promoting" {
			t.Fatalf("records: %+v", acts)
		}
		x := &recoveredAfterLook{Executor: r.exec, looked: make(chan []executor.Action, 1)}
		r.runExec = x
		m := &scripted{answers: []string{proposalJSON("FINISH", map[string]any{"response": "done"})}}
		got := r.run(t, m, task.ID, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
		if got.Status.State != tasks.StateCompleted {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		if acts := <-x.looked; len(acts) != 1 || acts[0].State != "promoting" {
			t.Fatalf("the job's first look: %+v", acts)
		}
		acts, err := r.exec.Actions(ctx, task.ID)
		if err != nil || len(acts) != 1 || acts[0].State != "failed" {
			t.Fatalf("records: %+v %v", acts, err)
		}
		if _, err := os.Stat(filepath.Join(r.dir, "a.md")); !os.IsNotExist(err) {
			t.Fatalf("a.md: %v", err)
		}
		h, err := r.store.History(ctx, task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if o := h.Interactions[0].Observation; o == nil || o.ActionID != acts[0].ActionID || o.Outcome != agent.ObsFailed {
			t.Fatalf("interaction 0's observation: %+v; the executor undid the action", o)
		}
		if err := agent.Replay(h, 64<<10); err != nil {
			t.Fatalf("replay: %v", err)
		}
	})
}

// A stored answer whose redaction left it no longer parseable (an
// operator's pattern that runs past a JSON string) is still finished from
// the executor's record: an action that ran is reported, not run again,
// and one that did not is not run from the redacted text. Either way the
// job goes on.
func TestInterruptedRedactedUnparseable(t *testing.T) {
	pattern := regexp.MustCompile(`password=\S+`)
	for _, tc := range []struct {
		name string
		ran  bool
		want string // a.md afterwards, "" for absent
		obs  string
	}{
		{name: "the action had run", ran: true, want: "password=hunter2", obs: agent.ObsCompleted},
		{name: "the action had not run", ran: false, want: "", obs: agent.ObsNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, testdb.SQLite(t))
			ctx := context.Background()
			write := proposalJSON("WRITE_FILE", map[string]any{"path": "/sandbox/a.md", "content": "password=hunter2"})
			stored := pattern.ReplaceAllString(write, "[REDACTED]")
			if _, aerr := agent.ParseAnswer(stored, 64<<10); aerr == nil {
				t.Fatalf("the redacted answer still parses: %s", stored)
			}
			task := r.interrupted(t, stored, true)
			if tc.ran {
				if res, err := r.exec.Run(ctx, executor.Request{TaskID: task.ID, Requester: "alice", Data: []byte(write)}); err != nil || res.Outcome != executor.Completed {
					t.Fatalf("run: %+v %v", res, err)
				}
			}
			m := &scripted{answers: []string{proposalJSON("FINISH", map[string]any{"response": "done"})}}
			got := r.runWith(t, func(c *agent.Config) { c.Redact = []*regexp.Regexp{pattern} }, m, task.ID,
				tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
			if got.Status.State != tasks.StateCompleted {
				t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
			}
			acts, err := r.exec.Actions(ctx, task.ID)
			if err != nil || (tc.ran && len(acts) != 1) || (!tc.ran && len(acts) != 0) {
				t.Fatalf("records: %+v %v", acts, err)
			}
			b, err := os.ReadFile(filepath.Join(r.dir, "a.md"))
			if string(b) != tc.want || (tc.want == "" && !os.IsNotExist(err)) {
				t.Fatalf("a.md = %q (%v), want %q", b, err, tc.want)
			}
			h, err := r.store.History(ctx, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if o := h.Interactions[0].Observation; o == nil || o.Outcome != tc.obs {
				t.Fatalf("interaction 0's observation: %+v, want %s", o, tc.obs)
			}
			if strings.Contains(h.Interactions[0].Response.RawResponse, "hunter2") {
				t.Fatal("the secret is in the history")
			}
		})
	}
}

// The same step, but the file its promotion wrote was edited by hand
// before the recovery: the recovery leaves the file as edited and fails
// the action naming it (executor.ReasonDiverged), and the job's step
// tells the model that reason, not a write carried out; the job goes on
// and ends as the model decides.
func TestInterruptedStepOverChangedFile(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	ctx := context.Background()
	write := proposalJSON("WRITE_FILE", map[string]any{"path": "/sandbox/a.md", "content": "once\n"})
	task := r.interrupted(t, write, false)
	lost := errors.New("the node stopped")
	if _, err := r.exec.Run(ctx, executor.Request{TaskID: task.ID, Requester: "alice", Data: []byte(write),
		Then: func(context.Context, *sql.Tx, *executor.Result) error { return lost }}); !errors.Is(err, lost) {
		t.Fatalf("run: %v", err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, "a.md"), []byte("edited by hand\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if n, err := r.exec.RecoverInterrupted(ctx); n != 1 || err != nil {
		t.Fatalf("RecoverInterrupted = %d, %v", n, err)
	}
	m := &scripted{answers: []string{proposalJSON("FINISH", map[string]any{"response": "done"})}}
	got := r.run(t, m, task.ID, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
	if got.Status.State != tasks.StateCompleted {
		t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
	}
	if b, err := os.ReadFile(filepath.Join(r.dir, "a.md")); err != nil || string(b) != "edited by hand\n" {
		t.Fatalf("a.md = %q, %v; want it as edited", b, err)
	}
	h, err := r.store.History(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if o := h.Interactions[0].Observation; o == nil || o.Outcome != agent.ObsFailed || !strings.HasPrefix(o.Reason, executor.ReasonDiverged) || !strings.Contains(o.Reason, "/sandbox/a.md") {
		t.Fatalf("interaction 0's observation: %+v; want failed, naming a.md", o)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if b, _ := json.Marshal(m.prompts); len(m.prompts) == 0 || !strings.Contains(string(b), "left as found") {
		t.Errorf("the model was not told of the file left as found: %s", b)
	}
}
