package agent_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/worker"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// A real worker that answers garbage is stopped and the job waits, as
// before; the answer it sent counts against the job's budget, as a
// model server's refused answer does (agent.AnsweredError): the step
// records its cost, priced at the estimate of its prompt and answer.
// Before, the worker's refused answer cost the job nothing.
func TestWorkerGarbageCounted(t *testing.T) {
	p := pythonWorker(t, "garbage.py", worker.Config{StepTimeout: time.Minute})
	r := newRig(t, testdb.SQLite(t))
	task := r.send(t, "go")
	got := r.runWith(t, func(cfg *agent.Config) { cfg.PricePerMTokPrompt, cfg.PricePerMTokAnswer = 10, 10 }, p, task.ID,
		tasks.StateInputRequired, tasks.StateFailed, tasks.StateCompleted)
	if got.Status.State != tasks.StateInputRequired {
		t.Fatalf("task %s %q: want input_required, the worker stopped", got.Status.State, got.Status.Message)
	}
	ctx := context.Background()
	j, err := r.store.Get(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	its, err := r.store.Interactions(ctx, task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(its) != 1 || !strings.Contains(its[0].Response.Error, "garbage") {
		t.Fatalf("%d steps (%+v); want the one refused", len(its), its)
	}
	if its[0].Response.CostUSD <= 0 || j.CostCents <= 0 || j.CostCents != its[0].Response.CostUSD*100 {
		t.Errorf("the refused answer cost %g USD, the job %g cents; want it counted in both", its[0].Response.CostUSD, j.CostCents)
	}
	if j.Seconds <= 0 {
		t.Errorf("the job's time %g s; want the step's", j.Seconds)
	}
}
