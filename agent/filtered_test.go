package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/llm"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// An answer the server's content filter withheld or cut
// (finish_reason "content_filter", with a null, empty or partial
// content) is refused saying so: the history and the job's reason tell
// the operator that the provider's filter stopped it. Before, each said
// only that the answer was empty or its JSON ended early, as of a model
// that wrote nothing.
func TestAnswerStoppedByContentFilter(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	srv := llmtest.New(t)
	for i := range agent.MaxInvalidAnswers + 1 {
		content := ""
		if i%2 == 1 {
			content = `{"schema_version":"1.0.0","id":"p","reasoning":"`
		}
		srv.Push(llmtest.Reply{Content: content, FinishReason: "content_filter"})
	}
	m := serverModel(t, srv)
	task := r.send(t, "write a.md")
	got := r.run(t, m, task.ID, tasks.StateInputRequired, tasks.StateFailed, tasks.StateCompleted)
	const why = `the model server's content filter withheld or cut it (finish_reason "content_filter")`
	if got.Status.State != tasks.StateInputRequired {
		t.Fatalf("task %s %q; want input_required", got.Status.State, got.Status.Message)
	}
	its, err := r.store.Interactions(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(its) < 2 || !strings.Contains(its[0].Response.Error, why) || !strings.Contains(its[1].Response.Error, why) {
		t.Fatalf("history: %+v; want each answer's error to say %q", its, why)
	}
	r.wantJobReason(t, task.ID, why)
}

// serverModel is the model "m" of the model server srv.
func serverModel(t *testing.T, srv *llmtest.Server) *llm.Client {
	t.Helper()
	m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// wantJobReason checks that the reason of the job of taskID says why.
func (r *rig) wantJobReason(t *testing.T, taskID, why string) {
	t.Helper()
	job, err := r.store.Get(context.Background(), taskID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(job.Reason, why) {
		t.Errorf("job reason %q; want %q", job.Reason, why)
	}
}
