package agent_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/llm"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// A model server that starts every answer and drips it past the request
// time-out has each call priced (its prompt and the bytes it sent) and
// recorded as a time-out, and the job waits for a human after the
// retries, its cost counted. Before, a call the runtime's request
// time-out cut cost nothing: such a server ran a job's calls, resumed
// after each wait, for free past max_cost_cents.
func TestCutAnswersPriced(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		io.Copy(io.Discard, req.Body) // the server then sees the client go
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"message":{"content":"`+strings.Repeat("x", 40_000))
		w.(http.Flusher).Flush()
		<-req.Context().Done()
	}))
	t.Cleanup(srv.Close)
	// The client's own time-out is long: the runtime's cuts each call.
	m, err := llm.New(llm.Config{BaseURL: srv.URL + "/v1", Model: "m", Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	task := r.send(t, "go")
	got := r.runWith(t, func(c *agent.Config) {
		c.RequestTimeout, c.Backoff = 300*time.Millisecond, time.Millisecond
		c.PricePerMTokPrompt, c.PricePerMTokAnswer = 1000, 1000
	}, m, task.ID, tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
	if got.Status.State != tasks.StateInputRequired {
		t.Fatalf("task %s %q; want input-required after the retries", got.Status.State, got.Status.Message)
	}
	its, err := r.store.Interactions(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	total := 0.0
	for _, it := range its {
		if it.Response.Status != agent.ResponseTimeout || it.Response.CostUSD <= 0 {
			t.Errorf("step %d: %s, cost %g USD; want a time-out, priced", it.Sequence, it.Response.Status, it.Response.CostUSD)
		}
		total += it.Response.CostUSD
	}
	j, err := r.store.Get(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	// 40,000 bytes of answer are at least 10,000 tokens, 1 cent each.
	if len(its) != agent.MaxAPIRetries+1 || j.CostCents < float64(len(its))*10_000*0.1 || j.CostCents != total*100 {
		t.Errorf("%d steps, the job's cost %g cents (steps' %g); want %d steps, each at least 10,000 tokens' worth", len(its), j.CostCents, total*100, agent.MaxAPIRetries+1)
	}
}
