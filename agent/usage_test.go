package agent_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/taskstest"
)

// liar is a model server that reports a negative token count on its
// first answer, then honest ones: reads of in-N.md, each of its calls
// costing 0.4 cents at a price of 1 USD per million tokens.
type liar struct{ calls atomic.Int64 }

func (l *liar) Complete(context.Context, agent.Prompt) (*agent.Completion, error) {
	n := l.calls.Add(1)
	c := &agent.Completion{Text: fmt.Sprintf(`{"schema_version":"1.0.0","id":"00000000-0000-4000-8000-%012d","reasoning":"reading","action":"READ_FILE","args":{"path":"/sandbox/in-%d.md"}}`, n, n),
		PromptTokens: 3000, CompletionTokens: 1000}
	if n == 1 {
		c.PromptTokens = -1_000_000_000
	}
	return c, nil
}

// A negative token count from the model server counts as nothing: it
// cannot lower the job's cost below what it spent, nor lift its limit.
func TestNegativeUsageCountsAsNothing(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	ctx := context.Background()
	for i := range 10 {
		if err := os.WriteFile(filepath.Join(r.dir, fmt.Sprintf("in-%d.md", i+1)), []byte("input\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	task, err := taskstest.Send(ctx, r.svc, "alice", []byte(`{"message":{"messageId":"m","role":"user","parts":[{"text":"think"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	m := &liar{}
	got := r.runWith(t, func(c *agent.Config) {
		c.MaxCostCents, c.PricePerMTokPrompt, c.PricePerMTokAnswer, c.MaxSteps = 1, 1, 1, 30
	}, m, task.ID, tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
	if got.Status.State != tasks.StateFailed || !strings.Contains(got.Status.Message, "HALTED_COST") {
		t.Fatalf("task %s %q: want failed, HALTED_COST", got.Status.State, got.Status.Message)
	}
	j, err := r.store.Get(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	// The lie's call counts 0.1 cents (its completion); each honest one 0.4.
	if j.CostCents < 1 || j.CostCents > 1.5 || j.PromptTokens < 0 || m.calls.Load() > 4 {
		t.Fatalf("cost %.2f cents, prompt tokens %d, %d calls: the lie lowered the cost", j.CostCents, j.PromptTokens, m.calls.Load())
	}
}
