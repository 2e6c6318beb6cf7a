package agent_test

import (
	"context"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// An answer the server cut at the answer's token cap (finish_reason
// "length") before its JSON ended is refused saying so: the model is told
// to answer shorter, and the history, the job's reason and the task tell
// the operator that max_tokens cut it; before, the cut was dropped, and
// each said only that the JSON ended early.
func TestAnswerCutAtTheTokenCap(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	srv := llmtest.New(t)
	cut := `{"schema_version":"1.0.0","id":"p","reasoning":"write it all","action":"WRITE_FILE","args":{"path":"/sandbox/a.md","content":"aaaa`
	for range agent.MaxInvalidAnswers + 1 {
		srv.Push(llmtest.Reply{Content: cut, FinishReason: "length"})
	}
	m := serverModel(t, srv)
	task := r.send(t, "write a long a.md")
	got := r.runWith(t, func(c *agent.Config) { c.MaxTokens = 300 }, m, task.ID,
		tasks.StateInputRequired, tasks.StateFailed, tasks.StateCompleted)
	const why = "cut at the answer's token cap (agent.max_tokens, 300 tokens)"
	if got.Status.State != tasks.StateInputRequired {
		t.Fatalf("task %s %q; want input_required", got.Status.State, got.Status.Message)
	}
	reqs := srv.Requests()
	if len(reqs) < 2 {
		t.Fatalf("%d calls", len(reqs))
	}
	msgs := reqs[1].Messages
	if told := msgs[len(msgs)-1].Content; !strings.Contains(told, why) || !strings.Contains(told, "shorter") {
		t.Errorf("the model was told %q; want it to say %q and to answer shorter", told, why)
	}
	its, err := r.store.Interactions(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(its) == 0 || !strings.Contains(its[0].Response.Error, why) {
		t.Fatalf("history: %+v; want the first answer's error to say %q", its, why)
	}
	r.wantJobReason(t, task.ID, why)
}
