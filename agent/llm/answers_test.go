package llm_test

import (
	"errors"
	"math"
	"strings"
	"testing"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/llm"
	"github.com/snapnode/snapnode/internal/llmtest"
)

// chatBody is a chat.completion object with choices and usage as given.
func chatBody(choices, usage string) string {
	return `{"id":"c1","object":"chat.completion","created":1700000000,"model":"m1","choices":[` + choices + `],"usage":` + usage + `}`
}

// A model that chooses a tool answers, on OpenAI, vLLM and Ollama, with
// the message's tool_calls and a null or empty content (finish_reason
// "tool_calls"); an older server with a function_call. The completion
// names the tools, so that the runtime tells the model what was wrong
// rather than that its answer was empty.
func TestToolCallAnswer(t *testing.T) {
	const usage = `{"prompt_tokens":10,"completion_tokens":5}`
	for _, c := range []struct {
		name, choice string
		text         string
		tools        []string
	}{
		{"openai", `{"index":0,"message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"write_file","arguments":"{\"path\":\"a.md\"}"}}]},"finish_reason":"tool_calls"}`, "", []string{"write_file"}},
		{"ollama", `{"index":0,"message":{"role":"assistant","content":"","tool_calls":[{"id":"call_x","index":0,"type":"function","function":{"name":"read_file","arguments":"{}"}},{"id":"call_y","index":1,"type":"function","function":{"name":"list_files","arguments":"{}"}}]},"finish_reason":"tool_calls"}`, "", []string{"read_file", "list_files"}},
		{"function_call", `{"index":0,"message":{"role":"assistant","content":null,"function_call":{"name":"answer","arguments":"{}"}},"finish_reason":"function_call"}`, "", []string{"answer"}},
		{"text beside", `{"index":0,"message":{"role":"assistant","content":"{\"a\":1}","tool_calls":[{"id":"c","type":"function","function":{"name":"x","arguments":"{}"}}]},"finish_reason":"tool_calls"}`, `{"a":1}`, []string{"x"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Push(llmtest.Reply{Body: chatBody(c.choice, usage)})
			got, err := newClient(t, srv, llm.Config{}).Complete(t.Context(), prompt("x"))
			if err != nil {
				t.Fatal(err)
			}
			if got.Text != c.text || strings.Join(got.ToolCalls, ",") != strings.Join(c.tools, ",") ||
				got.PromptTokens != 10 || got.CompletionTokens != 5 {
				t.Fatalf("Complete = %+v; want text %q, tool calls %q, 10+5 tokens", *got, c.text, c.tools)
			}
		})
	}
}

// The request asks for one choice (n=1). A server that sends several
// anyway has the one of index 0 taken, by its index, not its place in the
// array; several choices none of which, or more than one of which, has
// index 0 are no answer.
func TestSeveralChoices(t *testing.T) {
	const usage = `{"prompt_tokens":10,"completion_tokens":5}`
	choice := func(index, content string) string {
		return `{"index":` + index + `,"message":{"role":"assistant","content":"` + content + `"},"finish_reason":"stop"}`
	}
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Reply{Body: chatBody(choice("1", "B")+","+choice("0", "A"), usage)},
		llmtest.Reply{Body: chatBody(choice("1", "B")+","+choice("2", "C"), usage)},
		llmtest.Reply{Body: chatBody(choice("0", "A")+","+choice("0", "B"), usage)},
		llmtest.Reply{Body: chatBody(choice("3", "D"), usage)},
	)
	c := newClient(t, srv, llm.Config{})
	got, err := c.Complete(t.Context(), prompt("x"))
	if err != nil || got.Text != "A" {
		t.Fatalf("choices 1, 0: Complete = %+v, %v; want the choice of index 0, A", got, err)
	}
	if body := srv.Requests()[0].Body; !strings.Contains(string(body), `"n":1`) {
		t.Errorf("the request does not ask for one choice: %s", body)
	}
	for _, what := range []string{"choices 1, 2", "choices 0, 0"} {
		got, err := c.Complete(t.Context(), prompt("x"))
		if !errors.Is(err, llm.ErrMalformedResponse) || got != nil {
			t.Errorf("%s: Complete = %+v, %v; want ErrMalformedResponse", what, got, err)
		}
	}
	// One choice is the answer, whatever its index says.
	if got, err := c.Complete(t.Context(), prompt("x")); err != nil || got.Text != "D" {
		t.Errorf("one choice of index 3: Complete = %+v, %v; want D", got, err)
	}
}

// Token counts that are fractions or overflow an integer do not fail a
// call the server answered: a fraction is rounded up, an overflow taken
// as the largest count, and a count that is not a number at all as none
// (the runtime then prices the call at its estimate). Before, go-openai's
// decoding failed, and the call's cost went uncounted.
func TestUsageNumbers(t *testing.T) {
	const choice = `{"index":0,"message":{"role":"assistant","content":"{}"},"finish_reason":"stop"}`
	for _, c := range []struct {
		usage          string
		prompt, answer int
	}{
		{`{"prompt_tokens":12.5,"completion_tokens":3.01}`, 13, 4},
		{`{"prompt_tokens":1e30,"completion_tokens":5}`, math.MaxInt, 5},
		{`{"prompt_tokens":99999999999999999999999,"completion_tokens":1E2}`, math.MaxInt, 100},
		{`{"prompt_tokens":-1e30,"completion_tokens":-2.5}`, math.MinInt, -2},
		{`{"prompt_tokens":"12","completion_tokens":null}`, 0, 0},
		{`null`, 0, 0},
	} {
		t.Run(c.usage, func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Push(llmtest.Reply{Body: chatBody(choice, c.usage)})
			got, err := newClient(t, srv, llm.Config{}).Complete(t.Context(), prompt("x"))
			if err != nil {
				t.Fatal(err)
			}
			if got.PromptTokens != c.prompt || got.CompletionTokens != c.answer {
				t.Fatalf("tokens %d + %d; want %d + %d", got.PromptTokens, got.CompletionTokens, c.prompt, c.answer)
			}
		})
	}
}

// An answer the client refuses, of a success status, is an
// *agent.AnsweredError carrying the usage the server reported (none when
// it could not be read) and the size of the body: the call was made, and
// the runtime counts it against the job's budget. Before, the error
// carried nothing, and the call cost nothing. Error statuses, and a
// server that never answered, are no AnsweredError.
func TestRefusedAnswerUsage(t *testing.T) {
	const usage = `{"prompt_tokens":1000,"completion_tokens":1000}`
	notString := `{"index":0,"message":{"role":"assistant","content":42},"finish_reason":"stop"}`
	choice := `{"index":1,"message":{"role":"assistant","content":"x"},"finish_reason":"stop"}`
	for _, c := range []struct {
		name           string
		reply          llmtest.Reply
		prompt, answer int
		bytes          int // 0: the body's length
		is             error
	}{
		{"no choices", llmtest.Reply{Body: chatBody("", usage)}, 1000, 1000, 0, llm.ErrMalformedResponse},
		{"content not a string", llmtest.Reply{Body: chatBody(notString, usage)}, 1000, 1000, 0, llm.ErrMalformedResponse},
		{"none of index 0", llmtest.Reply{Body: chatBody(choice+","+choice, usage)}, 1000, 1000, 0, llm.ErrMalformedResponse},
		{"usage not numbers", llmtest.Reply{Body: chatBody("", `{"prompt_tokens":"many"}`)}, 0, 0, 0, llm.ErrMalformedResponse},
		{"not an object", llmtest.Reply{Body: `["a"]`}, 0, 0, 0, llm.ErrMalformedResponse},
		{"two objects", llmtest.Reply{Body: chatBody(notString, usage) + chatBody(notString, usage)}, 0, 0, 0, llm.ErrMalformedResponse},
		{"too large", llmtest.Reply{Body: chatBody(notString, usage) + strings.Repeat(" ", 4096)}, 0, 0, 2048, llm.ErrResponseTooLarge},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Push(c.reply)
			got, err := newClient(t, srv, llm.Config{MaxResponseBytes: 2048}).Complete(t.Context(), prompt("x"))
			var ae *agent.AnsweredError
			if got != nil || !errors.As(err, &ae) || !errors.Is(err, c.is) {
				t.Fatalf("Complete = %+v, %v (%T); want an *agent.AnsweredError, %v", got, err, err, c.is)
			}
			want := c.bytes
			if want == 0 {
				want = len(c.reply.Body)
			}
			if ae.PromptTokens != c.prompt || ae.CompletionTokens != c.answer || ae.AnswerBytes != want {
				t.Errorf("AnsweredError %+v; want %d + %d tokens, %d bytes", *ae, c.prompt, c.answer, want)
			}
		})
	}
	srv := llmtest.New(t)
	srv.Push(llmtest.Error(500, "down"))
	_, err := newClient(t, srv, llm.Config{}).Complete(t.Context(), prompt("x"))
	var ae *agent.AnsweredError
	if errors.As(err, &ae) {
		t.Errorf("HTTP 500: %v is an AnsweredError", err)
	}
}

// A thinking model's trace comes beside the content: Ollama's
// "reasoning", llama-server's and vLLM's "reasoning_content". The
// completion carries it whole (the runtime redacts it, then cuts it),
// apart from the content; one that is not a string is left
// out, the answer taken all the same; a content that opens with a
// <think> block is the content, as sent (the runtime reads the block).
// Before, the trace was dropped.
func TestReasoningAnswer(t *testing.T) {
	const usage = `{"prompt_tokens":10,"completion_tokens":5}`
	long := strings.Repeat("é", agent.MaxReasoningBytes)
	for _, c := range []struct {
		name, message   string
		text, reasoning string
	}{
		{"ollama", `{"role":"assistant","content":"{}","reasoning":"because"}`, "{}", "because"},
		{"ollama out of tokens", `{"role":"assistant","content":"","reasoning":"hmm, then"}`, "", "hmm, then"},
		{"llama-server", `{"role":"assistant","content":"{}","reasoning_content":"because"}`, "{}", "because"},
		{"vllm both", `{"role":"assistant","content":"{}","reasoning_content":"first","reasoning":"second"}`, "{}", "first"},
		{"null", `{"role":"assistant","content":"{}","reasoning_content":null}`, "{}", ""},
		{"not a string", `{"role":"assistant","content":"{}","reasoning":{"effort":"high"}}`, "{}", ""},
		{"think block", `{"role":"assistant","content":"<think>x</think>{}"}`, "<think>x</think>{}", ""},
		{"long", `{"role":"assistant","content":"{}","reasoning":"` + long + `"}`, "{}", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Push(llmtest.Reply{Body: chatBody(`{"index":0,"message":`+c.message+`,"finish_reason":"stop"}`, usage)})
			got, err := newClient(t, srv, llm.Config{}).Complete(t.Context(), prompt("x"))
			if err != nil {
				t.Fatal(err)
			}
			if got.Text != c.text || got.PromptTokens != 10 || got.CompletionTokens != 5 {
				t.Fatalf("Complete = %+v; want text %q, 10+5 tokens", *got, c.text)
			}
			if c.name == "long" {
				// Whole: the runtime redacts it before it cuts it.
				if got.Reasoning != long {
					t.Fatalf("reasoning of %d bytes (%.20q…); want the %d sent, whole", len(got.Reasoning), got.Reasoning, len(long))
				}
				return
			}
			if got.Reasoning != c.reasoning {
				t.Fatalf("reasoning %q; want %q", got.Reasoning, c.reasoning)
			}
		})
	}
}

// The scripted server's reasoning fields, over a real socket.
func TestReasoningLLMTest(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Reply{Content: "", Reasoning: "out of tokens", FinishReason: "length"},
		llmtest.Reply{Content: "{}", ReasoningContent: "so"})
	c := newClient(t, srv, llm.Config{})
	got, err := c.Complete(t.Context(), prompt("x"))
	if err != nil || got.Text != "" || got.Reasoning != "out of tokens" || !got.Truncated {
		t.Fatalf("Complete = %+v, %v; want no text, the reasoning, truncated", got, err)
	}
	got, err = c.Complete(t.Context(), prompt("x"))
	if err != nil || got.Text != "{}" || got.Reasoning != "so" || got.Truncated {
		t.Fatalf("Complete = %+v, %v; want the text and the reasoning", got, err)
	}
}

// The completion tells the reasoning's whole length, for the runtime to
// price a call whose server reported no usage: the length of the longer
// of the fields that are strings (vLLM's two counted once), 0 without
// one. Before, a second field that differed from the one taken, however
// long, was not counted.
func TestReasoningBytes(t *testing.T) {
	long := strings.Repeat("é", agent.MaxReasoningBytes) // twice the bound, in bytes
	for _, c := range []struct {
		name, message string
		want          int
	}{
		{"long", `{"role":"assistant","content":"{}","reasoning":"` + long + `"}`, 2 * agent.MaxReasoningBytes},
		{"short", `{"role":"assistant","content":"{}","reasoning_content":"because"}`, len("because")},
		{"vllm both", `{"role":"assistant","content":"{}","reasoning_content":"` + long + `","reasoning":"` + long + `"}`, 2 * agent.MaxReasoningBytes},
		// Two that differ: the longer is counted, whichever is kept.
		{"both, the other longer", `{"role":"assistant","content":"{}","reasoning_content":"short","reasoning":"` + long + `"}`, 2 * agent.MaxReasoningBytes},
		{"both, the other blank", `{"role":"assistant","content":"{}","reasoning_content":"short","reasoning":"  "}`, len("short")},
		{"none", `{"role":"assistant","content":"{}"}`, 0},
		{"not a string", `{"role":"assistant","content":"{}","reasoning":{"effort":"high"}}`, 0},
		{"think block", `{"role":"assistant","content":"<think>x</think>{}"}`, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Push(llmtest.Reply{Body: chatBody(`{"index":0,"message":`+c.message+`,"finish_reason":"stop"}`, "null")})
			got, err := newClient(t, srv, llm.Config{}).Complete(t.Context(), prompt("x"))
			if err != nil {
				t.Fatal(err)
			}
			if got.ReasoningBytes != c.want {
				t.Fatalf("ReasoningBytes %d, Reasoning of %d bytes; want %d", got.ReasoningBytes, len(got.Reasoning), c.want)
			}
		})
	}
}

// finish_reason "content_filter" is the completion's Filtered, for the
// runtime to say that the provider's filter, not the model, left the
// answer empty or cut.
func TestContentFilterAnswer(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Reply{Content: "", FinishReason: "content_filter"}, llmtest.Reply{Content: "{}", FinishReason: "stop"})
	c := newClient(t, srv, llm.Config{})
	got, err := c.Complete(t.Context(), prompt("x"))
	if err != nil || !got.Filtered || got.Truncated || got.Text != "" {
		t.Fatalf("Complete = %+v, %v; want Filtered, no text", got, err)
	}
	if got, err = c.Complete(t.Context(), prompt("x")); err != nil || got.Filtered {
		t.Fatalf("Complete = %+v, %v; want an answer not Filtered", got, err)
	}
}
