package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/snapnode/snapnode/tasks/taskstest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
)

// countingWriter answers each job (told apart by its task text) with one
// write and then FINISH, and counts the calls per job.
type countingWriter struct {
	mu    sync.Mutex
	calls map[string]int
}

func (c *countingWriter) Complete(ctx context.Context, p agent.Prompt) (*agent.Completion, error) {
	// The task's line: the message also lists the workspace, which
	// changes as the jobs write.
	task := strings.Split(p.Messages[1].Content, "\n")[1]
	c.mu.Lock()
	c.calls[task]++
	n := c.calls[task]
	c.mu.Unlock()
	if n == 1 {
		return &agent.Completion{Text: proposalJSON("WRITE_FILE", map[string]any{"path": "/sandbox/" + uuid.NewString() + ".md", "content": "x\n"})}, nil
	}
	return &agent.Completion{Text: proposalJSON("FINISH", map[string]any{"response": "done"})}, nil
}

// Two nodes' runtimes on one PostgreSQL database share the jobs: each job
// is claimed by one of them at a time and carried out once: two model
// calls and one write per job, never more.
func TestReplicasShareJobs(t *testing.T) {
	dsn := testdb.Postgres(t)
	a, b := newRig(t, dsn), newRig(t, dsn)
	const jobs = 24
	ctx := context.Background()
	ids := make([]string, jobs)
	for i := range ids {
		payload, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": uuid.NewString(), "role": "user",
			"parts": []any{map[string]any{"text": fmt.Sprintf("job %d", i)}}}})
		task, err := taskstest.Send(ctx, a.svc, fmt.Sprintf("requester-%d", i%3), payload)
		if err != nil {
			t.Fatal(err)
		}
		ids[i] = task.ID
	}
	m := &countingWriter{calls: map[string]int{}}
	rctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	runtimes := make([]*agent.Runtime, 2)
	for i, r := range []*rig{a, b} {
		rt, err := agent.New(agent.Config{Queue: r.queue, Store: r.store, Tasks: r.svc, Executor: r.exec, Model: m,
			ContextTokens: 8000, MaxJobs: 3, Lease: 5 * time.Second, Poll: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		runtimes[i] = rt
		wg.Go(func() { rt.Run(rctx) })
	}
	deadline := time.Now().Add(30 * time.Second)
	for _, id := range ids {
		for {
			j, err := a.store.Get(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if j.Status == agent.Success {
				break
			}
			if j.Status.Terminal() || time.Now().After(deadline) {
				t.Fatalf("job %s: %s %s", id, j.Status, j.Reason)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	cancel()
	wg.Wait()
	m.mu.Lock()
	defer m.mu.Unlock()
	for task, n := range m.calls {
		if n != 2 {
			t.Errorf("%q: %d model calls, want 2 (a job worked on twice?)", task, n)
		}
	}
	for _, id := range ids {
		acts, err := a.exec.Actions(ctx, id)
		if err != nil || len(acts) != 1 {
			t.Errorf("task %s: %d actions recorded, want 1 (%v)", id, len(acts), err)
		}
	}
}

// orderModel finishes every job at once and records the order in which
// the jobs' first calls came.
type orderModel struct {
	mu    sync.Mutex
	order []string
}

func (o *orderModel) Complete(ctx context.Context, p agent.Prompt) (*agent.Completion, error) {
	o.mu.Lock()
	o.order = append(o.order, strings.Split(p.Messages[1].Content, "\n")[1])
	o.mu.Unlock()
	return &agent.Completion{Text: proposalJSON("FINISH", map[string]any{"response": "done"})}, nil
}

// One job at a time: a requester with six jobs queued before another's
// one does not make the other wait for all six; requesters take turns.
func TestJobsTakeTurnsAcrossRequesters(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	ctx := context.Background()
	for i, who := range []string{"alice", "alice", "alice", "alice", "alice", "alice", "bob", "bob"} {
		payload, _ := json.Marshal(map[string]any{"message": map[string]any{"messageId": uuid.NewString(), "role": "user",
			"parts": []any{map[string]any{"text": fmt.Sprintf("%s %d", who, i)}}}})
		if _, err := taskstest.Send(ctx, r.svc, who, payload); err != nil {
			t.Fatal(err)
		}
	}
	m := &orderModel{}
	rt, err := agent.New(agent.Config{Queue: r.queue, Store: r.store, Tasks: r.svc, Executor: r.exec, Model: m,
		ContextTokens: 8000, MaxJobs: 1, Poll: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	rctx, cancel := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { rt.Run(rctx); close(stopped) }()
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if done, err := r.store.List(ctx, 0, agent.Success); err == nil && len(done) == 8 || time.Now().After(deadline) {
			break
		}
	}
	cancel()
	<-stopped
	m.mu.Lock()
	defer m.mu.Unlock()
	want := []string{"alice 0", "bob 6", "alice 1", "bob 7", "alice 2", "alice 3", "alice 4", "alice 5"}
	if !slices.Equal(m.order, want) {
		t.Fatalf("order %q, want %q", m.order, want)
	}
}
