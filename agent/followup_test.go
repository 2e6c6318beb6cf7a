package agent_test

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/snapnode/snapnode/tasks/taskstest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// fuModel holds its first answer (a THINK) until released, then answers
// COMPLETED; it records every prompt.
type fuModel struct {
	mu      sync.Mutex
	prompts [][]agent.ChatMessage
	first   chan struct{} // closed when the first call starts
	release chan struct{} // closed by the test: the first call answers
}

const fuThink = `{"schema_version":"1.0.0","id":"0b8f1a3e-6c2d-4f5a-9b7e-1d2c3b4a5f60","reasoning":"Plan the report.","action":"THINK","args":{}}`

const fuDone = `{"action":"COMPLETED","evidence_files":[],"summary_for_supervisor":"Done."}`

func (m *fuModel) Complete(ctx context.Context, p agent.Prompt) (*agent.Completion, error) {
	m.mu.Lock()
	m.prompts = append(m.prompts, p.Messages)
	n := len(m.prompts)
	m.mu.Unlock()
	switch n {
	case 1:
		close(m.first)
		select {
		case <-m.release:
			return &agent.Completion{Text: fuThink}, nil
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	case 2:
		return &agent.Completion{Text: fuDone}, nil
	}
	<-ctx.Done()
	return nil, ctx.Err()
}

func fuSend(t *testing.T, n *rig, taskID, text string) *tasks.Task {
	t.Helper()
	req := map[string]any{"message": map[string]any{"messageId": fmt.Sprintf("m%d", len(text)), "role": "user",
		"parts": []any{map[string]any{"text": text}}}}
	if taskID != "" {
		req["taskId"] = taskID
	}
	payload, _ := json.Marshal(req)
	task, err := taskstest.Send(t.Context(), n.svc, "alice", payload)
	if err != nil {
		t.Fatal(err)
	}
	return task
}

// fuWait waits for the task to reach a terminal state or input_required.
func fuWait(t *testing.T, n *rig, taskID string) *tasks.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	cur, events, err := n.svc.Subscribe(ctx, "alice", taskID)
	if err != nil {
		t.Fatal(err)
	}
	for !cur.Status.State.Terminal() && cur.Status.State != tasks.StateInputRequired {
		select {
		case ev, ok := <-events:
			if !ok {
				if cur, err = n.svc.Task(t.Context(), taskID); err != nil {
					t.Fatal(err)
				}
				if ctx.Err() != nil {
					t.Fatalf("task %s stayed %s", taskID, cur.Status.State)
				}
				if cur, events, err = n.svc.Subscribe(ctx, "alice", taskID); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if ev.Status != nil {
				cur.Status = *ev.Status
			}
		case <-ctx.Done():
			t.Fatalf("task %s stayed %s %q", taskID, cur.Status.State, cur.Status.Message)
		}
	}
	return cur
}

// TestFollowUpWhileWorking sends a follow-up message while the model
// answers the job's first step. queue.go promises that a message on a job
// at work "is told to the model at its next step".
func TestFollowUpWhileWorking(t *testing.T) {
	testdb.Each(t, func(t *testing.T, dsn string) {
		n := newRig(t, dsn)
		m := &fuModel{first: make(chan struct{}), release: make(chan struct{})}
		task := fuStart(t, n, m, agent.Config{ContextTokens: 8000}, "write a report on notes.md")
		fuSend(t, n, task.ID, "and be brief")
		j, err := n.store.Get(t.Context(), task.ID)
		if err != nil {
			t.Fatal(err)
		}
		if j.Status != agent.Running || !strings.Contains(j.PendingInput, "and be brief") {
			t.Fatalf("after the follow-up the job is %s with pending input %q", j.Status, j.PendingInput)
		}
		prompts := fuFinish(t, n, m, task.ID)
		var told bool
		for _, msg := range prompts[1] {
			told = told || strings.Contains(msg.Content, "and be brief")
		}
		if !told {
			j, _ := n.store.Get(t.Context(), task.ID)
			t.Errorf("the second call was not told the follow-up message; pending_input now %s", jsonString(j.PendingInput))
		}
	})
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// fuStart runs the runtime of cfg (its queue, stores, executor and model
// filled in from n and m) until the test ends, sends the task's first
// message and waits for the model's first call.
func fuStart(t *testing.T, n *rig, m *fuModel, cfg agent.Config, text string) *tasks.Task {
	t.Helper()
	cfg.Queue, cfg.Store, cfg.Tasks, cfg.Executor, cfg.Model = n.queue, n.store, n.svc, n.exec, m
	rt, err := agent.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { _ = rt.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	task := fuSend(t, n, "", text)
	select {
	case <-m.first:
	case <-time.After(30 * time.Second):
		t.Fatal("the model was never called")
	}
	return task
}

// fuFinish lets the model's first call answer, waits for the task to be
// completed and returns the prompts of the job's two calls.
func fuFinish(t *testing.T, n *rig, m *fuModel, taskID string) [][]agent.ChatMessage {
	t.Helper()
	close(m.release)
	if got := fuWait(t, n, taskID); got.Status.State != tasks.StateCompleted {
		t.Fatalf("task %s %q; want completed", got.Status.State, got.Status.Message)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.prompts) != 2 {
		t.Fatalf("%d model calls; want 2", len(m.prompts))
	}
	return m.prompts
}

// However long the requester writes — the task's text, a follow-up —
// every call's prompt stays within the context bound, cut with a note,
// and what was said first still reaches the model.
func TestLongTextsStayWithinTheContextBound(t *testing.T) {
	n := newRig(t, testdb.SQLite(t))
	m := &fuModel{first: make(chan struct{}), release: make(chan struct{})}
	const contextTokens, maxTokens = 8000, 2048
	task := fuStart(t, n, m, agent.Config{ContextTokens: contextTokens, MaxTokens: maxTokens},
		"TASK-START "+strings.Repeat("write a long report. ", 200<<10/21))
	fuSend(t, n, task.ID, "FOLLOW-UP-START "+strings.Repeat("and mind the details. ", 200<<10/22))
	prompts := fuFinish(t, n, m, task.ID)
	for i, p := range prompts {
		tokens, all := 0, ""
		for _, msg := range p {
			tokens += (len(msg.Content)+3)/4 + 4 // the runtime's own estimate
			all += msg.Content
		}
		if tokens > contextTokens-maxTokens {
			t.Errorf("call %d: %d tokens, over the bound of %d", i+1, tokens, contextTokens-maxTokens)
		}
		if !strings.Contains(all, "TASK-START") {
			t.Errorf("call %d does not show the task's text", i+1)
		}
		if i == 1 && (!strings.Contains(all, "FOLLOW-UP-START") || !strings.Contains(all, "left out to fit the model's context")) {
			t.Errorf("call 2 was not told the follow-up, cut with a note")
		}
	}
}
