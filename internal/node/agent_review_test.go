package node_test

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// roles are the roles of a history's interactions, in order.
func roles(h *agent.History) []string {
	var out []string
	for _, it := range h.Interactions {
		out = append(out, it.Request.Metadata.Role+"/"+it.Request.Metadata.Phase)
	}
	return out
}

// With review on, the worker's COMPLETED goes to a supervisor (its own
// prompt and model), which sends the work back once with its reasons; the
// worker fixes it from its recovery point and the supervisor accepts.
func TestAgentReviewRetryThenAccept(t *testing.T) {
	for _, dialect := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"sqlite", testdb.SQLite}, {"postgres", testdb.Postgres}} {
		t.Run(dialect.name, func(t *testing.T) {
			a := startAgentNode(t, dialect.dsn(t), func(c *config.Config) {
				c.Agent.Review = true
				c.Agent.ReviewModel = "judge"
			})
			a.llm.Push(
				llmtest.Text(prop("WRITE_FILE", map[string]any{"path": "/sandbox/report.md", "content": "apples 1\npears 2\n"})),
				agentResponse("COMPLETED", "report.md lists the fruit", "/sandbox/report.md"),
				agentResponse("RETRY", "report.md has no total line: add 'total 3'"),
				llmtest.Text(prop("WRITE_FILE", map[string]any{"path": "/sandbox/report.md", "content": "apples 1\npears 2\ntotal 3\n"})),
				agentResponse("COMPLETED", "report.md lists the fruit and their total", "/sandbox/report.md"),
				agentResponse("COMPLETED", "the report is complete and totals right"),
			)
			id := a.send(t, "", "count the fruit into report.md")
			got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
			if got.Status.State != tasks.StateCompleted || got.Status.Message != "report.md lists the fruit and their total" {
				t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
			}
			if b, _ := os.ReadFile(a.sandboxFile("report.md")); string(b) != "apples 1\npears 2\ntotal 3\n" {
				t.Fatalf("report.md = %q", b)
			}
			h := a.history(t, id)
			want := []string{"Worker/work", "Worker/work", "Supervisor/review", "Worker/work", "Worker/work", "Supervisor/review"}
			if got := roles(h); !slices.Equal(got, want) {
				t.Fatalf("roles %v, want %v", got, want)
			}
			if h.Interactions[1].Response.NewStatus != agent.Reviewing || h.Interactions[2].StateBefore != agent.Reviewing ||
				h.Interactions[2].Response.NewStatus != agent.Running || h.Interactions[5].Response.NewStatus != agent.Success {
				t.Fatalf("transitions: %+v", h.Interactions)
			}
			// Each worker COMPLETED is a recovery point naming the action
			// that wrote the file; the RETRY restarted from the first.
			if len(h.RecoveryPoints) != 2 {
				t.Fatalf("recovery points %+v", h.RecoveryPoints)
			}
			for i, seq := range []int{1, 4} {
				rp := h.RecoveryPoints[i]
				write := h.Interactions[seq-1].Observation.ActionID
				if rp.Sequence != seq || rp.ResumePhase != agent.PhaseReview || !slices.Equal(rp.RollbackFiles, []string{write}) {
					t.Fatalf("recovery point %d: %+v (the write was %s)", i, rp, write)
				}
			}
			if o := h.Interactions[2].Observation; o == nil || o.Outcome != agent.ObsRetried || !strings.Contains(o.Reason, h.RecoveryPoints[0].CheckpointID) {
				t.Fatalf("the RETRY's observation: %+v", o)
			}
			reqs := a.chats()
			if len(reqs) != 6 {
				t.Fatalf("%d model calls", len(reqs))
			}
			sup := reqs[2]
			if sup.Model != "judge" || !strings.Contains(sup.Messages[0].Content, "You are the supervisor") ||
				!strings.Contains(sup.Messages[1].Content, "report.md lists the fruit") ||
				!strings.Contains(sup.Messages[1].Content, "The evidence file /sandbox/report.md (17 bytes) holds:\napples 1\npears 2\n") {
				t.Fatalf("the supervisor's request (model %s): %+v", sup.Model, sup.Messages)
			}
			if reqs[0].Model != llmtest.DefaultModel || h.Interactions[2].Request.Metadata.Model != "judge" {
				t.Fatalf("models: worker %s, supervisor recorded %s", reqs[0].Model, h.Interactions[2].Request.Metadata.Model)
			}
			if !strings.Contains(requestText(reqs[3]), "add 'total 3'") || strings.Contains(reqs[3].Messages[0].Content, "You are the supervisor") {
				t.Fatalf("the worker was not told the supervisor's reasons: %s", requestText(reqs[3]))
			}
			final, _ := a.Tasks.Task(context.Background(), id)
			if !slices.ContainsFunc(final.Artifacts, func(art tasks.Artifact) bool {
				return art.ArtifactID == "review" && *art.Parts[0].Text == "the report is complete and totals right"
			}) {
				t.Fatalf("no review artifact: %+v", final.Artifacts)
			}
		})
	}
}

// A supervisor that sends the work back more than max_retries times
// makes the job wait for a human: the task is input_required with the
// count and the supervisor's last reasons, and the step that passed the
// cap is recorded with "retries exhausted".
func TestAgentReviewRetriesExhausted(t *testing.T) {
	a := startAgentNode(t, testdb.SQLite(t), func(c *config.Config) {
		c.Agent.Review = true
		c.Agent.MaxRetries = 1
	})
	a.llm.Push(
		agentResponse("COMPLETED", "done"),
		agentResponse("RETRY", "not done"),
		agentResponse("COMPLETED", "done now"),
		agentResponse("RETRY", "still not done"),
	)
	id := a.send(t, "", "do it")
	got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
	const want = "the supervisor sent the work back more than 1 times: still not done"
	if got.Status.State != tasks.StateInputRequired || !strings.Contains(got.Status.Message, want) {
		t.Fatalf("task %s %q; want input_required with %q", got.Status.State, got.Status.Message, want)
	}
	h := a.history(t, id)
	if want := []string{"Worker/work", "Supervisor/review", "Worker/work", "Supervisor/review"}; !slices.Equal(roles(h), want) {
		t.Fatalf("roles %v, want %v", roles(h), want)
	}
	if o := h.Interactions[1].Observation; o == nil || o.Outcome != agent.ObsRetried || o.Text != "the work goes back to the worker" {
		t.Fatalf("the first RETRY's observation: %+v", o)
	}
	if o := h.Interactions[3].Observation; o == nil || o.Outcome != agent.ObsNone || o.Reason != "retries exhausted" {
		t.Fatalf("the second RETRY's observation: %+v", o)
	}
}

// `snapnode job resume ID --from CHECKPOINT` (the admin socket's
// job-resume): the changes made after the checkpoint are undone through
// the executor, and the job goes on in the checkpoint's phase.
func TestAgentResumeFromCheckpoint(t *testing.T) {
	a := startAgentNode(t, testdb.SQLite(t), func(c *config.Config) { c.Agent.Review = true })
	a.llm.Push(
		llmtest.Text(prop("WRITE_FILE", map[string]any{"path": "/sandbox/plan.md", "content": "v1\n"})),
		agentResponse("COMPLETED", "plan v1", "/sandbox/plan.md"),
		agentResponse("RETRY", "make it v2"),
		llmtest.Text(prop("WRITE_FILE", map[string]any{"path": "/sandbox/plan.md", "content": "v2\n"})),
		llmtest.Text(prop("WRITE_FILE", map[string]any{"path": "/sandbox/extra.md", "content": "extra\n"})),
		agentResponse("COMPLETED", "plan v2", "/sandbox/plan.md"),
		agentResponse("STUCK", "v1 was better; a human should choose"),
	)
	id := a.send(t, "", "write plan.md")
	if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateInputRequired {
		t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
	}
	h := a.history(t, id)
	if len(h.RecoveryPoints) != 2 {
		t.Fatalf("recovery points %+v", h.RecoveryPoints)
	}
	first := h.RecoveryPoints[0].CheckpointID
	sock := admin.Path(a.dataDir)
	if _, err := admin.Call(context.Background(), sock, admin.Request{Op: "job-resume", Task: id, Checkpoint: "nope"}); err == nil ||
		!strings.Contains(err.Error(), "no checkpoint") || !strings.Contains(err.Error(), first) {
		t.Fatalf("an unknown checkpoint: %v", err)
	}
	a.llm.Push(agentResponse("COMPLETED", "v1 it is"))
	res, err := admin.Call(context.Background(), sock, admin.Request{Op: "job-resume", Task: id, Checkpoint: first})
	if err != nil {
		t.Fatal(err)
	}
	var resumed agent.Resumed
	if err := json.Unmarshal(res, &resumed); err != nil || len(resumed.RolledBack) != 2 || resumed.Phase != agent.PhaseReview {
		t.Fatalf("resumed %s: %v", res, err)
	}
	got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed)
	if got.Status.State != tasks.StateCompleted || got.Status.Message != "plan v1" {
		t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
	}
	if b, _ := os.ReadFile(a.sandboxFile("plan.md")); string(b) != "v1\n" {
		t.Fatalf("plan.md = %q, want v1 restored", b)
	}
	if _, err := os.Stat(a.sandboxFile("extra.md")); !os.IsNotExist(err) {
		t.Fatalf("extra.md was not removed: %v", err)
	}
	reqs := a.chats()
	last := reqs[len(reqs)-1]
	if !strings.Contains(last.Messages[1].Content, "plan v1") || !strings.Contains(last.Messages[1].Content, "holds:\nv1\n") ||
		!strings.Contains(requestText(last), "restarted the job from checkpoint "+first) {
		t.Fatalf("the supervisor after the resume: %s", requestText(last))
	}
	// A job that ended is not resumed.
	if _, err := admin.Call(context.Background(), sock, admin.Request{Op: "job-resume", Task: id, Checkpoint: first}); err == nil ||
		!strings.Contains(err.Error(), "cannot be resumed") {
		t.Fatalf("resuming an ended job: %v", err)
	}
}

// Under review a FINISH is no way around the supervisor: its response is
// the summary reviewed, and the task ends only once the supervisor
// accepts it.
func TestAgentReviewOfFinish(t *testing.T) {
	a := startAgentNode(t, testdb.SQLite(t), func(c *config.Config) { c.Agent.Review = true })
	a.llm.Push(finish("the answer is 42"), agentResponse("COMPLETED", "42 is right"))
	id := a.send(t, "", "what is the answer?")
	got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
	if got.Status.State != tasks.StateCompleted || got.Status.Message != "the answer is 42" {
		t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
	}
	h := a.history(t, id)
	if r := roles(h); !slices.Equal(r, []string{"Worker/work", "Supervisor/review"}) {
		t.Fatalf("roles %v", r)
	}
	reqs := a.chats()
	if !strings.Contains(reqs[0].Messages[0].Content, "A supervisor reviews your work") ||
		!strings.Contains(reqs[1].Messages[1].Content, "the answer is 42") {
		t.Fatalf("prompts: worker %q, supervisor %q", reqs[0].Messages[0].Content, reqs[1].Messages[1].Content)
	}
}

// agent.reasoning_effort reaches the model server: sent with the worker's
// calls and the supervisor's (a model of its own on the same server), and
// with none when it is empty. Before, the node had no such setting.
func TestAgentReasoningEffortSent(t *testing.T) {
	for _, effort := range []string{"", "none"} {
		t.Run("effort="+effort, func(t *testing.T) {
			a := startAgentNode(t, testdb.SQLite(t), func(c *config.Config) {
				c.Agent.Review = true
				c.Agent.ReviewModel = "judge"
				c.Agent.ReasoningEffort = effort
			})
			a.llm.Push(
				agentResponse("COMPLETED", "nothing to do"),
				agentResponse("COMPLETED", "nothing was to be done"),
			)
			id := a.send(t, "", "do nothing")
			if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
				t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
			}
			want := ""
			if effort != "" {
				want = `"` + effort + `"`
			}
			models := map[string]bool{}
			for _, r := range a.llm.Requests() {
				if r.Path != "/v1/chat/completions" {
					continue
				}
				models[r.Model] = true
				if string(r.ReasoningEffort) != want {
					t.Errorf("a request to %s sent reasoning_effort %q; want %q", r.Model, r.ReasoningEffort, want)
				}
			}
			if !models["judge"] || len(models) != 2 {
				t.Errorf("requests to %v; want the worker's model and the supervisor's", models)
			}
		})
	}
}
