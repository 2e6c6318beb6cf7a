package agent_test

import (
	"context"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/llm"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/testdb"
	"github.com/snapnode/snapnode/tasks"
)

// A model server whose every answer is refused as malformed, each with a
// usage of 1,000 + 1,000 tokens (or none, or one that cannot be read),
// halts the job at its cost limit, each refused call counted in the job
// and in its step of the history; before, an answer the client refused
// (no choice, a content that is not a string, a body that is not one
// JSON value) cost nothing, and the job went on to its retry limit.
func TestRefusedAnswersCounted(t *testing.T) {
	const usage = `{"prompt_tokens":1000,"completion_tokens":1000}`
	msg := map[string]any{"role": "assistant", "content": "not a JSON object"}
	for _, c := range []struct {
		name     string
		body     func(t *testing.T) string
		reported bool // the usage is the server's, 1,000 + 1,000
	}{
		{"prose content", func(t *testing.T) string { return chatBody(t, msg, "stop", usage) }, true},
		{"tool call", func(t *testing.T) string {
			return chatBody(t, map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{
				map[string]any{"id": "c", "type": "function", "function": map[string]any{"name": "f", "arguments": "{}"}}}}, "tool_calls", usage)
		}, true},
		{"no choices", func(*testing.T) string {
			return `{"id":"c1","object":"chat.completion","model":"m","choices":[],"usage":` + usage + `}`
		}, true},
		{"content not a string", func(*testing.T) string {
			return `{"id":"c1","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":42},"finish_reason":"stop"}],"usage":` + usage + `}`
		}, true},
		{"several choices, none of index 0", func(*testing.T) string {
			ch := `{"index":1,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}`
			return `{"id":"c1","object":"chat.completion","model":"m","choices":[` + ch + `,` + ch + `],"usage":` + usage + `}`
		}, true},
		{"no choices, no usage", func(*testing.T) string {
			return `{"id":"c1","object":"chat.completion","model":"m","choices":[]}`
		}, false},
		{"two objects", func(t *testing.T) string { b := chatBody(t, msg, "stop", usage); return b + b }, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, testdb.SQLite(t))
			srv := llmtest.New(t)
			body := c.body(t)
			srv.SetHandler(func(llmtest.Request) llmtest.Reply { return llmtest.Reply{Body: body} })
			m, err := llm.New(llm.Config{BaseURL: srv.URL(), Model: "m"})
			if err != nil {
				t.Fatal(err)
			}
			task := r.send(t, "go")
			// 10 USD a million tokens: 2 cents a call of 2,000 tokens,
			// and no less than 1 cent a call at the estimate of its
			// prompt (over 4,000 bytes).
			got := r.runWith(t, func(cfg *agent.Config) {
				cfg.MaxCostCents, cfg.PricePerMTokPrompt, cfg.PricePerMTokAnswer, cfg.Backoff, cfg.MaxSteps = 3, 10, 10, time.Millisecond, 30
			}, m, task.ID, tasks.StateFailed, tasks.StateCompleted, tasks.StateInputRequired)
			if got.Status.State != tasks.StateFailed || !strings.Contains(got.Status.Message, "HALTED_COST") {
				t.Fatalf("task %s %q after %d calls; want failed, HALTED_COST", got.Status.State, got.Status.Message, srv.Calls())
			}
			ctx := context.Background()
			j, err := r.store.Get(ctx, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			calls := srv.Calls()
			if calls > 3 || j.CostCents < 3 {
				t.Fatalf("cost %.2f cents after %d calls; want at least the limit of 3 within 3 calls", j.CostCents, calls)
			}
			if c.reported && (j.PromptTokens != int64(1000*calls) || j.CompletionTokens != int64(1000*calls)) {
				t.Errorf("tokens %d + %d after %d calls; want the server's 1,000 + 1,000 each", j.PromptTokens, j.CompletionTokens, calls)
			}
			its, err := r.store.Interactions(ctx, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if len(its) != calls {
				t.Fatalf("%d steps for %d calls", len(its), calls)
			}
			sum := 0.0
			for _, it := range its {
				if it.Response.CostUSD <= 0 {
					t.Errorf("step %d (%s %q): cost %g; want the call's", it.Sequence, it.Response.Kind, it.Response.Error, it.Response.CostUSD)
				}
				if c.reported && (it.Response.PromptTokens != 1000 || it.Response.CompletionTokens != 1000) {
					t.Errorf("step %d: tokens %d + %d; want 1,000 + 1,000", it.Sequence, it.Response.PromptTokens, it.Response.CompletionTokens)
				}
				sum += it.Response.CostUSD * 100
			}
			if math.Abs(sum-j.CostCents) > 1e-9 {
				t.Errorf("the steps cost %g cents, the job %g", sum, j.CostCents)
			}
			h, err := r.store.History(ctx, task.ID)
			if err != nil {
				t.Fatal(err)
			}
			if err := agent.Replay(h, 64<<10); err != nil {
				t.Errorf("replay: %v", err)
			}
		})
	}
}
