package agent_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/tasks"
)

// stallingTasks is the task service, except that reading task stall
// blocks (a slow database) until the test ends; entered is closed when
// the first such read begins.
type stallingTasks struct {
	agent.Tasks
	stall   string
	entered chan struct{}
	release <-chan struct{}
}

func (s *stallingTasks) Task(ctx context.Context, id string) (*tasks.Task, error) {
	if id == s.stall {
		select {
		case <-s.entered:
		default:
			close(s.entered)
		}
		select {
		case <-s.release:
		case <-ctx.Done():
		}
		return nil, ctx.Err()
	}
	return s.Tasks.Task(ctx, id)
}

// The runtime's pass that forgets ended jobs does not hold up the
// dispatch of new ones: it ran on the dispatcher's goroutine, and a slow
// read of one ended job's task (up to a hundred of them a pass) kept every
// new job waiting behind it.
func TestForgettingDoesNotHoldUpDispatch(t *testing.T) {
	r := newRig(t, "sqlite:"+filepath.Join(t.TempDir(), "agent.db"))
	first := r.send(t, "first")
	done := r.run(t, &scripted{answers: []string{proposalJSON("FINISH", map[string]any{"response": "done"})}}, first.ID, tasks.StateCompleted)
	if done.Status.State != tasks.StateCompleted {
		t.Fatalf("first task %s", done.Status.State)
	}

	release := make(chan struct{})
	defer close(release)
	st := &stallingTasks{Tasks: r.svc, stall: first.ID, entered: make(chan struct{}), release: release}
	rt, err := agent.New(agent.Config{Queue: r.queue, Store: r.store, Tasks: st, Executor: r.exec,
		Model:         &scripted{answers: []string{proposalJSON("FINISH", map[string]any{"response": "done"})}},
		ContextTokens: 8000, Lease: time.Second, Poll: time.Millisecond, ForgetAfter: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	go func() { rt.Run(ctx); close(stopped) }()
	defer func() { cancel(); <-stopped }()
	select {
	case <-st.entered:
	case <-time.After(20 * time.Second):
		t.Fatal("the runtime never looked for ended jobs to forget")
	}

	second := r.send(t, "second")
	deadline := time.Now().Add(20 * time.Second)
	for {
		cur, err := r.svc.Task(ctx, second.ID)
		if err != nil {
			t.Fatal(err)
		}
		if cur.Status.State == tasks.StateCompleted {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("a new task stayed %s while the forgetting pass was stalled", cur.Status.State)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
