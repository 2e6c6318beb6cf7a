package agent_test

import (
	"context"
	"slices"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// lateLines is a model whose every step after the first skipped a late
// line for the step before, as a worker pool tells it
// (Completion.LateLines).
type lateLines struct{ scripted }

func (m *lateLines) Complete(ctx context.Context, p agent.Prompt) (*agent.Completion, error) {
	c, err := m.scripted.Complete(ctx, p)
	if err == nil && p.Step > 0 {
		c.LateLines = []int{p.Step - 1}
	}
	return c, err
}

// A late line a worker wrote for a past step, skipped and never run, is
// told in the history of the step during which it came: the operator
// explaining the job reads that a late line for step N was skipped.
// Before, it was only logged and counted (worker.Pool.StaleLines).
func TestLateLinesInHistory(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	task := readingJob(t, r, 1)
	m := &lateLines{scripted{answers: []string{readAnswer(1), finishAnswer}}}
	if got := r.run(t, m, task.ID, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
		t.Fatalf("task %s %q; want completed", got.Status.State, got.Status.Message)
	}
	h := validHistory(t, r, task.ID)
	if len(h.Interactions) != 2 {
		t.Fatalf("%d interactions; want 2", len(h.Interactions))
	}
	if got := h.Interactions[0].Response.LateLines; len(got) != 0 {
		t.Errorf("step 0: late lines %v; want none", got)
	}
	if got := h.Interactions[1].Response.LateLines; !slices.Equal(got, []int{0}) {
		t.Errorf("step 1: late lines %v; want [0]", got)
	}
}

// Replay refuses a late line that names a step not before the one
// during which it was skipped: the worker pool takes such a line as the
// answer or stops the worker, never skips it.
func TestReplayLateLineNotPast(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	task := readingJob(t, r, 1)
	m := &lateLines{scripted{answers: []string{readAnswer(1), finishAnswer}}}
	r.run(t, m, task.ID, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
	h := validHistory(t, r, task.ID)
	h.Interactions[1].Response.LateLines = []int{1}
	if err := agent.Replay(h, 64<<10); err == nil {
		t.Fatal("replay took a late line for the step itself")
	}
}
