package agent_test

import (
	"context"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/llm"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// chatBody is a chat.completion whose one message is msg, with usage.
func chatBody(t *testing.T, msg map[string]any, finish, usage string) string {
	t.Helper()
	m, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	return `{"id":"c1","object":"chat.completion","created":1700000000,"model":"m","choices":[{"index":0,"message":` +
		string(m) + `,"finish_reason":"` + finish + `"}],"usage":` + usage + `}`
}

const finishAnswer = `{"schema_version":"1.0.0","id":"00000000-0000-4000-8000-000000000001","reasoning":"done","action":"FINISH","args":{"response":"done"}}`

// A model that calls a tool (tool_calls and a null content, as OpenAI,
// vLLM and Ollama answer when a model chooses one) is told that it called
// a tool where it must write one JSON object in the message's content,
// and the history records the call; before, it was told its answer was
// empty.
func TestToolCallAnswerRefusedSayingSo(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Reply{Body: chatBody(t, map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
			map[string]any{"id": "call_1", "type": "function", "function": map[string]any{"name": "write_file", "arguments": `{"path":"a.md"}`}},
		}}, "tool_calls", `{"prompt_tokens":100,"completion_tokens":20}`)},
		llmtest.Text(finishAnswer),
	)
	m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	task := r.send(t, "write a.md")
	r.completes(t, nil, m, task.ID)
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d calls, want 2", len(reqs))
	}
	msgs := reqs[1].Messages
	told := msgs[len(msgs)-1].Content
	for _, want := range []string{"tool", "write_file", "content", "one JSON object"} {
		if !strings.Contains(told, want) {
			t.Errorf("the model was told %q; want it to name %q", told, want)
		}
	}
	if strings.Contains(told, "empty") {
		t.Errorf("the model was told %q: its answer was a tool call, not empty", told)
	}
	its, err := r.store.Interactions(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(its) != 2 || its[0].Response.Kind != agent.KindInvalid || !strings.Contains(its[0].Response.Error, "write_file") {
		t.Fatalf("history: %+v; want the first answer invalid, its error naming the tool call", its)
	}
	h, err := r.store.History(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if err := agent.Replay(h, 64<<10); err != nil {
		t.Errorf("replay: %v", err)
	}
}

// A usage count a server writes as 1e30 is counted as the largest count:
// the call is priced, and the job halts at its cost limit; before, the
// call failed to decode and cost nothing.
func TestUsageOverflowCounted(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	srv := llmtest.New(t)
	srv.SetHandler(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Body: chatBody(t, map[string]any{"role": "assistant", "content": readAnswer(1)}, "stop",
			`{"prompt_tokens":1e30,"completion_tokens":12.5}`)}
	})
	task := readingJob(t, r, 1)
	m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	got := r.runWith(t, func(c *agent.Config) {
		c.MaxCostCents, c.PricePerMTokPrompt, c.PricePerMTokAnswer = 100, 1, 1
	}, m, task.ID, tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
	if got.Status.State != tasks.StateFailed || !strings.Contains(got.Status.Message, "HALTED_COST") {
		t.Fatalf("task %s %q; want failed, HALTED_COST", got.Status.State, got.Status.Message)
	}
	j, err := r.store.Get(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.PromptTokens != math.MaxInt64 || j.CompletionTokens != 13 || srv.Calls() != 1 {
		t.Fatalf("tokens %d + %d after %d calls; want %d + 13 after 1", j.PromptTokens, j.CompletionTokens, srv.Calls(), int64(math.MaxInt64))
	}
}

// A model server that keeps failing leaves the task input_required with
// what the requester can do: the outage is the node's, and a message
// tries again (the job resumes where it was), which it does. The server's
// error stays with the operator.
func TestModelServerOutageTellsRequester(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	srv := llmtest.New(t)
	for range agent.MaxAPIRetries + 1 {
		srv.Push(llmtest.Error(503, "backend 10.1.2.3:8000 is loading the model"))
	}
	srv.Push(llmtest.Text(finishAnswer))
	m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	task := r.send(t, "go")
	fast := func(c *agent.Config) { c.Backoff = time.Millisecond }
	got := r.runWith(t, fast, m, task.ID, tasks.StateInputRequired, tasks.StateFailed, tasks.StateCompleted)
	if got.Status.State != tasks.StateInputRequired {
		t.Fatalf("task %s %q; want input_required", got.Status.State, got.Status.Message)
	}
	for _, want := range []string{"the model server failed 4 times in a row, on the node's side", "send a message to try again"} {
		if !strings.Contains(got.Status.Message, want) {
			t.Errorf("the requester was told %q; want %q", got.Status.Message, want)
		}
	}
	if strings.Contains(got.Status.Message, "10.1.2.3") {
		t.Errorf("the requester was told the server's error: %q", got.Status.Message)
	}
	j, err := r.store.Get(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(j.Reason, "10.1.2.3") {
		t.Errorf("job reason %q; want the server's error, for the operator", j.Reason)
	}
	fuSend(t, r, task.ID, "try again")
	if got := r.runWith(t, fast, m, task.ID, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired); got.Status.State != tasks.StateCompleted {
		t.Fatalf("after a message: task %s %q; want completed", got.Status.State, got.Status.Message)
	}
}

// The model a server names in its response is stored in each step's
// history cut to a bound, on a character's boundary, and the history
// stays valid against its schema and replays; before, it was stored at
// any length up to the response's cap, in every step.
func TestServerModelNameIsBounded(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	srv := llmtest.New(t)
	long := strings.Repeat("é", 300<<10) // 600 KiB of two-byte characters
	body := strings.Replace(chatBody(t, map[string]any{"role": "assistant", "content": finishAnswer}, "stop",
		`{"prompt_tokens":100,"completion_tokens":20}`), `"model":"m"`, `"model":"x`+long+`"`, 1)
	srv.Push(llmtest.Reply{Body: body})
	m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
	if err != nil {
		t.Fatal(err)
	}
	task := r.send(t, "go")
	r.completes(t, nil, m, task.ID)
	h := validHistory(t, r, task.ID)
	name := h.Interactions[0].Request.Metadata.Model
	if len(name) > 1024 || !strings.HasPrefix(name, "xéé") || !utf8.ValidString(name) {
		t.Fatalf("the history keeps a model name of %d bytes (%.20q…); want it cut on a character's boundary", len(name), name)
	}
}
