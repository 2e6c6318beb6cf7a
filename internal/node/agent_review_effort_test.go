package node_test

import (
	"testing"

	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// The supervisor's model is asked with agent.review_reasoning_effort:
// empty, agent.reasoning_effort's; "default", none sent (a review model
// that does not think, which a server such as Ollama refuses when asked
// to); or its own. Before, the supervisor was always sent the worker's
// reasoning_effort, and a review model that cannot think had every
// review refused while the worker's model thought.
func TestAgentReviewReasoningEffort(t *testing.T) {
	for _, c := range []struct {
		name, model, review string
		want                string // the supervisor's reasoning_effort, raw
	}{
		{"inherited", "judge", "", `"low"`},
		{"none sent", "judge", "default", ""},
		{"its own", "judge", "high", `"high"`},
		{"its own, the same model", "", "high", `"high"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			a := startAgentNode(t, testdb.SQLite(t), func(cf *config.Config) {
				cf.Agent.Review = true
				cf.Agent.ReviewModel = c.model
				cf.Agent.ReasoningEffort = "low"
				cf.Agent.ReviewReasoningEffort = c.review
			})
			a.llm.Push(agentResponse("COMPLETED", "done"), agentResponse("COMPLETED", "it is done"))
			id := a.send(t, "", "do it")
			if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
				t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
			}
			reqs := a.chats()
			if len(reqs) != 2 {
				t.Fatalf("%d model calls, want 2", len(reqs))
			}
			wantModel := c.model
			if wantModel == "" {
				wantModel = llmtest.DefaultModel
			}
			if w, s := reqs[0], reqs[1]; string(w.ReasoningEffort) != `"low"` || string(s.ReasoningEffort) != c.want || s.Model != wantModel {
				t.Fatalf("reasoning_effort: worker %s, supervisor %s (model %s); want \"low\", %s (model %s)",
					w.ReasoningEffort, s.ReasoningEffort, s.Model, c.want, wantModel)
			}
		})
	}
}
