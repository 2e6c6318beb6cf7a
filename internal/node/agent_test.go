package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/nettest"
	"github.com/snapnode/snapnode/internal/node"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/internal/testutil"
	"github.com/snapnode/snapnode/schemas"
	"github.com/snapnode/snapnode/tasks"
)

// agentNode is a node whose agent asks a scripted model server.
type agentNode struct {
	*node.Node
	maxAnswer int // the node's agent.max_answer_bytes, which replay needs
	llm       *llmtest.Server
	alice     *requester
	dataDir   string
}

// startAgentNode starts a node on the database dsn with its agent pointed
// at a new scripted model server; mutate adjusts the settings.
func startAgentNode(t *testing.T, dsn string, mutate func(*config.Config), opts ...llmtest.Option) *agentNode {
	t.Helper()
	srv := llmtest.New(t, opts...)
	dataDir := filepath.Join(t.TempDir(), "data")
	var maxAnswer int
	n, _ := startNode(t, func(c *config.Config) {
		c.DataDir = dataDir
		c.Database = dsn
		c.Agent.LLMURL = srv.URL()
		c.Agent.LLMModel = llmtest.DefaultModel
		c.Agent.RetryBackoff = config.Duration{Duration: 5 * time.Millisecond}
		c.Agent.Lease = config.Duration{Duration: 2 * time.Second}
		if mutate != nil {
			mutate(c)
		}
		maxAnswer = c.Agent.MaxAnswerBytes
	})
	if err := os.MkdirAll(filepath.Join(dataDir, "sandbox"), 0o700); err != nil {
		t.Fatal(err)
	}
	a := &agentNode{Node: n, maxAnswer: maxAnswer, llm: srv, alice: newRequester(t, n.RelayURLs()), dataDir: dataDir}
	t.Cleanup(func() { a.checkHistories(t) }) // before the node stops
	return a
}

// checkHistories checks every job's history as `snapnode job history`
// prints it: it validates against the published schema, replays
// consistently, and a tampered copy does not.
func (a *agentNode) checkHistories(t *testing.T) {
	ctx := context.Background()
	jobs, err := a.Agent().Store().List(ctx, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, j := range jobs {
		h := a.history(t, j.TaskID)
		b, _ := json.Marshal(h)
		var v any
		json.Unmarshal(b, &v)
		if err := schemas.JobHistory().Validate(v); err != nil {
			t.Errorf("job %s: history does not validate: %v\n%s", j.TaskID, err, b)
		}
		if err := agent.Replay(h, a.maxAnswer); err != nil {
			t.Errorf("job %s: replay: %v\n%s", j.TaskID, err, b)
		}
		if len(h.Interactions) == 0 {
			continue
		}
		tampered := *h
		tampered.Interactions = slices.Clone(h.Interactions)
		last := &tampered.Interactions[len(tampered.Interactions)-1]
		if last.Response.Kind == agent.KindProposal || last.Response.Kind == agent.KindAgentResponse {
			last.Response.Action = "DELETE_FILE"
			if h.Interactions[len(h.Interactions)-1].Response.Action == "DELETE_FILE" {
				last.Response.Action = "WRITE_FILE"
			}
		} else {
			last.Response.NewStatus = agent.Success
		}
		if agent.Replay(&tampered, a.maxAnswer) == nil {
			t.Errorf("job %s: a tampered history replays", j.TaskID)
		}
	}
}

// sandboxFile is the host path of a workspace file.
func (a *agentNode) sandboxFile(name string) string { return filepath.Join(a.dataDir, "sandbox", name) }

// send sends free text as a new task (or on taskID) and returns its id.
func (a *agentNode) send(t *testing.T, taskID, s string) string {
	t.Helper()
	p := text(s)
	p["message"].(map[string]any)["messageId"] = uuid.NewString()
	if taskID != "" {
		p["taskId"] = taskID
	}
	return taskOf(t, a.alice.call(t, a.Node, "message/send", p, false)).ID
}

// wait follows the task's events until it is in one of the states, and
// returns it then.
func (a *agentNode) wait(t *testing.T, taskID string, states ...tasks.State) *tasks.Task {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		cur, events, err := a.Tasks.Subscribe(ctx, a.alice.key.Address(identity.Mainnet), taskID)
		if err != nil {
			t.Fatal(err)
		}
		for {
			for _, s := range states {
				if cur.Status.State == s {
					return cur
				}
			}
			ev, ok := <-events
			if !ok {
				break
			}
			if ev.Status != nil {
				cur.Status = *ev.Status
			}
		}
		if ctx.Err() != nil {
			t.Fatalf("task %s stayed %s %q, want %v", taskID, cur.Status.State, cur.Status.Message, states)
		}
	}
}

// history returns the job's stored history.
func (a *agentNode) history(t *testing.T, taskID string) *agent.History {
	t.Helper()
	h, err := a.Agent().Store().History(context.Background(), taskID)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// chats are the chat-completion requests the model server got.
func (a *agentNode) chats() []llmtest.Request {
	var out []llmtest.Request
	for _, r := range a.llm.Requests() {
		if strings.HasSuffix(r.Path, "/chat/completions") {
			out = append(out, r)
		}
	}
	return out
}

// requestText is everything a model request sent, for searching.
func requestText(r llmtest.Request) string {
	var b strings.Builder
	for _, m := range r.Messages {
		b.WriteString(m.Content)
		b.WriteString("\n")
	}
	return b.String()
}

// prop is a proposal as a model answers it.
func prop(action string, args map[string]any) string {
	b, _ := json.Marshal(map[string]any{"schema_version": "1.0.0", "id": uuid.NewString(),
		"reasoning": "to do " + action, "action": action, "args": args})
	return string(b)
}

func finish(response string) llmtest.Reply {
	return llmtest.Text(prop("FINISH", map[string]any{"response": response}))
}

func agentResponse(action, summary string, files ...string) llmtest.Reply {
	if files == nil {
		files = []string{}
	}
	return llmtest.JSON(map[string]any{"action": action, "evidence_files": files, "summary_for_supervisor": summary})
}

// The agent end to end, with the real daemon, over the embedded relay,
// against a scripted OpenAI-compatible server, on SQLite and PostgreSQL.
func TestAgentEndToEnd(t *testing.T) {
	// Each scenario's node has a database of its own: nodes sharing one
	// would share their jobs, as replicas do.
	for _, dialect := range []struct {
		name string
		dsn  func(testing.TB) string
	}{{"sqlite", testdb.SQLite}, {"postgres", testdb.Postgres}} {
		t.Run(dialect.name, func(t *testing.T) { agentScenarios(t, dialect.dsn) })
	}
}

func agentScenarios(t *testing.T, fresh func(testing.TB) string) {
	t.Run("write then finish", func(t *testing.T) {
		a := startAgentNode(t, fresh(t), nil)
		a.llm.Push(llmtest.Text(prop("WRITE_FILE", map[string]any{"path": "/sandbox/report.md", "content": "# Report\n"})), finish("report.md is written"))
		id := a.send(t, "", "write a report into report.md")
		got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
		if got.Status.State != tasks.StateCompleted || got.Status.Message != "report.md is written" {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		if b, err := os.ReadFile(a.sandboxFile("report.md")); err != nil || string(b) != "# Report\n" {
			t.Fatalf("report.md = %q, %v", b, err)
		}
		final, _ := a.Tasks.Task(context.Background(), id)
		var changes, answer string
		for _, art := range final.Artifacts {
			switch art.ArtifactID {
			case "changes":
				changes = *art.Parts[0].Text
			case "agent-response":
				answer = *art.Parts[0].Text
			}
		}
		if !strings.Contains(changes, "+++ /sandbox/report.md") || !strings.Contains(changes, "+# Report") || answer != "report.md is written" {
			t.Fatalf("artifacts: changes %q, answer %q", changes, answer)
		}
		reqs := a.chats()
		if len(reqs) != 2 || !strings.Contains(requestText(reqs[1]), `"outcome":"completed"`) {
			t.Fatalf("%d requests; the second: %s", len(reqs), requestText(reqs[len(reqs)-1]))
		}
		if reqs[0].Messages[0].Role != "system" || !strings.Contains(reqs[1].Messages[1].Content, "write a report into report.md") {
			t.Fatalf("prompt: %+v", reqs[1].Messages[:2])
		}
		if len(reqs[0].ResponseFormat) == 0 {
			t.Error("no response_format sent")
		}
		h := a.history(t, id)
		if len(h.Interactions) != 2 || h.Status != agent.Success || h.Interactions[0].Observation == nil ||
			h.Interactions[0].Observation.ActionID == "" || h.Interactions[1].Response.Action != "FINISH" {
			t.Fatalf("history: %+v", h)
		}
	})

	t.Run("read and observe", func(t *testing.T) {
		a := startAgentNode(t, fresh(t), nil)
		if err := os.WriteFile(a.sandboxFile("notes.md"), []byte("the secret sauce is 42\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		a.llm.Push(llmtest.Text(prop("READ_FILE", map[string]any{"path": "/sandbox/notes.md"})), finish("42"))
		id := a.send(t, "", "what is the secret sauce in notes.md?")
		if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		if reqs := a.chats(); len(reqs) != 2 || !strings.Contains(requestText(reqs[1]), `"content":"the secret sauce is 42\n"`) {
			t.Fatalf("the second request lacks the file's content as observed: %s", requestText(reqs[len(reqs)-1]))
		}
		// The task names notes.md: its text goes with the task, and the
		// history says so.
		if first := a.chats()[0]; !strings.Contains(first.Messages[1].Content, "The file /sandbox/notes.md (23 bytes) holds:\nthe secret sauce is 42") {
			t.Fatalf("the task message lacks the context file: %s", first.Messages[1].Content)
		}
		if h := a.history(t, id); !slices.Equal(h.Interactions[0].Request.FilesContext, []string{"/sandbox/notes.md"}) {
			t.Fatalf("files_context %v", h.Interactions[0].Request.FilesContext)
		}
	})

	t.Run("prose then JSON", func(t *testing.T) {
		a := startAgentNode(t, fresh(t), nil)
		a.llm.Push(llmtest.Text("Sure! I will write the file now."), llmtest.Text("```json\n"+prop("THINK", map[string]any{})+"\n```"), finish("done"))
		id := a.send(t, "", "say done")
		if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		reqs := a.chats()
		if len(reqs) != 3 || !strings.Contains(requestText(reqs[1]), "Your answer was refused") || !strings.Contains(requestText(reqs[2]), "markdown fences") {
			t.Fatalf("the refusals were not fed back: %d requests", len(reqs))
		}
		h := a.history(t, id)
		if h.Interactions[0].Response.Kind != agent.KindInvalid || h.Interactions[0].Response.RawResponse != "Sure! I will write the file now." {
			t.Fatalf("first interaction: %+v", h.Interactions[0].Response)
		}
	})

	t.Run("three invalid answers: stuck", func(t *testing.T) {
		a := startAgentNode(t, fresh(t), nil)
		a.llm.Push(llmtest.Text("no"), llmtest.Text(`{"a":1}{"b":2}`), llmtest.Text(`{"action":"DONE"}`))
		id := a.send(t, "", "answer badly")
		got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
		if got.Status.State != tasks.StateInputRequired || !strings.Contains(got.Status.Message, "not a valid answer") {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		if n := a.llm.Calls(); n != 3 {
			t.Fatalf("%d calls, want 3 (two re-asks)", n)
		}
	})

	t.Run("RUN_COMMAND refused and fed back", func(t *testing.T) {
		a := startAgentNode(t, fresh(t), nil)
		a.llm.Push(llmtest.Text(prop("RUN_COMMAND", map[string]any{"command": "rm -rf /"})), finish("could not"))
		id := a.send(t, "", "clean up")
		if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		if reqs := a.chats(); len(reqs) != 2 || !strings.Contains(requestText(reqs[1]), "ACTION_NOT_ALLOWED") {
			t.Fatalf("the refusal was not fed back")
		}
	})

	t.Run("path escape refused", func(t *testing.T) {
		a := startAgentNode(t, fresh(t), nil)
		a.llm.Push(llmtest.Text(prop("WRITE_FILE", map[string]any{"path": "/sandbox/../escape.md", "content": "out"})),
			llmtest.Text(prop("WRITE_FILE", map[string]any{"path": "/etc/escape.md", "content": "out"})), finish("no"))
		id := a.send(t, "", "write outside")
		if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		for _, p := range []string{filepath.Join(a.dataDir, "escape.md"), "/etc/escape.md"} {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("%s: %v", p, err)
			}
		}
		reqs := a.chats()
		if len(reqs) != 3 || !strings.Contains(requestText(reqs[1]), `"outcome":"failed"`) || !strings.Contains(requestText(reqs[2]), "/sandbox/") {
			t.Fatalf("the refusals were not fed back")
		}
	})

	t.Run("stuck, follow-up, completed", func(t *testing.T) {
		a := startAgentNode(t, fresh(t), nil)
		a.llm.Push(agentResponse("STUCK", "Which file should I summarise?"))
		id := a.send(t, "", "summarise the file")
		got := a.wait(t, id, tasks.StateInputRequired, tasks.StateCompleted, tasks.StateFailed)
		if got.Status.State != tasks.StateInputRequired || !strings.Contains(got.Status.Message, "Which file") {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		a.llm.Push(llmtest.Text(prop("WRITE_FILE", map[string]any{"path": "/sandbox/summary.md", "content": "short\n"})),
			agentResponse("COMPLETED", "Summary written.", "summary.md", "/sandbox/missing.md"))
		a.send(t, id, "notes.md, please")
		got = a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
		if got.Status.State != tasks.StateCompleted || got.Status.Message != "Summary written." {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		if reqs := a.chats(); len(reqs) != 3 || !strings.Contains(requestText(reqs[1]), "notes.md, please") {
			t.Fatalf("the follow-up was not told to the model")
		}
		final, _ := a.Tasks.Task(context.Background(), id)
		var evidence bool
		for _, art := range final.Artifacts {
			if art.Name == "/sandbox/summary.md" && art.Parts[0].Text != nil && *art.Parts[0].Text == "short\n" {
				evidence = true
			}
		}
		if !evidence {
			t.Fatalf("no evidence artifact: %+v", final.Artifacts)
		}
		h := a.history(t, id)
		last := h.Interactions[len(h.Interactions)-1]
		if !strings.Contains(last.Observation.Reason, "/sandbox/missing.md") || len(h.RecoveryPoints) != 1 {
			t.Fatalf("the missing evidence file is not in the history: %+v %+v", last.Observation, h.RecoveryPoints)
		}
	})

	t.Run("the same read repeated: stuck", func(t *testing.T) {
		a := startAgentNode(t, fresh(t), nil)
		os.WriteFile(a.sandboxFile("loop.md"), []byte("again\n"), 0o600)
		a.llm.SetHandler(func(llmtest.Request) llmtest.Reply {
			return llmtest.Text(prop("READ_FILE", map[string]any{"path": "/sandbox/loop.md"}))
		})
		id := a.send(t, "", "read loop.md forever")
		got := a.wait(t, id, tasks.StateInputRequired, tasks.StateCompleted, tasks.StateFailed)
		if got.Status.State != tasks.StateInputRequired || !strings.Contains(got.Status.Message, agent.PatternRepeatedAction) {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		if n := a.llm.Calls(); n != 4 {
			t.Fatalf("%d calls, want 4", n)
		}
	})

	t.Run("history over the context bound", func(t *testing.T) {
		const ctxTokens = 3000
		a := startAgentNode(t, fresh(t), func(c *config.Config) {
			c.Agent.ContextTokens, c.Agent.MaxTokens, c.Agent.MaxObservationBytes = ctxTokens, 256, 2000
		}, llmtest.WithMaxContext(ctxTokens))
		for i := range 6 {
			os.WriteFile(a.sandboxFile(fmt.Sprintf("big%d.md", i)), []byte(strings.Repeat(fmt.Sprintf("line %d of a long file\n", i), 150)), 0o600)
			a.llm.Push(llmtest.Text(prop("READ_FILE", map[string]any{"path": fmt.Sprintf("/sandbox/big%d.md", i)})))
		}
		a.llm.Push(finish("read them all"))
		id := a.send(t, "", "read the six big files")
		if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		reqs := a.chats()
		if len(reqs) != 7 {
			t.Fatalf("%d requests, want 7 (none refused for its length)", len(reqs))
		}
		for i, r := range reqs {
			if n := len(requestText(r)); n > ctxTokens*4 {
				t.Errorf("request %d: %d bytes, over the bound", i, n)
			}
		}
		var stored int
		for _, it := range a.history(t, id).Interactions {
			if it.Observation != nil {
				stored += len(it.Observation.Text)
			}
		}
		if stored <= ctxTokens*4 {
			t.Fatalf("the history (%d bytes of observations) never outgrew the bound", stored)
		}
	})

	t.Run("500 twice then success", func(t *testing.T) {
		a := startAgentNode(t, fresh(t), nil)
		a.llm.Push(llmtest.Error(500, "boom"), llmtest.Error(500, "boom"), finish("fine"))
		id := a.send(t, "", "try hard")
		if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		h := a.history(t, id)
		if a.llm.Calls() != 3 || len(h.Interactions) != 3 || h.Interactions[0].Response.Status != agent.ResponseError {
			t.Fatalf("%d calls, history %+v", a.llm.Calls(), h.Interactions)
		}
	})

	t.Run("500 five times: four calls then stuck", func(t *testing.T) {
		a := startAgentNode(t, fresh(t), nil)
		for range 5 {
			a.llm.Push(llmtest.Error(500, "down"))
		}
		id := a.send(t, "", "try harder")
		got := a.wait(t, id, tasks.StateInputRequired, tasks.StateCompleted, tasks.StateFailed)
		if got.Status.State != tasks.StateInputRequired || !strings.Contains(got.Status.Message, "failed 4 times") {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		if n := a.llm.Calls(); n != 4 {
			t.Fatalf("%d calls, want 4", n)
		}
	})

	t.Run("endless THINK: halted at max_steps", func(t *testing.T) {
		a := startAgentNode(t, fresh(t), func(c *config.Config) { c.Agent.MaxSteps = 5 })
		var n atomic.Int32
		a.llm.SetHandler(func(llmtest.Request) llmtest.Reply {
			b, _ := json.Marshal(map[string]any{"schema_version": "1.0.0", "id": uuid.NewString(),
				"reasoning": fmt.Sprintf("thought %d", n.Add(1)), "action": "THINK", "args": map[string]any{}})
			return llmtest.Text(string(b))
		})
		id := a.send(t, "", "think")
		got := a.wait(t, id, tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
		if got.Status.State != tasks.StateFailed || !strings.Contains(got.Status.Message, "HALTED_TIME") || !strings.Contains(got.Status.Message, "max_steps") {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		if c := a.llm.Calls(); c != 5 {
			t.Fatalf("%d calls, want 5", c)
		}
		final, _ := a.Tasks.Task(context.Background(), id)
		var halt struct{ Halt, Limit string }
		for _, art := range final.Artifacts {
			if art.ArtifactID == "halt" {
				json.Unmarshal(art.Parts[0].Data, &halt)
			}
		}
		if halt.Halt != "HALTED_TIME" || halt.Limit != "max_steps" {
			t.Fatalf("halt data: %+v", halt)
		}
	})

	t.Run("cost over the limit: HALTED_COST", func(t *testing.T) {
		a := startAgentNode(t, fresh(t), func(c *config.Config) {
			c.Agent.MaxCostCents, c.Agent.PricePerMTokPrompt = 50, 10_000
		})
		write := llmtest.Text(prop("WRITE_FILE", map[string]any{"path": "/sandbox/costly.md", "content": "x"}))
		// 10,000 tokens (more than the prompt's bytes hold at the least)
		// at 10,000 USD a million: 100 USD.
		write.PromptTokens = 10_000
		a.llm.Push(write)
		id := a.send(t, "", "spend")
		got := a.wait(t, id, tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
		if got.Status.State != tasks.StateFailed || !strings.Contains(got.Status.Message, "HALTED_COST") {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		if _, err := os.Stat(a.sandboxFile("costly.md")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("the answer past the cost limit was acted on: %v", err)
		}
		if h := a.history(t, id); h.Status != agent.HaltedCost || len(h.Interactions) != 1 || h.Interactions[0].Response.CostUSD != 100 {
			t.Fatalf("history: %+v", h)
		}
	})

	t.Run("held action approved, job resumes", func(t *testing.T) {
		a := startAgentNode(t, fresh(t), nil)
		os.WriteFile(a.sandboxFile("old.txt"), []byte("old\n"), 0o600)
		a.llm.Push(llmtest.Text(prop("DELETE_FILE", map[string]any{"path": "/sandbox/old.txt"})))
		id := a.send(t, "", "delete old.txt")
		got := a.wait(t, id, tasks.StateInputRequired, tasks.StateCompleted, tasks.StateFailed)
		if got.Status.State != tasks.StateInputRequired || !strings.Contains(got.Status.Message, "confirmation needed") {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		if _, err := os.Stat(a.sandboxFile("old.txt")); err != nil {
			t.Fatalf("deleted before approval: %v", err)
		}
		a.llm.Push(finish("old.txt is gone"))
		if _, err := admin.Call(context.Background(), admin.Path(a.dataDir), admin.Request{Op: "approve", Task: id}); err != nil {
			t.Fatalf("approve: %v", err)
		}
		got = a.wait(t, id, tasks.StateCompleted, tasks.StateFailed)
		if got.Status.State != tasks.StateCompleted || got.Status.Message != "old.txt is gone" {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		if _, err := os.Stat(a.sandboxFile("old.txt")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("old.txt after approval: %v", err)
		}
		if reqs := a.chats(); len(reqs) != 2 || !strings.Contains(requestText(reqs[1]), "The operator approved action") {
			t.Fatalf("the decision was not told to the model")
		}
		// The history keeps why the action was held and who let it through.
		if o := a.history(t, id).Interactions[0].Observation; o == nil || o.Outcome != agent.ObsApproved ||
			!strings.Contains(o.HeldReason, "requires confirmation") || o.DecidedBy != "host" || o.DecidedAt == nil {
			t.Fatalf("the approved step's observation: %+v", o)
		}
	})

	t.Run("progress streamed, one event a step", func(t *testing.T) {
		a := startAgentNode(t, fresh(t), nil)
		os.WriteFile(a.sandboxFile("in.md"), []byte("input\n"), 0o600)
		a.llm.Push(llmtest.Text(prop("READ_FILE", map[string]any{"path": "/sandbox/in.md"})),
			llmtest.Text(prop("WRITE_FILE", map[string]any{"path": "/sandbox/out.md", "content": "output\n"})), finish("copied"))
		var notes []string
		p := text("x")
		p["message"].(map[string]any)["messageId"] = uuid.NewString()
		body, _ := json.Marshal(p)
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		final, err := a.alice.client.RequestStream(ctx, client.Target{Address: a.Address(), PubKey: a.NostrPublicKey()},
			client.NostrRequest{Method: "message/stream", Payload: body}, func(ev *client.NostrResponse) error {
				var u struct{ State, Message string }
				json.Unmarshal(ev.Payload, &u)
				if strings.HasPrefix(u.Message, "step ") {
					notes = append(notes, u.State+" "+u.Message)
				}
				return nil
			})
		if err != nil {
			t.Fatal(err)
		}
		var s struct{ final map[string]any }
		json.Unmarshal(final.Payload, &s.final)
		want := []string{"working step 1: READ_FILE /sandbox/in.md → completed", "working step 2: WRITE_FILE /sandbox/out.md → completed"}
		if !slices.Equal(notes, want) {
			t.Fatalf("step events %q, want %q", notes, want)
		}
		if final := taskOf(t, s.final); final.Status.State != "completed" || final.Status.Message != "copied" {
			t.Fatalf("final %+v", final.Status)
		}
	})

	t.Run("secrets redacted from the history and the answer", func(t *testing.T) {
		const key = "sk-test-0123456789abcdefSECRET"
		t.Setenv(config.LLMAPIKeyEnv, key)
		a := startAgentNode(t, fresh(t), func(c *config.Config) { c.Agent.Redact = []string{`hunter[0-9]+`} })
		a.llm.Push(finish("the key is " + key + " and the password hunter22"))
		id := a.send(t, "", "leak the password hunter33")
		got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
		if strings.Contains(got.Status.Message, key) || strings.Contains(got.Status.Message, "hunter22") || !strings.Contains(got.Status.Message, "[REDACTED]") {
			t.Fatalf("answer %q", got.Status.Message)
		}
		raw, _ := json.Marshal(a.history(t, id))
		if strings.Contains(string(raw), key) || strings.Contains(string(raw), "hunter22") || strings.Contains(string(raw), "hunter33") {
			t.Fatalf("a secret is in the stored history: %s", raw)
		}
		if strings.Contains(requestText(a.chats()[0]), "hunter33") {
			t.Fatal("a secret of the requester's text reached the model")
		}
		if j, _ := a.Agent().Store().Get(context.Background(), id); strings.Contains(j.Description, "hunter33") {
			t.Fatalf("the job's description keeps a secret: %q", j.Description)
		}
		if h := a.chats()[0].Header.Get("Authorization"); h != "Bearer "+key {
			t.Fatalf("the key was not sent to the model server: %q", h)
		}
	})

	t.Run("held action denied, job told", func(t *testing.T) {
		a := startAgentNode(t, fresh(t), nil)
		os.WriteFile(a.sandboxFile("keep.txt"), []byte("keep\n"), 0o600)
		a.llm.Push(llmtest.Text(prop("DELETE_FILE", map[string]any{"path": "/sandbox/keep.txt"})))
		id := a.send(t, "", "delete keep.txt")
		a.wait(t, id, tasks.StateInputRequired)
		a.llm.Push(agentResponse("COMPLETED", "The operator kept the file."))
		if _, err := admin.Call(context.Background(), admin.Path(a.dataDir), admin.Request{Op: "deny", Task: id, Reason: "we keep it"}); err != nil {
			t.Fatalf("deny: %v", err)
		}
		got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed)
		if got.Status.State != tasks.StateCompleted {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		if _, err := os.Stat(a.sandboxFile("keep.txt")); err != nil {
			t.Fatalf("keep.txt after a deny: %v", err)
		}
		if reqs := a.chats(); !strings.Contains(requestText(reqs[1]), "The operator denied action") || !strings.Contains(requestText(reqs[1]), "we keep it") {
			t.Fatalf("the deny was not told to the model: %s", requestText(reqs[1]))
		}
	})

	t.Run("RETRY restarts the phase", func(t *testing.T) {
		a := startAgentNode(t, fresh(t), nil)
		a.llm.Push(llmtest.Text(prop("THINK", map[string]any{})), agentResponse("RETRY", "Wrong approach."), finish("second try"))
		id := a.send(t, "", "try twice")
		if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		third := requestText(a.chats()[2])
		if !strings.Contains(third, "Wrong approach.") || strings.Contains(third, `"action":"THINK"`) {
			t.Fatalf("the retried phase's prompt: %s", third)
		}
	})

	t.Run("context-length error: condensed and retried", func(t *testing.T) {
		// The server's context is smaller than the node was told:
		// the first refusal halves the prompt's budget.
		a := startAgentNode(t, fresh(t), func(c *config.Config) {
			c.Agent.ContextTokens, c.Agent.MaxTokens, c.Agent.MaxObservationBytes = 8000, 256, 3000
		}, llmtest.WithMaxContext(4000))
		for i := range 4 {
			os.WriteFile(a.sandboxFile(fmt.Sprintf("f%d.md", i)), []byte(strings.Repeat("x", 2900)), 0o600)
			a.llm.Push(llmtest.Text(prop("READ_FILE", map[string]any{"path": fmt.Sprintf("/sandbox/f%d.md", i)})))
		}
		a.llm.Push(finish("read"))
		id := a.send(t, "", "read four files")
		if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		var refused int
		for _, it := range a.history(t, id).Interactions {
			if it.Response.Kind == agent.KindAPIError && strings.Contains(it.Response.Error, "context") {
				refused++
			}
		}
		if refused != 1 {
			t.Fatalf("%d context-length refusals, want exactly 1 before the prompt was condensed", refused)
		}
	})

	t.Run("429 with Retry-After is waited for", func(t *testing.T) {
		a := startAgentNode(t, fresh(t), nil) // backoff 5 ms: only the server's Retry-After makes the wait a second
		busy := llmtest.Error(429, "slow down")
		busy.Header = map[string][]string{"Retry-After": {"1"}}
		a.llm.Push(busy, finish("after the wait"))
		id := a.send(t, "", "be patient")
		if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		its := a.history(t, id).Interactions
		if len(its) != 2 || its[1].Timestamp.Sub(its[0].Timestamp) < time.Second {
			t.Fatalf("the retry came %v after the 429, before its Retry-After of 1 s", its[1].Timestamp.Sub(its[0].Timestamp))
		}
	})

	t.Run("oversized answer and unknown action fed back", func(t *testing.T) {
		a := startAgentNode(t, fresh(t), func(c *config.Config) { c.Agent.MaxAnswerBytes = 4096 })
		huge := prop("WRITE_FILE", map[string]any{"path": "/sandbox/huge.md", "content": strings.Repeat("x", 5000)})
		a.llm.Push(llmtest.Text(huge), llmtest.Text(prop("DANCE", map[string]any{})), finish("gave up"))
		id := a.send(t, "", "write a lot")
		if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		reqs := a.chats()
		if len(reqs) != 3 || !strings.Contains(requestText(reqs[1]), "at most 4096 are accepted") || !strings.Contains(requestText(reqs[2]), `"outcome":"failed"`) {
			t.Fatalf("the refusals were not fed back")
		}
		if _, err := os.Stat(a.sandboxFile("huge.md")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("an oversized answer was acted on: %v", err)
		}
	})

	t.Run("an answer within its bound that the server escapes at length", func(t *testing.T) {
		// 28,000 "<" in a 32 KiB answer: the scripted server, Go's
		// encoding/json, sends each as \u003c, 168 KB in all.
		a := startAgentNode(t, fresh(t), func(c *config.Config) { c.Agent.MaxAnswerBytes = 32 << 10 })
		page := strings.Repeat("<", 28_000)
		answer := strings.ReplaceAll(prop("WRITE_FILE", map[string]any{"path": "/sandbox/page.md", "content": page}), `\u003c`, "<")
		if len(answer) > 32<<10 {
			t.Fatalf("the answer is %d bytes, over its bound", len(answer))
		}
		a.llm.Push(llmtest.Text(answer), finish("written"))
		id := a.send(t, "", "write the page")
		if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
			t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
		}
		if b, err := os.ReadFile(a.sandboxFile("page.md")); err != nil || string(b) != page {
			t.Fatalf("page.md: %d bytes, %v", len(b), err)
		}
	})

	t.Run("cancel during a slow model call", func(t *testing.T) {
		a := startAgentNode(t, fresh(t), nil)
		slow := llmtest.Text(prop("WRITE_FILE", map[string]any{"path": "/sandbox/late.md", "content": "late"}))
		slow.Delay = time.Minute
		a.llm.Push(slow)
		id := a.send(t, "", "take your time")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := a.llm.WaitCalls(ctx, 1); err != nil {
			t.Fatal(err)
		}
		p := a.alice.call(t, a.Node, "tasks/cancel", map[string]any{"taskId": id}, false)
		if got := taskOf(t, p); got.Status.State != "canceled" {
			t.Fatalf("cancel: %v", p)
		}
		// The call is aborted: the job ends long before the reply's
		// minute is up.
		for a.Agent().Running() > 0 {
			select {
			case <-ctx.Done():
				t.Fatal("the job did not stop after cancel: the model call was not aborted")
			case <-time.After(10 * time.Millisecond):
			}
		}
		j, err := a.Agent().Store().Get(context.Background(), id)
		if err != nil || j.Status != agent.Canceled {
			t.Fatalf("job: %+v %v", j, err)
		}
		if _, err := os.Stat(a.sandboxFile("late.md")); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("an action ran after cancel: %v", err)
		}
		if a.llm.Calls() != 1 {
			t.Fatalf("%d calls after cancel", a.llm.Calls())
		}
	})
}

// An action held for an operator cannot be approved nor denied once its
// task was canceled, for a peer's proposal as for an agent's job: the
// cancel withdrew it (the admin socket lists it no more), nothing runs,
// and the refusal names the task's state.
func TestApprovalOfCanceledTaskRefused(t *testing.T) {
	a := startAgentNode(t, testdb.SQLite(t), nil)
	sock := admin.Path(a.dataDir)
	ctx := context.Background()
	for _, kind := range []string{"proposal", "agent"} {
		t.Run(kind, func(t *testing.T) {
			file := kind + "-keep.txt"
			os.WriteFile(a.sandboxFile(file), []byte("keep\n"), 0o600)
			var id string
			if kind == "proposal" {
				id = taskOf(t, a.alice.call(t, a.Node, "message/send", proposal("DELETE_FILE", map[string]any{"path": "/sandbox/" + file}), false)).ID
			} else {
				a.llm.Push(llmtest.Text(prop("DELETE_FILE", map[string]any{"path": "/sandbox/" + file})))
				id = a.send(t, "", "delete "+file)
			}
			if got := a.wait(t, id, tasks.StateInputRequired, tasks.StateCompleted, tasks.StateFailed); got.Status.State != tasks.StateInputRequired {
				t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
			}
			if held := adminHeld(t, sock, id); len(held) != 1 {
				t.Fatalf("held before the cancel: %v", held)
			}
			if p := a.alice.call(t, a.Node, "tasks/cancel", map[string]any{"taskId": id}, false); taskOf(t, p).Status.State != "canceled" {
				t.Fatalf("cancel: %v", p)
			}
			if held := adminHeld(t, sock, id); len(held) != 0 {
				t.Fatalf("actions still held by the canceled task: %v", held)
			}
			for _, op := range []string{"approve", "deny"} {
				if _, err := admin.Call(ctx, sock, admin.Request{Op: op, Task: id}); err == nil || !strings.Contains(err.Error(), "is canceled") {
					t.Fatalf("%s after cancel: %v", op, err)
				}
			}
			if _, err := os.Stat(a.sandboxFile(file)); err != nil {
				t.Fatalf("the held delete ran after its task was canceled: %v", err)
			}
			if got, _ := a.Tasks.Task(ctx, id); got.Status.State != tasks.StateCanceled {
				t.Fatalf("after the refused decisions: %s", got.Status.State)
			}
		})
	}
}

// adminHeld lists the actions task holds through the admin socket at sock.
func adminHeld(t *testing.T, sock, task string) []struct{ Task, Action, Kind string } {
	t.Helper()
	res, err := admin.Call(context.Background(), sock, admin.Request{Op: "held", Task: task})
	var held struct {
		Actions []struct{ Task, Action, Kind string }
	}
	if err != nil || json.Unmarshal(res, &held) != nil {
		t.Fatalf("held %s: %s %v", task, res, err)
	}
	return held.Actions
}

// The requester writes while an action of its job waits for an operator:
// the job goes on with the message, the held action is withdrawn (denied,
// never run, no longer approvable) and the model is told.
func TestHeldActionWithdrawnByFollowUp(t *testing.T) {
	a := startAgentNode(t, testdb.SQLite(t), nil)
	os.WriteFile(a.sandboxFile("keep.txt"), []byte("keep\n"), 0o600)
	a.llm.Push(llmtest.Text(prop("DELETE_FILE", map[string]any{"path": "/sandbox/keep.txt"})))
	id := a.send(t, "", "delete keep.txt")
	a.wait(t, id, tasks.StateInputRequired)
	a.llm.Push(finish("kept it"))
	a.send(t, id, "never mind, keep it")
	got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed)
	if got.Status.State != tasks.StateCompleted {
		t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
	}
	second := requestText(a.chats()[1])
	if !strings.Contains(second, "was withdrawn when the requester wrote again") || !strings.Contains(second, "never mind, keep it") {
		t.Fatalf("the model was not told: %s", second)
	}
	if _, err := os.Stat(a.sandboxFile("keep.txt")); err != nil {
		t.Fatalf("the withdrawn delete ran: %v", err)
	}
	if _, err := admin.Call(context.Background(), admin.Path(a.dataDir), admin.Request{Op: "approve", Task: id}); err == nil {
		t.Fatal("the withdrawn action could still be approved")
	}
	if o := a.history(t, id).Interactions[0].Observation; o == nil || o.Outcome != agent.ObsDenied {
		t.Fatalf("the held step's outcome: %+v", o)
	}
}

// What the node reads for the model — the files a task names, the
// evidence of a COMPLETED answer — goes through the operator's policy as
// the requester's reads do: a file the requester may not read never
// reaches the prompt, the history or the task's artifacts.
func TestAgentReadsObeyThePolicy(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.cedar")
	def, err := os.ReadFile("../../executor/policy/default.cedar")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(pol, append(def, []byte(`
@id("no-private")
@reason("private/ is the operator's")
forbid (principal, action, resource in Path::"/sandbox/private/");
`)...), 0o600)
	a := startAgentNode(t, testdb.SQLite(t), func(c *config.Config) { c.Policy = pol })
	os.MkdirAll(a.sandboxFile("private"), 0o700)
	os.WriteFile(a.sandboxFile("private/secret.txt"), []byte("the launch code is 1234\n"), 0o600)
	os.WriteFile(a.sandboxFile("public.txt"), []byte("open notes\n"), 0o600)
	a.llm.Push(agentResponse("COMPLETED", "Done.", "private/secret.txt", "public.txt"))
	id := a.send(t, "", "summarise private/secret.txt and public.txt")
	if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
		t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
	}
	first := a.chats()[0].Messages[1].Content
	if strings.Contains(first, "launch code") || !strings.Contains(first, "open notes") {
		t.Fatalf("the task message: %s", first)
	}
	final, _ := a.Tasks.Task(context.Background(), id)
	raw, _ := json.Marshal(final)
	hist, _ := json.Marshal(a.history(t, id))
	if strings.Contains(string(raw), "launch code") || strings.Contains(string(hist), "launch code") {
		t.Fatal("a file the policy denies reached the task or the history")
	}
	if !strings.Contains(string(raw), "open notes") {
		t.Fatalf("the readable evidence is missing: %s", raw)
	}
	h := a.history(t, id)
	if last := h.Interactions[len(h.Interactions)-1]; !strings.Contains(last.Observation.Reason, "private/secret.txt") {
		t.Fatalf("the refused evidence file is not named: %+v", last.Observation)
	}
}

// A read the node makes for the model's context that the policy wants an
// operator for is left out, and leaves no held action of the node's own:
// the operator who approves the task approves the model's action.
func TestHeldContextReadLeftOut(t *testing.T) {
	dir := t.TempDir()
	pol := filepath.Join(dir, "policy.cedar")
	def, err := os.ReadFile("../../executor/policy/default.cedar")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(pol, append(def, []byte(`
@id("hr-reads")
@confirm("hr/ is personal data: an operator confirms reads")
permit (principal, action == Action::"READ_FILE", resource in Path::"/sandbox/hr/");
`)...), 0o600)
	a := startAgentNode(t, testdb.SQLite(t), func(c *config.Config) { c.Policy = pol })
	os.MkdirAll(a.sandboxFile("hr"), 0o700)
	os.WriteFile(a.sandboxFile("hr/pay.txt"), []byte("salary 99999\n"), 0o600)
	os.WriteFile(a.sandboxFile("old.txt"), []byte("old\n"), 0o600)
	a.llm.Push(llmtest.Text(prop("DELETE_FILE", map[string]any{"path": "/sandbox/old.txt"})))
	id := a.send(t, "", "look at hr/pay.txt and delete old.txt")
	if got := a.wait(t, id, tasks.StateInputRequired, tasks.StateCompleted, tasks.StateFailed); got.Status.State != tasks.StateInputRequired {
		t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
	}
	a.llm.Push(finish("deleted"))
	if _, err := admin.Call(context.Background(), admin.Path(a.dataDir), admin.Request{Op: "approve", Task: id}); err != nil {
		t.Fatalf("approve: %v", err)
	}
	if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed); got.Status.State != tasks.StateCompleted {
		t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
	}
	if _, err := os.Stat(a.sandboxFile("old.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the approval did not reach the model's delete: %v", err)
	}
	for _, r := range a.chats() {
		if strings.Contains(requestText(r), "salary") {
			t.Fatal("a read that needed an operator reached the model")
		}
	}
}

// /metrics of a node with an agent: its jobs by status, its model calls
// by status with their time, and their cost.
func TestAgentMetrics(t *testing.T) {
	a := startAgentNode(t, testdb.SQLite(t), func(c *config.Config) {
		c.HTTPListen = "127.0.0.1:0"
		c.Agent.PricePerMTokPrompt = 10 // USD a million: 10,000 tokens cost 10 cents
	})
	write := llmtest.Text(prop("WRITE_FILE", map[string]any{"path": "/sandbox/m.md", "content": "m\n"}))
	write.PromptTokens = 10_000
	done := finish("done")
	done.PromptTokens = 10_000
	a.llm.Push(llmtest.Error(500, "once"), write, done)
	id := a.send(t, "", "write m.md")
	if got := a.wait(t, id, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
		t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
	}
	resp, err := http.Get(a.HTTPURL() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, want := range []string{
		`snapnode_agent_jobs{status="SUCCESS"} 1`,
		`snapnode_agent_jobs{status="RUNNING"} 0`,
		`snapnode_agent_model_calls_total{status="SUCCESS"} 2`,
		`snapnode_agent_model_calls_total{status="ERROR"} 1`,
		"snapnode_agent_model_call_seconds_count 3",
		"snapnode_agent_cost_cents_total 20",
	} {
		if !strings.Contains(string(body), want+"\n") {
			t.Errorf("missing %q", want)
		}
	}
}

// Without a model configured, a free-text task fails at once with a reason
// that says how to enable the agent, and the card does not advertise the
// agent skill; with one, it does.
func TestNoAgentFailsAtOnce(t *testing.T) {
	n, _ := startNode(t, nil)
	alice := newRequester(t, n.RelayURLs())
	got := taskOf(t, alice.call(t, n, "message/send", text("summarise-notes"), false))
	if got.Status.State != "failed" || !strings.Contains(got.Status.Message, "--llm-url") {
		t.Fatalf("task %s %q", got.Status.State, got.Status.Message)
	}
	for _, s := range n.Card().Skills {
		if s.ID == "agent" {
			t.Fatal("the card advertises the agent skill without an agent")
		}
	}
	a := startAgentNode(t, testdb.SQLite(t), nil)
	var has bool
	for _, s := range a.Card().Skills {
		has = has || s.ID == "agent"
	}
	if !has {
		t.Fatal("the card of a node with an agent lacks the agent skill")
	}
}

// A task that holds two actions: a decision must name the one it means
// (an approve without it is refused, listing both); each is decided by its
// id, and the other is left as it was.
func TestTwoHeldActionsDecidedByID(t *testing.T) {
	dsn := testdb.SQLite(t)
	a := startAgentNode(t, dsn, nil)
	sock := admin.Path(a.dataDir)
	ctx := context.Background()
	for _, f := range []string{"one.txt", "two.txt"} {
		os.WriteFile(a.sandboxFile(f), []byte(f+"\n"), 0o600)
	}
	first := taskOf(t, a.alice.call(t, a.Node, "message/send", proposal("DELETE_FILE", map[string]any{"path": "/sandbox/one.txt"}), false))
	if first.Status.State != "input_required" {
		t.Fatalf("first: %s", first.Status.State)
	}
	p := proposal("DELETE_FILE", map[string]any{"path": "/sandbox/two.txt"})
	p["taskId"] = first.ID
	if got := taskOf(t, a.alice.call(t, a.Node, "message/send", p, false)); got.Status.State != "input_required" {
		t.Fatalf("second: %s %q", got.Status.State, got.Status.Message)
	}
	held, err := a.Tasks.Task(ctx, first.ID)
	if err != nil {
		t.Fatal(err)
	}
	second := strings.TrimPrefix(strings.SplitN(held.Status.Message, ":", 2)[0], "confirmation needed for action ")
	// Both are listed, each with its id.
	list := adminHeld(t, sock, first.ID)
	if len(list) != 2 || list[1].Action != second || list[0].Action == second || list[0].Kind != "DELETE_FILE" {
		t.Fatalf("held: %+v (second %s)", list, second)
	}
	_, err = admin.Call(ctx, sock, admin.Request{Op: "approve", Task: first.ID})
	if err == nil || !strings.Contains(err.Error(), "holds more than one action") || !strings.Contains(err.Error(), "--action") ||
		!strings.Contains(err.Error(), list[0].Action) || !strings.Contains(err.Error(), second) {
		t.Fatalf("approve without naming the action: %v", err)
	}
	if _, err := admin.Call(ctx, sock, admin.Request{Op: "approve", Task: first.ID, Action: second}); err != nil {
		t.Fatalf("approve %s: %v", second, err)
	}
	if _, err := os.Stat(a.sandboxFile("two.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("two.txt after its approval: %v", err)
	}
	if _, err := os.Stat(a.sandboxFile("one.txt")); err != nil {
		t.Fatalf("one.txt went with the other's approval: %v", err)
	}
	// The approval ended the task: the action still held is withdrawn,
	// not left waiting for a decision that can no longer run it.
	if got := taskOf(t, a.alice.call(t, a.Node, "tasks/get", map[string]any{"taskId": first.ID}, false)); got.Status.State == "input_required" {
		t.Fatalf("task after the approval: %s", got.Status.State)
	}
	db, err := sqldb.Open(ctx, dsn, sqldb.Options{Existing: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var stillHeld int
	if err := db.R.QueryRowContext(ctx, "SELECT COUNT(*) FROM executor_actions WHERE task = ? AND state = 'pending'", first.ID).Scan(&stillHeld); err != nil || stillHeld != 0 {
		t.Fatalf("%d actions of the ended task still held (%v)", stillHeld, err)
	}
	if _, err := os.Stat(a.sandboxFile("one.txt")); err != nil {
		t.Fatalf("one.txt after the task ended: %v", err)
	}
	if held := adminHeld(t, sock, ""); len(held) != 0 {
		t.Fatalf("held after the task ended: %+v", held)
	}
	if _, err := admin.Call(ctx, sock, admin.Request{Op: "deny", Task: first.ID, Action: list[0].Action}); err == nil || !strings.Contains(err.Error(), "is completed") {
		t.Fatalf("a denial of the withdrawn action: %v", err)
	}
	if _, err := admin.Call(ctx, sock, admin.Request{Op: "approve", Task: first.ID, Action: "no-such-action"}); err == nil {
		t.Fatal("an approval of an action the task does not hold was taken")
	}
}

// At start the node looks at its model server once and says in the log
// what a job would meet: nothing answering at --llm-url, or a model name
// the server does not list (of several), is a warning saying what to do;
// a refusal that asking again does not mend (a bad API key) is an error
// saying what to check, as a job's failed step says it; a server without
// a model list is a warning naming the base URL; a server that lists the
// model is reached, with the context length the agent works with and
// where it comes from: the server's, else agent.context_tokens's, else
// the default (a server that gives none was logged context_tokens=0,
// which read as no room at all).
func TestModelServerLookedAtStart(t *testing.T) {
	closed := "http://" + nettest.RefusedAddr(t).String() + "/v1"
	two := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"object":"list","data":[{"id":"llama3:8b"},{"id":"qwen3:4b"}]}`)
	}))
	t.Cleanup(two.Close)
	listed := llmtest.New(t, llmtest.WithModel(llmtest.DefaultModel, 8192))
	unsized := llmtest.New(t) // lists the model, with no context length
	status := func(code int, body string) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(code)
			fmt.Fprint(w, body)
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/v1"
	}
	// llama is a server shaped like llama-server, run with -c 16384 for
	// a model trained with 32768: its model list gives the latter
	// (meta.n_ctx_train), its GET /props (when props) the former.
	llama := func(props bool) string {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch {
			case r.URL.Path == "/v1/models":
				fmt.Fprint(w, `{"object":"list","data":[{"id":"/models/qwen.gguf","object":"model","owned_by":"llamacpp","meta":{"n_ctx_train":32768}}]}`)
			case r.URL.Path == "/props" && props:
				fmt.Fprint(w, `{"default_generation_settings":{"id":0,"n_ctx":16384},"total_slots":1,"model_path":"/models/qwen.gguf"}`)
			default:
				http.Error(w, `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}`, http.StatusNotFound)
			}
		}))
		t.Cleanup(srv.Close)
		return srv.URL + "/v1"
	}
	for _, c := range []struct {
		name, url     string
		contextTokens int // agent.context_tokens
		want          []string
	}{
		{"llama-server", llama(true), 0, []string{"model server reached", "context_tokens=16384", `context_tokens_from="llama-server /props"`}},
		{"llama-server without /props", llama(false), 0, []string{"model server reached", "context_tokens=32768",
			`context_tokens_from="the model's trained context (n_ctx_train): set agent.context_tokens if the server runs with a smaller -c"`}},
		{"nothing there", closed, 0, []string{"level=WARN", "the model server does not answer", "--llm-url"}},
		{"model not listed", two.URL + "/v1", 0, []string{"level=WARN", "does not list the model", `\"llama3:8b\", \"qwen3:4b\"`, "ollama pull"}},
		{"listed", listed.URL(), 0, []string{"model server reached", "context_tokens=8192", `context_tokens_from="the model server"`}},
		{"listed, no length", unsized.URL(), 0, []string{"model server reached", "context_tokens=16384", "the default", "agent.context_tokens"}},
		{"length set", listed.URL(), 4096, []string{"model server reached", "context_tokens=4096", "context_tokens_from=agent.context_tokens"}},
		{"bad key", status(401, `{"error":{"message":"Incorrect API key provided"}}`), 0, []string{"level=ERROR", "HTTP 401", "agent.llm_api_key_file", "Incorrect API key"}},
		{"no model list", status(404, `404 page not found`), 0, []string{"level=WARN", "no model list", "agent.llm_url"}},
		{"failing", status(503, `loading`), 0, []string{"level=WARN", "HTTP 503", "retr"}},
		{"no agent", "", 0, []string{"no agent: free-text tasks fail at once", "--llm-url"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var logs testutil.LockedBuffer
			cfg := config.Default()
			cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = filepath.Join(t.TempDir(), "data"), "127.0.0.1:0", ""
			if c.url != "" {
				cfg.Agent.LLMURL, cfg.Agent.LLMModel = c.url, llmtest.DefaultModel
			}
			cfg.Agent.ContextTokens = c.contextTokens
			ctx, cancel := context.WithCancel(context.Background())
			n, err := node.Start(ctx, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for !strings.Contains(logs.String(), c.want[len(c.want)-1]) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond) // the look runs beside the start
			}
			cancel()
			n.Wait()
			for _, w := range c.want {
				if !strings.Contains(logs.String(), w) {
					t.Errorf("no %q in the log:\n%s", w, logs.String())
				}
			}
		})
	}
}

// With agent.context_tokens set, the look at the model server at start
// asks its model list (Check) and not llama-server's GET /props, whose
// context the agent would not use. Before, it asked it all the same.
func TestModelServerLookSkipsPropsWhenContextSet(t *testing.T) {
	var props atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/models":
			fmt.Fprint(w, `{"object":"list","data":[{"id":"/models/qwen.gguf","object":"model","owned_by":"llamacpp","meta":{"n_ctx_train":32768}}]}`)
		case "/props":
			props.Add(1)
			fmt.Fprint(w, `{"default_generation_settings":{"id":0,"n_ctx":16384},"total_slots":1}`)
		default:
			http.Error(w, `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}`, http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	var logs testutil.LockedBuffer
	cfg := config.Default()
	cfg.DataDir, cfg.RelayListen, cfg.HTTPListen = filepath.Join(t.TempDir(), "data"), "127.0.0.1:0", ""
	cfg.Agent.LLMURL, cfg.Agent.LLMModel, cfg.Agent.ContextTokens = srv.URL+"/v1", "qwen", 8192
	cfg.Agent.Review, cfg.Agent.ReviewModel = true, "judge"
	ctx, cancel := context.WithCancel(context.Background())
	n, err := node.Start(ctx, cfg, slog.New(slog.NewTextHandler(&logs, nil)))
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "model server reached") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond) // the look runs beside the start
	}
	cancel()
	n.Wait()
	if !strings.Contains(logs.String(), "context_tokens=8192") || props.Load() != 0 {
		t.Errorf("%d GET /props; want none, and context_tokens=8192 in the log:\n%s", props.Load(), logs.String())
	}
}
