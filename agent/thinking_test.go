package agent_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/llm"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/schemas"
	"github.com/snapnode/snapnode/tasks"
)

// validHistory checks that the job's history validates against its
// schema and replays.
// givenUpStep reads the job history of taskID (validHistory) and returns
// it with its one step: the step the job's cancel gave up.
func givenUpStep(t *testing.T, r *rig, taskID string) (*agent.History, agent.Interaction) {
	t.Helper()
	h := validHistory(t, r, taskID)
	if len(h.Interactions) != 1 {
		t.Fatalf("history has %d interactions; want the step the cancel gave up alone: %+v", len(h.Interactions), h.Interactions)
	}
	return h, h.Interactions[0]
}

func validHistory(t *testing.T, r *rig, taskID string) *agent.History {
	t.Helper()
	h, err := r.store.History(context.Background(), taskID)
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		t.Fatal(err)
	}
	if err := schemas.JobHistory().Validate(v); err != nil {
		t.Errorf("the history does not validate: %v", err)
	}
	if err := agent.Replay(h, 64<<10); err != nil {
		t.Errorf("replay: %v", err)
	}
	return h
}

// The three shapes in which a thinking model's server sends its
// reasoning with an answer are all taken: a <think> block at the start of
// the content (older servers and templates), Ollama's "reasoning" and
// llama-server's and vLLM's "reasoning_content". The answer is the JSON
// object, judged as before; the reasoning is kept in the step's history
// and never sent back to the model, and the task's note of the step names
// what it acted on. Before, the <think> block was refused
// as "not a single JSON object" and the other two were dropped, the
// history saying nothing of why the model did what it did.
func TestThinkingModelShapes(t *testing.T) {
	for _, tc := range []struct {
		name  string
		reply func(thought, answer string) llmtest.Reply
	}{
		{"think block", func(thought, answer string) llmtest.Reply {
			return llmtest.Text("\n<think>\n" + thought + "\n</think>\n\n" + answer + "\n")
		}},
		{"empty think block", func(thought, answer string) llmtest.Reply {
			// Qwen3 with its thinking off still writes the block, empty;
			// the thought then comes as reasoning.
			return llmtest.Reply{Content: "<think>\n\n</think>\n\n" + answer, Reasoning: thought}
		}},
		{"ollama reasoning", func(thought, answer string) llmtest.Reply {
			return llmtest.Reply{Content: answer, Reasoning: thought}
		}},
		{"reasoning_content", func(thought, answer string) llmtest.Reply {
			return llmtest.Reply{Content: answer, ReasoningContent: thought}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, testdb.SQLite(t))
			srv := llmtest.New(t)
			srv.Push(tc.reply("THOUGHT-ONE: in-1.md first", readAnswer(1)), tc.reply("THOUGHT-TWO: done", finishAnswer))
			m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			task := readingJob(t, r, 1)
			r.completes(t, nil, m, task.ID)
			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d calls, want 2", len(reqs))
			}
			for _, msg := range reqs[1].Messages {
				if strings.Contains(msg.Content, "THOUGHT") || strings.Contains(msg.Content, "think>") {
					t.Errorf("the second call was sent the reasoning: %s %q", msg.Role, msg.Content)
				}
				if msg.Role == agent.RoleAssistant && msg.Content != readAnswer(1) {
					t.Errorf("the second call was sent the first answer as %q; want the JSON object alone", msg.Content)
				}
			}
			evs, err := r.svc.TaskEvents(context.Background(), "alice", task.ID, 0)
			if err != nil {
				t.Fatal(err)
			}
			noted := false
			for _, ev := range evs {
				noted = noted || ev.Status != nil && ev.Status.Message == "step 1: READ_FILE /sandbox/in-1.md → completed"
			}
			if !noted {
				t.Error("the task has no note of step 1 naming the file it read")
			}
			h := validHistory(t, r, task.ID)
			if len(h.Interactions) != 2 {
				t.Fatalf("%d interactions", len(h.Interactions))
			}
			for i, want := range []string{"THOUGHT-ONE: in-1.md first", "THOUGHT-TWO: done"} {
				if got := h.Interactions[i].Response.Reasoning; got != want {
					t.Errorf("step %d: history reasoning %q; want %q", i, got, want)
				}
			}
		})
	}
}

// Around a <think> block, the answer is as strict as ever: text before
// the block, a second block, text after the object are all refused.
func TestThinkingBlockStrict(t *testing.T) {
	for _, text := range []string{
		"Sure. <think>x</think>" + finishAnswer,
		"<think>x</think><think>y</think>" + finishAnswer,
		"<think>x</think>" + finishAnswer + " done",
		"<think>x</think>```json\n" + finishAnswer + "\n```",
		finishAnswer + "<think>x</think>",
		"<think>x</think>\u00a0" + finishAnswer,
		"<THINK>x</THINK>" + finishAnswer,
	} {
		t.Run(text[:min(len(text), 30)], func(t *testing.T) {
			r := newRig(t, testdb.SQLite(t))
			srv := llmtest.New(t)
			srv.SetHandler(func(llmtest.Request) llmtest.Reply { return llmtest.Text(text) })
			m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			task := r.send(t, "go")
			got := r.run(t, m, task.ID, tasks.StateCompleted, tasks.StateFailed, tasks.StateInputRequired)
			if got.Status.State == tasks.StateCompleted {
				t.Fatalf("task completed on %q; want the answer refused", text)
			}
			if n := srv.Calls(); n != agent.MaxInvalidAnswers+1 {
				t.Errorf("%d calls; want %d, each answer refused", n, agent.MaxInvalidAnswers+1)
			}
			validHistory(t, r, task.ID)
		})
	}
	// A worker's line is no model's content: a <think> block in it is
	// text around the object.
	if _, aerr := agent.ParseAnswer("<think>x</think>"+finishAnswer, 64<<10); aerr == nil {
		t.Error("ParseAnswer took a <think> block before the object")
	}
}

// A thinking model that sends its reasoning and no answer is refused
// with the cause named, for the model and for the operator (the history,
// the job's reason): it spent its whole token budget thinking (raise
// agent.max_tokens or turn its thinking off), or it sent only its
// reasoning. Each such answer counts against the job's budget and its
// refused answers, and its reasoning is in the step's history. Before,
// each was told only that its answer was empty, or not one JSON object.
func TestThinkingWithoutAnswer(t *testing.T) {
	long := strings.Repeat("Let me think about this again. ", 2000) // past MaxReasoningBytes
	for _, tc := range []struct {
		name  string
		reply llmtest.Reply
		why   []string
	}{
		{"ollama out of tokens", llmtest.Reply{Content: "", Reasoning: long, FinishReason: "length", CompletionTokens: 300},
			[]string{"spent its whole token budget thinking", "agent.max_tokens", "300", "thinking off", "agent.reasoning_effort"}},
		{"reasoning_content out of tokens", llmtest.Reply{Content: "", ReasoningContent: long, FinishReason: "length", CompletionTokens: 300},
			[]string{"spent its whole token budget thinking", "agent.max_tokens", "thinking off"}},
		{"unclosed think block out of tokens", llmtest.Reply{Content: "<think>\n" + long, FinishReason: "length", CompletionTokens: 300},
			[]string{"spent its whole token budget thinking", "agent.max_tokens", "thinking off"}},
		{"all in reasoning", llmtest.Reply{Content: "", Reasoning: long + finishAnswer, FinishReason: "stop", CompletionTokens: 300},
			[]string{"only its reasoning", "empty", "after its reasoning"}},
		{"think block alone", llmtest.Reply{Content: "<think>" + long + "</think>", FinishReason: "stop", CompletionTokens: 300},
			[]string{"only its reasoning", "empty", "after its reasoning"}},
		{"unclosed think block", llmtest.Reply{Content: "<think>" + long, FinishReason: "stop", CompletionTokens: 300},
			[]string{"<think>", "never closes"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, testdb.SQLite(t))
			srv := llmtest.New(t)
			srv.SetHandler(func(llmtest.Request) llmtest.Reply { return tc.reply })
			m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			task := r.send(t, "go")
			got := r.runWith(t, func(c *agent.Config) { c.MaxTokens = 300 }, m, task.ID,
				tasks.StateInputRequired, tasks.StateFailed, tasks.StateCompleted)
			if got.Status.State != tasks.StateInputRequired {
				t.Fatalf("task %s %q; want input_required", got.Status.State, got.Status.Message)
			}
			calls := agent.MaxInvalidAnswers + 1
			if n := srv.Calls(); n != calls {
				t.Fatalf("%d calls; want %d", n, calls)
			}
			reqs := srv.Requests()
			msgs := reqs[1].Messages
			told := msgs[len(msgs)-1].Content
			job, err := r.store.Get(context.Background(), task.ID)
			if err != nil {
				t.Fatal(err)
			}
			for _, want := range tc.why {
				if !strings.Contains(told, want) {
					t.Errorf("the model was told %q; want %q", told, want)
				}
				if !strings.Contains(job.Reason, want) {
					t.Errorf("job reason %q; want %q", job.Reason, want)
				}
			}
			for _, msg := range msgs {
				if strings.Contains(msg.Content, "think about this") {
					t.Errorf("the reasoning was sent back to the model: %s %.80q…", msg.Role, msg.Content)
				}
			}
			if job.CompletionTokens != int64(300*calls) || job.Steps != calls {
				t.Errorf("job counted %d completion tokens in %d steps; want %d in %d", job.CompletionTokens, job.Steps, 300*calls, calls)
			}
			h := validHistory(t, r, task.ID)
			for i, it := range h.Interactions {
				if it.Response.Kind != agent.KindInvalid || !strings.Contains(it.Response.Error, tc.why[0]) {
					t.Errorf("step %d: %s %q; want invalid, saying %q", i, it.Response.Kind, it.Response.Error, tc.why[0])
				}
				rs := it.Response.Reasoning
				if !strings.HasPrefix(rs, "Let me think") || len(rs) > agent.MaxReasoningBytes || !utf8.ValidString(rs) {
					t.Errorf("step %d: history reasoning of %d bytes (%.30q…); want the reasoning cut to %d", i, len(rs), rs, agent.MaxReasoningBytes)
				}
			}
		})
	}
}

// A thinking model's reasoning is paid for as its answer is: when the
// server reports no usage, the call is priced at the estimate of the
// reasoning's bytes with the answer's (all of them, not the 8 KiB the
// history keeps), whether the server sent it beside the content
// (Ollama's reasoning, llama-server's and vLLM's reasoning_content,
// counted once when vLLM sends both) or as a <think> block in it; and
// when it reports less than the text can hold, at no less than the least
// the reasoning and the answer can be. Before, a reasoning sent beside
// the content counted nothing, and a thinking model's steps ran far
// under the job's cost limit.
func TestThinkingCost(t *testing.T) {
	// 40,000 bytes: more than MaxReasoningBytes, and a <think> block
	// of it within max_answer_bytes.
	long := strings.Repeat("Let me weigh that once more. ", 40_000/29+1)[:40_000]
	// Priced at 1 USD a million answer tokens (the prompt is free): the
	// estimate of 40,000 bytes, four bytes a token, is 10,000 tokens,
	// 1 cent; the least they can be, eight bytes a token, 0.5 cents.
	const (
		noUsage = "null"
		tooLow  = `{"prompt_tokens":1,"completion_tokens":1}`
	)
	for _, tc := range []struct {
		name     string
		msg      map[string]any
		usage    string
		min, max float64 // the step's cost, in cents
	}{
		{"ollama reasoning", map[string]any{"role": "assistant", "content": finishAnswer, "reasoning": long}, noUsage, 1, 1.05},
		{"reasoning_content", map[string]any{"role": "assistant", "content": finishAnswer, "reasoning_content": long}, noUsage, 1, 1.05},
		{"vllm both", map[string]any{"role": "assistant", "content": finishAnswer, "reasoning_content": long, "reasoning": long}, noUsage, 1, 1.05},
		{"think block", map[string]any{"role": "assistant", "content": "<think>" + long + "</think>" + finishAnswer}, noUsage, 1, 1.05},
		{"under-reported", map[string]any{"role": "assistant", "content": finishAnswer, "reasoning": long}, tooLow, 0.5, 0.52},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t, testdb.SQLite(t))
			srv := llmtest.New(t)
			srv.Push(llmtest.Reply{Body: chatBody(t, tc.msg, "stop", tc.usage)})
			m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			task := r.send(t, "go")
			r.completes(t, func(c *agent.Config) {
				c.PricePerMTokPrompt, c.PricePerMTokAnswer, c.MaxCostCents = 0, 1, 1000
			}, m, task.ID)
			j, err := r.store.Get(context.Background(), task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if j.CostCents < tc.min || j.CostCents > tc.max {
				t.Fatalf("the step cost %.4f cents; want %.2f…%.2f, the reasoning's 40,000 bytes counted once", j.CostCents, tc.min, tc.max)
			}
		})
	}
}

// A model server's refusal of a request as invalid names
// agent.reasoning_effort among the settings sent with it: Ollama refuses a
// value it does not take, and the field for a model that cannot think.
func TestInvalidRequestAdviceNamesReasoningEffort(t *testing.T) {
	for _, status := range []int{400, 422} {
		if a := (&agent.ModelError{Status: status}).Advice(); !strings.Contains(a, "agent.reasoning_effort") {
			t.Errorf("HTTP %d: advice %q; want it to name agent.reasoning_effort", status, a)
		}
	}
}

// The supervisor's thinking model that spends its token budget thinking
// is told, and the operator reads, the supervisor's own setting
// (agent.review_reasoning_effort), not the worker's: the worker's may be
// what the operator wants to keep.
func TestSupervisorThinkingNamesItsSetting(t *testing.T) {
	r := newRig(t, testdb.SQLite(t))
	srv := llmtest.New(t)
	srv.SetHandler(func(llmtest.Request) llmtest.Reply {
		return llmtest.Reply{Content: "", Reasoning: "Let me weigh the submission.", FinishReason: "length", CompletionTokens: 300}
	})
	review, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "judge"})
	if err != nil {
		t.Fatal(err)
	}
	task := r.send(t, "go")
	set := func(cfg *agent.Config) {
		cfg.Review, cfg.ReviewModel, cfg.ReviewModelName, cfg.MaxTokens = true, review, "judge", 300
	}
	got := r.runWith(t, set, &scripted{answers: []string{finishAnswer}}, task.ID, tasks.StateInputRequired, tasks.StateFailed, tasks.StateCompleted)
	if got.Status.State != tasks.StateInputRequired {
		t.Fatalf("task %s %q; want input_required", got.Status.State, got.Status.Message)
	}
	j, err := r.store.Get(context.Background(), task.ID)
	if err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	told := reqs[len(reqs)-1].Messages[len(reqs[len(reqs)-1].Messages)-1].Content
	for _, s := range []struct{ what, text string }{{"job reason", j.Reason}, {"the supervisor was told", told}} {
		if !strings.Contains(s.text, "agent.review_reasoning_effort") || strings.Contains(s.text, "(agent.reasoning_effort)") {
			t.Errorf("%s %q; want agent.review_reasoning_effort named, not agent.reasoning_effort alone", s.what, s.text)
		}
	}
}
