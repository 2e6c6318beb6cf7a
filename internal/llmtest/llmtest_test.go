package llmtest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/snapnode/snapnode/internal/llmtest"
)

// chatBody is a chat-completions request body with one user message.
func chatBody(msg string) string {
	b, _ := json.Marshal(map[string]any{
		"model":    "m1",
		"messages": []any{map[string]any{"role": "user", "content": msg}},
	})
	return string(b)
}

type answer struct {
	status int
	header http.Header
	body   []byte
}

func post(t *testing.T, ctx context.Context, url, body string) (answer, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, resp.Header, b}, err
}

// content decodes the assistant content of a chat.completion body.
func content(t *testing.T, body []byte) string {
	t.Helper()
	var c struct {
		Object  string `json:"object"`
		Choices []struct {
			Message struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if err := json.Unmarshal(body, &c); err != nil || len(c.Choices) != 1 {
		t.Fatalf("not a chat.completion: %s (%v)", body, err)
	}
	if c.Object != "chat.completion" || c.Choices[0].Message.Role != "assistant" {
		t.Errorf("bad completion: %s", body)
	}
	return c.Choices[0].Message.Content
}

func errorMessage(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil {
		t.Fatalf("not an error object: %s", body)
	}
	return e.Error.Message
}

func TestScriptOrder(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Text("first"),
		llmtest.Reply{Status: 429, Message: "slow down", Header: http.Header{"Retry-After": {"7"}}},
		llmtest.Reply{Status: 502, Body: "502 Bad Gateway"},
	)
	srv.Push(llmtest.JSON(map[string]int{"n": 2}))
	ctx := t.Context()

	tests := []struct {
		name   string
		status int
		check  func(t *testing.T, a answer)
	}{
		{"text", 200, func(t *testing.T, a answer) {
			if got := content(t, a.body); got != "first" {
				t.Errorf("content = %q", got)
			}
		}},
		{"error with header", 429, func(t *testing.T, a answer) {
			if got := errorMessage(t, a.body); got != "slow down" {
				t.Errorf("message = %q", got)
			}
			if got := a.header.Get("Retry-After"); got != "7" {
				t.Errorf("Retry-After = %q", got)
			}
		}},
		{"raw body", 502, func(t *testing.T, a answer) {
			if string(a.body) != "502 Bad Gateway" {
				t.Errorf("body = %q", a.body)
			}
		}},
		{"json", 200, func(t *testing.T, a answer) {
			if got := content(t, a.body); got != `{"n":2}` {
				t.Errorf("content = %q", got)
			}
		}},
		{"exhausted", 500, func(t *testing.T, a answer) {
			if got := errorMessage(t, a.body); got != "llmtest: script exhausted" {
				t.Errorf("message = %q", got)
			}
		}},
	}
	for _, tt := range tests { // in order: each takes the next reply
		a, err := post(t, ctx, srv.URL(), chatBody(tt.name))
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if a.status != tt.status {
			t.Errorf("%s: status %d, want %d (%s)", tt.name, a.status, tt.status, a.body)
			continue
		}
		t.Run(tt.name, func(t *testing.T) { tt.check(t, a) })
	}
	if got := srv.Calls(); got != len(tests) {
		t.Errorf("Calls = %d, want %d", got, len(tests))
	}
}

func TestHandlerAfterScript(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Text("scripted"))
	srv.SetHandler(func(r llmtest.Request) llmtest.Reply {
		return llmtest.Text("echo " + r.Messages[len(r.Messages)-1].Content)
	})
	for i, want := range []string{"scripted", "echo b", "echo c"} {
		a, err := post(t, t.Context(), srv.URL(), chatBody(string(rune('a'+i))))
		if err != nil {
			t.Fatal(err)
		}
		if got := content(t, a.body); got != want {
			t.Errorf("call %d: %q, want %q", i, got, want)
		}
	}
	srv.SetHandler(nil)
	if a, _ := post(t, t.Context(), srv.URL(), chatBody("d")); a.status != 500 {
		t.Errorf("without handler: status %d", a.status)
	}
}

func TestUsageAndFinishReason(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Reply{Content: "abcdefgh", PromptTokens: 11, CompletionTokens: 3, FinishReason: "length"},
		llmtest.Text("abcdefgh"),
	)
	type usage struct {
		Model   string `json:"model"`
		Choices []struct {
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			P int `json:"prompt_tokens"`
			C int `json:"completion_tokens"`
		} `json:"usage"`
	}
	for _, want := range []struct {
		p, c   int
		finish string
	}{{11, 3, "length"}, {0, 3, "stop"}} {
		a, err := post(t, t.Context(), srv.URL(), chatBody("0123456789abcdef"))
		if err != nil {
			t.Fatal(err)
		}
		var u usage
		if err := json.Unmarshal(a.body, &u); err != nil {
			t.Fatal(err)
		}
		if want.p != 0 && u.Usage.P != want.p || want.p == 0 && u.Usage.P <= 0 {
			t.Errorf("prompt_tokens = %d, want %d (0: any positive)", u.Usage.P, want.p)
		}
		if u.Usage.C != want.c || u.Choices[0].FinishReason != want.finish || u.Model != "m1" {
			t.Errorf("got %s", a.body)
		}
	}
}

func TestRequestRecording(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Text("ok"))
	body := `{"model":"m1","messages":[{"role":"system","content":"be brief"},` +
		`{"role":"user","content":[{"type":"text","text":"hel"},{"type":"text","text":"lo"}]}],` +
		`"temperature":0,"max_tokens":64,"response_format":{"type":"json_object"}}`
	req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL()+"/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp, err := http.Get(srv.URL() + "/models"); err == nil {
		resp.Body.Close()
	}

	reqs := srv.Requests()
	if len(reqs) != 2 || srv.Calls() != 1 {
		t.Fatalf("%d requests, %d calls; want 2, 1", len(reqs), srv.Calls())
	}
	r := reqs[0]
	if r.Method != "POST" || r.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer k" ||
		!bytes.Equal(r.Body, []byte(body)) {
		t.Errorf("request = %+v", r)
	}
	want := []llmtest.Message{{"system", "be brief"}, {"user", "hello"}}
	if len(r.Messages) != 2 || r.Messages[0] != want[0] || r.Messages[1] != want[1] {
		t.Errorf("messages = %+v", r.Messages)
	}
	if r.Model != "m1" || r.Temperature == nil || *r.Temperature != 0 || r.MaxTokens != 64 ||
		string(r.ResponseFormat) != `{"type":"json_object"}` {
		t.Errorf("fields: model %q temperature %v max %d format %s", r.Model, r.Temperature, r.MaxTokens, r.ResponseFormat)
	}
	if reqs[1].Method != "GET" || reqs[1].Path != "/v1/models" {
		t.Errorf("second request = %s %s", reqs[1].Method, reqs[1].Path)
	}
}

func TestModels(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts []llmtest.Option
		want string
	}{
		{"default", nil, `{"object":"list","data":[{"id":"llmtest","object":"model","owned_by":"llmtest"}]}`},
		{"with model", []llmtest.Option{llmtest.WithModel("qwen3", 8192)},
			`{"object":"list","data":[{"id":"qwen3","object":"model","owned_by":"llmtest","max_model_len":8192,"meta":{"n_ctx_train":8192}}]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.New(t, tt.opts...)
			resp, err := http.Get(srv.URL() + "/models")
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			var got, want any
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			json.Unmarshal([]byte(tt.want), &want)
			g, _ := json.Marshal(got)
			w, _ := json.Marshal(want)
			if !bytes.Equal(g, w) {
				t.Errorf("got %s\nwant %s", g, w)
			}
		})
	}
}

func TestMaxContext(t *testing.T) {
	srv := llmtest.New(t, llmtest.WithMaxContext(10)) // 40 bytes
	srv.Push(llmtest.Text("fits"))
	a, err := post(t, t.Context(), srv.URL(), chatBody(strings.Repeat("x", 41)))
	if err != nil {
		t.Fatal(err)
	}
	var e struct {
		Error struct {
			Message string `json:"message"`
			Code    string `json:"code"`
		} `json:"error"`
	}
	json.Unmarshal(a.body, &e)
	if a.status != 400 || e.Error.Code != "context_length_exceeded" ||
		!strings.Contains(e.Error.Message, "maximum context length is 10 tokens") {
		t.Errorf("over the bound: %d %s", a.status, a.body)
	}
	a, err = post(t, t.Context(), srv.URL(), chatBody(strings.Repeat("x", 40)))
	if err != nil || a.status != 200 || content(t, a.body) != "fits" {
		t.Errorf("at the bound: %d %s %v", a.status, a.body, err)
	}
	if srv.Calls() != 2 {
		t.Errorf("Calls = %d, want 2", srv.Calls())
	}
}

func TestUnknownRoute(t *testing.T) {
	srv := llmtest.New(t)
	resp, err := http.Get(srv.URL() + "/embeddings")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 || srv.Calls() != 0 || len(srv.Requests()) != 1 {
		t.Errorf("status %d, calls %d, requests %d", resp.StatusCode, srv.Calls(), len(srv.Requests()))
	}
}

func TestWaitCallsConcurrent(t *testing.T) {
	srv := llmtest.New(t)
	srv.SetHandler(func(r llmtest.Request) llmtest.Reply { return llmtest.Text(r.Messages[0].Content) })
	const workers, each = 4, 10
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range each {
				msg := string(rune('a'+w)) + string(rune('a'+i))
				a, err := post(t, context.Background(), srv.URL(), chatBody(msg))
				if err != nil {
					t.Error(err)
					return
				}
				if got := content(t, a.body); got != msg {
					t.Errorf("content %q, want %q", got, msg)
				}
			}
		})
	}
	if err := srv.WaitCalls(t.Context(), workers*each); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if srv.Calls() != workers*each || len(srv.Requests()) != workers*each {
		t.Errorf("Calls = %d, Requests = %d", srv.Calls(), len(srv.Requests()))
	}

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := srv.WaitCalls(ctx, workers*each+1); err == nil {
		t.Error("WaitCalls with a canceled ctx returned nil")
	}
}

// A reply's reasoning goes in the message's "reasoning" (Ollama) or
// "reasoning_content" (llama-server, vLLM), beside its content, and
// neither is sent when empty.
func TestReasoningFields(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Reply{Content: "", Reasoning: "hmm", FinishReason: "length"},
		llmtest.Reply{Content: "{}", ReasoningContent: "so"},
		llmtest.Text("{}"),
	)
	for _, want := range []string{
		`{"content":"","reasoning":"hmm","role":"assistant"}`,
		`{"content":"{}","reasoning_content":"so","role":"assistant"}`,
		`{"content":"{}","role":"assistant"}`,
	} {
		a, err := post(t, t.Context(), srv.URL(), chatBody("q"))
		if err != nil {
			t.Fatal(err)
		}
		var b struct {
			Choices []struct {
				Message json.RawMessage `json:"message"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(a.body, &b); err != nil || len(b.Choices) != 1 {
			t.Fatalf("%s: %v", a.body, err)
		}
		if got := string(b.Choices[0].Message); got != want {
			t.Errorf("message %s, want %s", got, want)
		}
	}
}
