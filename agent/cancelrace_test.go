package agent_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

// cancelsFirst is an executor whose first WRITE_FILE has the task canceled, by
// another process, just before it hands the proposal on: the cancel
// lands after the step's read of the task, before the executor's first
// commit. ran gets what that Run returned.
type cancelsFirst struct {
	agent.Executor
	cancel func(taskID string)
	once   sync.Once
	ran    chan error
}

func (c *cancelsFirst) Run(ctx context.Context, req executor.Request) (*executor.Result, error) {
	first := false
	if bytes.Contains(req.Data, []byte(`"WRITE_FILE"`)) {
		c.once.Do(func() { first = true })
	}
	if !first {
		return c.Executor.Run(ctx, req)
	}
	c.cancel(req.TaskID)
	res, err := c.Executor.Run(ctx, req)
	if err == nil && res.Outcome != executor.Completed {
		err = errors.New("the action " + string(res.Outcome) + ": " + res.Reason)
	}
	c.ran <- err
	return res, err
}

// A proposal whose task was canceled after the step read the task, and
// before the executor took the proposal, does not run: the task's state
// is checked again in the executor's first commit, as an operator's
// approval checks it, so the action runs before the cancel or not at
// all. Before, the step trusted its earlier read, and a cancel made by
// another process of a shared database (whose event never reaches this
// one, and which the lease renewal sees only at its next tick) was
// followed by the write it came to stop.
func TestNoActionAfterACancelElsewhere(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		r := newRig(t, dsn)
		// Another process's task service on the same database: its
		// cancel publishes no event to this runtime.
		elsewhere := tasks.NewService(r.ts, tasks.ServiceOptions{})
		id := r.send(t, "write a file").ID
		x := &cancelsFirst{Executor: r.exec, ran: make(chan error, 1), cancel: func(taskID string) {
			if _, err := taskstest.Cancel(context.Background(), elsewhere, "alice", []byte(`{"taskId":"`+taskID+`"}`)); err != nil {
				t.Error(err)
			}
		}}
		m := &scripted{answers: []string{
			proposalJSON("WRITE_FILE", map[string]any{"path": "/sandbox/after.md", "content": "written after the cancel\n"}),
			proposalJSON("FINISH", map[string]any{"response": "done"}),
		}}
		_, stop := r.runtimeOn(t, m, func(cfg *agent.Config) {
			cfg.Executor, cfg.Lease = x, time.Minute
		})
		var runErr error
		select {
		case runErr = <-x.ran:
		case <-time.After(20 * time.Second):
			t.Fatal("the proposal never reached the executor")
		}
		// The job ends (canceled) before the runtime is stopped: a stop
		// first would leave it for the next start.
		for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			j, err := r.store.Get(context.Background(), id)
			if err != nil {
				t.Fatal(err)
			}
			if j.Status.Terminal() {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s %q; want it canceled", j.Status, j.Reason)
			}
		}
		stop()
		if _, err := os.Stat(filepath.Join(r.dir, "after.md")); err == nil {
			t.Errorf("after.md was written after its task was canceled (the executor's Run: %v)", runErr)
		}
		acts, err := r.exec.Actions(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range acts {
			if a.State != "failed" {
				t.Errorf("action %s (%s) of the canceled task is %s; want none, or failed", a.ActionID, a.Action, a.State)
			}
		}
		h := validHistory(t, r, id)
		if h.Status != agent.Canceled {
			t.Errorf("job %s; want %s", h.Status, agent.Canceled)
		}
		if n := len(h.Interactions); n != 1 {
			t.Fatalf("%d interactions; want the one step, not acted on", n)
		}
		if it := h.Interactions[0]; it.Response.Action != "WRITE_FILE" || it.Response.NewStatus != agent.Canceled ||
			it.Observation == nil || it.Observation.Outcome != agent.ObsNone {
			t.Errorf("step %+v, observation %+v; want the WRITE_FILE, not acted on, new status CANCELED", it.Response, it.Observation)
		}
	})
}
