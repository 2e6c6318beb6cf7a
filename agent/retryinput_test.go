package agent_test

import (
	"context"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/llm"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// A RETRY's summary is queued for the next model call in the job's row
// (its pending input), which stays in the database until that call is
// recorded, and for good when the job ends first: the secrets the summary
// names are removed before it is queued, as from everything else stored.
// Before, the summary was queued as the model wrote it, and redacted only
// in the prompt and the history.
func TestRetrySummaryRedactedWhenQueued(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	const key = "sk-abcdefghijklmnopqrstuvwxyz0123456789"
	srv := llmtest.New(t)
	srv.Push(llmtest.Text(`{"action":"RETRY","evidence_files":[],"summary_for_supervisor":"start over with ` + key + ` and corp-token-SECRET42"}`))
	task := r.send(t, "go")
	var (
		mu      sync.Mutex
		pending []string
	)
	srv.SetHandler(func(llmtest.Request) llmtest.Reply {
		in, err := r.store.PendingInput(context.Background(), task.ID)
		mu.Lock()
		pending = append(pending, in)
		mu.Unlock()
		if err != nil {
			t.Error(err)
		}
		return llmtest.Text(finishAnswer)
	})
	m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	got := r.runWith(t, func(c *agent.Config) { c.Redact = []*regexp.Regexp{regexp.MustCompile(`corp-token-\w+`)} },
		m, task.ID, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
	if got.Status.State != tasks.StateCompleted {
		t.Fatalf("task %s %q; want completed", got.Status.State, got.Status.Message)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(pending) != 1 || !strings.Contains(pending[0], "start over with [REDACTED]") {
		t.Fatalf("pending input while the next call ran: %q; want the RETRY's summary, redacted", pending)
	}
	if strings.Contains(pending[0], key) || strings.Contains(pending[0], "SECRET42") {
		t.Fatalf("the job's row keeps the secret in its pending input: %q", pending[0])
	}
}

// Past MaxRetries RETRY answers in one phase the job waits for a human:
// the task is input_required saying how many retries were asked for and
// the last summary, and the step that passed the cap is recorded with
// "retries exhausted"; the RETRY before it restarted the phase.
func TestRetriesExhaustedWaitsForGuidance(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	srv := llmtest.New(t)
	srv.SetHandler(func(llmtest.Request) llmtest.Reply {
		return llmtest.Text(`{"action":"RETRY","evidence_files":[],"summary_for_supervisor":"once more"}`)
	})
	task := r.send(t, "go")
	m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	got := r.runWith(t, func(c *agent.Config) { c.MaxRetries = 1 },
		m, task.ID, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
	const want = "the agent asked to retry its phase more than 1 times: once more"
	if got.Status.State != tasks.StateInputRequired || !strings.Contains(got.Status.Message, want) {
		t.Fatalf("task %s %q; want input_required with %q", got.Status.State, got.Status.Message, want)
	}
	h, err := r.store.History(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	var obs []string
	for _, it := range h.Interactions {
		if it.Observation != nil {
			obs = append(obs, it.Observation.Outcome+"/"+it.Observation.Reason)
		}
	}
	if w := []string{agent.ObsRetried + "/", agent.ObsNone + "/retries exhausted"}; strings.Join(obs, ",") != strings.Join(w, ",") {
		t.Fatalf("observations %q; want %q", obs, w)
	}
	j, err := r.store.Get(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.Status != agent.InterventionRequired || j.Retries != 2 {
		t.Fatalf("job %s with %d retries; want %s with 2", j.Status, j.Retries, agent.InterventionRequired)
	}
}
