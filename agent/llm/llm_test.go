package llm_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/llm"
	"github.com/snapnode/snapnode/internal/llmtest"
	"github.com/snapnode/snapnode/internal/nettest"
)

const schema = `{"type":"object","properties":{"op":{"type":"string"}},"required":["op"]}`

func newClient(t *testing.T, srv *llmtest.Server, cfg llm.Config) *llm.Client {
	t.Helper()
	cfg.BaseURL = srv.URL()
	if cfg.Model == "" {
		cfg.Model = "m1"
	}
	c, err := llm.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func prompt(user string) agent.Prompt {
	return agent.Prompt{Messages: []agent.ChatMessage{
		{Role: agent.RoleSystem, Content: "Answer with one JSON object."},
		{Role: agent.RoleUser, Content: user},
	}}
}

func TestCompleteSuccess(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Reply{Content: `{"op":"read"}`, PromptTokens: 12, CompletionTokens: 5},
		llmtest.Reply{Content: `{"op":`, FinishReason: "length"},
	)
	c := newClient(t, srv, llm.Config{})

	p := prompt("list the files")
	p.MaxTokens = 256
	got, err := c.Complete(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	want := agent.Completion{Text: `{"op":"read"}`, Model: "m1", PromptTokens: 12, CompletionTokens: 5}
	if !reflect.DeepEqual(*got, want) {
		t.Errorf("Complete = %+v, want %+v", *got, want)
	}
	r := srv.Requests()[0]
	if r.Method != "POST" || r.Path != "/v1/chat/completions" || r.Model != "m1" || r.MaxTokens != 256 {
		t.Errorf("request %s %s model %q max_tokens %d", r.Method, r.Path, r.Model, r.MaxTokens)
	}
	if len(r.Messages) != 2 || r.Messages[0] != (llmtest.Message{Role: "system", Content: "Answer with one JSON object."}) ||
		r.Messages[1] != (llmtest.Message{Role: "user", Content: "list the files"}) {
		t.Errorf("messages = %+v", r.Messages)
	}
	if r.Temperature == nil || *r.Temperature != 0 {
		t.Errorf("temperature = %v, want an explicit 0", r.Temperature)
	}
	if h := r.Header.Get("Authorization"); h != "" {
		t.Errorf("Authorization %q sent without an API key", h)
	}

	p.Temperature = 0.7
	got, err = c.Complete(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Truncated || got.Text != `{"op":` {
		t.Errorf("finish_reason length: %+v", *got)
	}
	if r := srv.Requests()[1]; r.Temperature == nil || *r.Temperature != 0.7 {
		t.Errorf("temperature = %v, want 0.7", r.Temperature)
	}
}

func TestReasoningModel(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Text("{}"))
	c := newClient(t, srv, llm.Config{Model: "o3-mini"})
	p := prompt("x")
	p.MaxTokens, p.Temperature = 100, 0.2
	if _, err := c.Complete(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	r := srv.Requests()[0]
	if !bytes.Contains(r.Body, []byte(`"max_completion_tokens":100`)) || bytes.Contains(r.Body, []byte(`"max_tokens"`)) ||
		r.Temperature != nil {
		t.Errorf("a reasoning model's request: %s", r.Body)
	}
}

func TestResponseFormat(t *testing.T) {
	jsonObject := `{"type":"json_object"}`
	tests := []struct {
		mode       string
		schema     string
		schemaName string
		want       string // "" for no response_format
	}{
		{"", schema, "", `{"type":"json_schema","json_schema":{"name":"answer","schema":` + schema + `,"strict":false}}`},
		{"auto", schema, "step", `{"type":"json_schema","json_schema":{"name":"step","schema":` + schema + `,"strict":false}}`},
		{"auto", "", "", jsonObject},
		{"json_schema", schema, "", `{"type":"json_schema","json_schema":{"name":"answer","schema":` + schema + `,"strict":false}}`},
		{"json_schema", "", "", jsonObject},
		{"json_object", schema, "", jsonObject},
		{"none", schema, "", ""},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/schema=%t", tt.mode, tt.schema != ""), func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Push(llmtest.Text("{}"))
			c := newClient(t, srv, llm.Config{ResponseFormat: tt.mode})
			p := prompt("x")
			p.Schema, p.SchemaName = json.RawMessage(tt.schema), tt.schemaName
			if _, err := c.Complete(t.Context(), p); err != nil {
				t.Fatal(err)
			}
			got := srv.Requests()[0].ResponseFormat
			if tt.want == "" {
				if got != nil {
					t.Errorf("response_format = %s, want none", got)
				}
				return
			}
			if !jsonEqual(t, got, []byte(tt.want)) {
				t.Errorf("response_format = %s\nwant %s", got, tt.want)
			}
		})
	}
}

func jsonEqual(t *testing.T, a, b []byte) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatalf("%s: %v", a, err)
	}
	if err := json.Unmarshal(b, &y); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	xa, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return bytes.Equal(xa, yb)
}

func formatType(t *testing.T, r llmtest.Request) string {
	t.Helper()
	var f struct{ Type string }
	if err := json.Unmarshal(r.ResponseFormat, &f); err != nil {
		t.Fatalf("response_format %s: %v", r.ResponseFormat, err)
	}
	return f.Type
}

func TestSchemaFallback(t *testing.T) {
	tests := []struct {
		name     string
		mode     string
		refusal  llmtest.Reply
		fallback bool
	}{
		{"llama.cpp", "auto", llmtest.Error(400, "'response_format' of type 'json_schema' is not supported"), true},
		{"vLLM", "auto", llmtest.Reply{Status: 400, Body: `{"object":"error","message":"json_schema is not supported by this backend","code":400}`}, true},
		{"other 400", "auto", llmtest.Error(400, "messages must not be empty"), false},
		{"a 500", "auto", llmtest.Error(500, "response_format not supported"), false},
		{"json_schema mode", "json_schema", llmtest.Error(400, "response_format not supported"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Push(tt.refusal, llmtest.Text(`{"op":"a"}`), llmtest.Text(`{"op":"b"}`))
			c := newClient(t, srv, llm.Config{ResponseFormat: tt.mode})
			p := prompt("x")
			p.Schema = json.RawMessage(schema)

			got, err := c.Complete(t.Context(), p)
			if !tt.fallback {
				var me *agent.ModelError
				if !errors.As(err, &me) || me.Status != tt.refusal.Status || srv.Calls() != 1 {
					t.Fatalf("err = %v after %d calls, want the server's error after 1", err, srv.Calls())
				}
				return
			}
			if err != nil || got.Text != `{"op":"a"}` {
				t.Fatalf("Complete = %v, %v", got, err)
			}
			if _, err := c.Complete(t.Context(), p); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			if len(reqs) != 3 {
				t.Fatalf("%d requests, want 3", len(reqs))
			}
			for i, want := range []string{"json_schema", "json_object", "json_object"} {
				if got := formatType(t, reqs[i]); got != want {
					t.Errorf("request %d: response_format %s, want %s", i, got, want)
				}
			}
		})
	}
}

func TestServerErrors(t *testing.T) {
	long := strings.Repeat("é", 400)
	tests := []struct {
		name  string
		reply llmtest.Reply
		opts  []llmtest.Option
		want  agent.ModelError // Message: a substring
	}{
		{"429 Retry-After seconds",
			llmtest.Reply{Status: 429, Message: "rate limited", Header: http.Header{"Retry-After": {"7"}}}, nil,
			agent.ModelError{Status: 429, RetryAfter: 7 * time.Second, Message: "rate limited"}},
		{"503 no Retry-After", llmtest.Error(503, "loading model"), nil,
			agent.ModelError{Status: 503, Message: "loading model"}},
		{"proxy plain text", llmtest.Reply{Status: 502, Body: "502 Bad Gateway"}, nil,
			agent.ModelError{Status: 502, Message: "502 Bad Gateway"}},
		{"500 plain text", llmtest.Reply{Status: 500, Body: "Internal Server Error\n"}, nil,
			agent.ModelError{Status: 500, Message: "Internal Server Error"}},
		{"OpenAI context length", llmtest.Text("never sent"), []llmtest.Option{llmtest.WithMaxContext(5)},
			agent.ModelError{Status: 400, ContextLength: true, Message: "maximum context length is 5 tokens"}},
		{"llama.cpp context size", llmtest.Reply{Status: 400, Body: `{"error":{"code":400,"message":"the request exceeds the available context size, try increasing it","type":"exceed_context_size_error"}}`}, nil,
			agent.ModelError{Status: 400, ContextLength: true, Message: "exceeds the available context size"}},
		{"vLLM context length", llmtest.Reply{Status: 400, Body: `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens.","type":"BadRequestError","param":null,"code":400}`}, nil,
			agent.ModelError{Status: 400, ContextLength: true, Message: "This model's maximum context length is 4096"}},
		{"too many tokens", llmtest.Error(413, "too many tokens in prompt"), nil,
			agent.ModelError{Status: 413, ContextLength: true, Message: "too many tokens"}},
		// A 413 is the request's size, whatever its words: nginx's
		// client_max_body_size in front of the server, Groq's
		// per-minute token limit, GitHub Models' request cap, and
		// llama-server's HTTP library before its limit was raised (an
		// empty body).
		{"413 proxy HTML", llmtest.Reply{Status: 413, Body: "<html>\r\n<head><title>413 Request Entity Too Large</title></head>\r\n<body>\r\n<center><h1>413 Request Entity Too Large</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"}, nil,
			agent.ModelError{Status: 413, ContextLength: true, Message: "413 Request Entity Too Large"}},
		{"413 tokens per minute", llmtest.Reply{Status: 413, Body: `{"error":{"message":"Request too large for model ` + "`m`" + ` in organization org_1 service tier on_demand on tokens per minute (TPM): Limit 6000, Requested 12328, please reduce your message size and try again.","type":"tokens","code":"rate_limit_exceeded"}}`}, nil,
			agent.ModelError{Status: 413, ContextLength: true, Message: "Request too large for model"}},
		{"413 request body", llmtest.Reply{Status: 413, Body: `{"error":{"code":"tokens_limit_reached","message":"Request body too large for gpt-4.1 model. Max size: 8000 tokens."}}`}, nil,
			agent.ModelError{Status: 413, ContextLength: true, Message: "Request body too large"}},
		{"413 empty", llmtest.Reply{Status: 413}, nil,
			agent.ModelError{Status: 413, ContextLength: true}},
		{"Ollama string error", llmtest.Reply{Status: 404, Body: `{"error":"model \"m1\" not found, try pulling it first"}`}, nil,
			agent.ModelError{Status: 404, Message: `model "m1" not found`}},
		{"long message", llmtest.Error(400, long), nil,
			agent.ModelError{Status: 400, Message: "éé"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := llmtest.New(t, tt.opts...)
			srv.Push(tt.reply)
			c := newClient(t, srv, llm.Config{})
			_, err := c.Complete(t.Context(), prompt("a prompt of some length"))
			var me *agent.ModelError
			if !errors.As(err, &me) {
				t.Fatalf("err = %v (%T), want a *agent.ModelError", err, err)
			}
			if me.Status != tt.want.Status || me.RetryAfter != tt.want.RetryAfter ||
				me.ContextLength != tt.want.ContextLength || !strings.Contains(me.Message, tt.want.Message) {
				t.Errorf("ModelError = %+v\nwant %+v", *me, tt.want)
			}
			if len(me.Message) > 300 || !utf8Valid(me.Message) {
				t.Errorf("message of %d bytes, valid UTF-8 %t", len(me.Message), utf8Valid(me.Message))
			}
		})
	}
}

func utf8Valid(s string) bool { return strings.ToValidUTF8(s, "\uFFFD") == s }

func TestRetryAfterDate(t *testing.T) {
	srv := llmtest.New(t)
	at := time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)
	srv.Push(llmtest.Reply{Status: 503, Message: "busy", Header: http.Header{"Retry-After": {at}}})
	_, err := newClient(t, srv, llm.Config{}).Complete(t.Context(), prompt("x"))
	var me *agent.ModelError
	if !errors.As(err, &me) || me.RetryAfter <= 58*time.Minute || me.RetryAfter > time.Hour {
		t.Errorf("err = %#v, want RetryAfter of about an hour", err)
	}
}

func TestResponseTooLarge(t *testing.T) {
	srv := llmtest.New(t)
	big := strings.Repeat("x", 4096)
	srv.Push(llmtest.Text(big), llmtest.Reply{Status: 500, Body: big}, llmtest.Text("small"))
	c := newClient(t, srv, llm.Config{MaxResponseBytes: 2048})

	got, err := c.Complete(t.Context(), prompt("x"))
	var me *agent.ModelError
	if !errors.Is(err, llm.ErrResponseTooLarge) || errors.As(err, &me) || got != nil {
		t.Errorf("oversized answer: %v, %v; want ErrResponseTooLarge", got, err)
	}
	_, err = c.Complete(t.Context(), prompt("x"))
	if !errors.As(err, &me) || me.Status != 500 {
		t.Errorf("oversized error answer: %v, want a ModelError of status 500", err)
	}
	if got, err := c.Complete(t.Context(), prompt("x")); err != nil || got.Text != "small" {
		t.Errorf("small answer after: %v, %v", got, err)
	}
}

func TestCancel(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Reply{Content: "late", Delay: time.Hour})
	c := newClient(t, srv, llm.Config{})
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Complete(ctx, prompt("x"))
		errc <- err
	}()
	if err := srv.WaitCalls(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	err := <-errc
	var me *agent.ModelError
	if !errors.Is(err, context.Canceled) || errors.As(err, &me) {
		t.Errorf("err = %v, want context.Canceled", err)
	}
}

func TestTimeout(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Reply{Content: "late", Delay: time.Hour})
	c := newClient(t, srv, llm.Config{Timeout: 50 * time.Millisecond})
	_, err := c.Complete(t.Context(), prompt("x"))
	var me *agent.ModelError
	if !errors.Is(err, context.DeadlineExceeded) || errors.As(err, &me) {
		t.Errorf("err = %v, want a transport error wrapping DeadlineExceeded", err)
	}
}

func TestTransportError(t *testing.T) {
	dead := httptest.NewServer(http.NotFoundHandler())
	url := dead.URL + "/v1"
	dead.Close()
	c, err := llm.New(llm.Config{BaseURL: url, Model: "m1", APIKey: "sk-transport-secret"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Complete(t.Context(), prompt("x"))
	var me *agent.ModelError
	if err == nil || errors.As(err, &me) || strings.Contains(err.Error(), "sk-transport-secret") {
		t.Errorf("connection refused: err = %v", err)
	}
	if _, err := c.ContextTokens(t.Context()); err == nil || errors.As(err, &me) {
		t.Errorf("ContextTokens: err = %v, want a transport error", err)
	}
}

func TestAPIKey(t *testing.T) {
	const key = "sk-test-0123456789abcdef"
	srv := llmtest.New(t, llmtest.WithModel("m1", 4096))
	srv.Push(llmtest.Text("{}"), llmtest.Error(401, "Incorrect API key provided: "+key+"."))
	var logs bytes.Buffer
	cfg := llm.Config{APIKey: key, Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))}
	c := newClient(t, srv, cfg)

	if _, err := c.Complete(t.Context(), prompt("x")); err != nil {
		t.Fatal(err)
	}
	_, err := c.Complete(t.Context(), prompt("x"))
	var me *agent.ModelError
	if !errors.As(err, &me) || me.Status != 401 || strings.Contains(err.Error(), key) {
		t.Errorf("err = %v, want a ModelError 401 without the key", err)
	}
	if _, err := c.ContextTokens(t.Context()); err != nil {
		t.Fatal(err)
	}
	for i, r := range srv.Requests() {
		if got := r.Header.Get("Authorization"); got != "Bearer "+key {
			t.Errorf("request %d (%s): Authorization %q", i, r.Path, got)
		}
	}
	cfg.BaseURL = srv.URL()
	slog.New(slog.NewJSONHandler(&logs, nil)).Info("config", "cfg", cfg)
	if s := fmt.Sprint(cfg) + fmt.Sprintf("%+v", cfg) + logs.String(); strings.Contains(s, key) {
		t.Errorf("the key shows in %s", s)
	}
}

func TestNoChoices(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(
		llmtest.Reply{Body: `{"id":"x","object":"chat.completion","model":"m1","choices":[]}`},
		llmtest.Reply{Body: `not json`},
	)
	c := newClient(t, srv, llm.Config{})
	for _, what := range []string{"no choices", "not JSON"} {
		got, err := c.Complete(t.Context(), prompt("x"))
		var me *agent.ModelError
		if err == nil || got != nil || errors.As(err, &me) {
			t.Errorf("%s: %v, %v; want an error", what, got, err)
		}
	}
}

func TestContextTokens(t *testing.T) {
	// props is llama-server's GET /props, at the server's root, of a
	// server run with -c 8192; the others have none (404). It is asked
	// when the model list gives no context the server runs with (only
	// llama.cpp's n_ctx_train, or nothing): those cases make two
	// requests, the others one.
	const props = `{"default_generation_settings":{"id":0,"n_ctx":8192,"params":{"n_predict":-1}},"total_slots":1,"model_path":"/models/qwen.gguf"}`
	tests := []struct {
		name   string
		status int
		body   string
		props  string // "" for a 404
		want   int
		hits   int
	}{
		{"vLLM", 200, `{"object":"list","data":[{"id":"other","max_model_len":1},{"id":"m1","object":"model","max_model_len":32768}]}`, props, 32768, 1},
		{"llama.cpp", 200, `{"object":"list","data":[{"id":"/models/qwen.gguf","object":"model","meta":{"vocab_type":2,"n_ctx_train":40960,"n_embd":4096}}]}`, props, 8192, 2},
		{"llama.cpp without /props", 200, `{"object":"list","data":[{"id":"/models/qwen.gguf","object":"model","meta":{"vocab_type":2,"n_ctx_train":40960,"n_embd":4096}}]}`, "", 40960, 2},
		{"llama.cpp n_ctx", 200, `{"data":[{"id":"m1","meta":{"n_ctx_train":40960,"n_ctx":8192}}]}`, props, 8192, 1},
		{"LM Studio", 200, `{"data":[{"id":"m1","max_context_length":16384}]}`, props, 16384, 1},
		{"generic", 200, `{"data":[{"id":"m1","context_length":8192.0}]}`, props, 8192, 1},
		{"context_window", 200, `{"data":[{"id":"m1","context_window":200000}]}`, props, 200000, 1},
		{"Ollama: none", 200, `{"object":"list","data":[{"id":"m1","object":"model","created":1,"owned_by":"library"}]}`, "", 0, 2},
		{"model not listed", 200, `{"data":[{"id":"a","max_model_len":1},{"id":"b","max_model_len":2}]}`, props, 0, 1},
		{"no /models", 404, `404 page not found`, props, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			hits := 0
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				hits++
				mu.Unlock()
				switch {
				case r.Method == "GET" && r.URL.Path == "/v1/models":
					w.WriteHeader(tt.status)
					fmt.Fprint(w, tt.body)
				case r.Method == "GET" && r.URL.Path == "/props" && tt.props != "":
					w.Header().Set("Content-Type", "application/json")
					fmt.Fprint(w, tt.props)
				case r.Method == "GET" && r.URL.Path == "/props":
					http.NotFound(w, r)
				default:
					http.Error(w, "bad request "+r.URL.Path, 400)
				}
			}))
			defer srv.Close()
			c, err := llm.New(llm.Config{BaseURL: srv.URL + "/v1/", Model: "m1"})
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				n, err := c.ContextTokens(t.Context())
				if err != nil || n != tt.want {
					t.Errorf("ContextTokens = %d, %v; want %d", n, err, tt.want)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if hits != tt.hits {
				t.Errorf("%d requests for two calls, want %d (kept)", hits, tt.hits)
			}
		})
	}
}

// roundTripFunc is an http.RoundTripper of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Check and ContextTokens asked at the same moment (the node's look at
// start and the agent's runtime) share one GET /models: the second waits
// for the first's answer, which serves both, and is kept for later calls.
func TestModelListAskedOnce(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		asked := 0
		release := make(chan struct{})
		hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			asked++
			mu.Unlock()
			<-release
			return &http.Response{
				StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Request: r,
				Body: io.NopCloser(strings.NewReader(`{"data":[{"id":"m1","max_model_len":4096}]}`)),
			}, nil
		})}
		c, err := llm.New(llm.Config{BaseURL: "http://model.test/v1", Model: "m1", HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		var checked error
		var n int
		var sized error
		var wg sync.WaitGroup
		wg.Go(func() { checked = c.Check(t.Context()) })
		wg.Go(func() { n, sized = c.ContextTokens(t.Context()) })
		synctest.Wait() // both calls wait, on the server or on each other
		mu.Lock()
		if asked != 1 {
			t.Errorf("%d requests for GET /models at once, want 1", asked)
		}
		mu.Unlock()
		close(release)
		wg.Wait()
		if checked != nil || sized != nil || n != 4096 {
			t.Errorf("Check = %v, ContextTokens = %d, %v; want nil, 4096, nil", checked, n, sized)
		}
		if err := c.Check(t.Context()); err != nil {
			t.Errorf("Check again: %v", err)
		}
		mu.Lock()
		defer mu.Unlock()
		if asked != 1 {
			t.Errorf("%d requests after a Check again, want 1 (the answer kept)", asked)
		}
	})
}

// A call waiting on another's GET /models asks itself when the other
// gave up (its context ended) before the answer.
func TestModelListAskedAgainWhenTheAskerGaveUp(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		var mu sync.Mutex
		asked := 0
		hc := &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			mu.Lock()
			asked++
			first := asked == 1
			mu.Unlock()
			if first {
				<-r.Context().Done()
				return nil, r.Context().Err()
			}
			return &http.Response{
				StatusCode: 200, Header: http.Header{"Content-Type": {"application/json"}}, Request: r,
				Body: io.NopCloser(strings.NewReader(`{"data":[{"id":"m1","max_model_len":4096}]}`)),
			}, nil
		})}
		c, err := llm.New(llm.Config{BaseURL: "http://model.test/v1", Model: "m1", HTTPClient: hc})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		var gaveUp error
		var wg sync.WaitGroup
		wg.Go(func() { _, gaveUp = c.ContextTokens(ctx) })
		synctest.Wait()
		var n int
		var sized error
		wg.Go(func() { n, sized = c.ContextTokens(t.Context()) })
		synctest.Wait()
		cancel()
		wg.Wait()
		if gaveUp == nil || sized != nil || n != 4096 {
			t.Errorf("ContextTokens = %v (canceled), then %d, %v; want an error, then 4096", gaveUp, n, sized)
		}
		mu.Lock()
		defer mu.Unlock()
		if asked != 2 {
			t.Errorf("%d requests, want 2", asked)
		}
	})
}

func TestContextTokensLLMTest(t *testing.T) {
	srv := llmtest.New(t, llmtest.WithModel("qwen3", 8192))
	for _, model := range []string{"qwen3", "anything"} { // a one-model server's entry serves any name
		n, err := newClient(t, srv, llm.Config{Model: model}).ContextTokens(t.Context())
		if err != nil || n != 8192 {
			t.Errorf("%s: ContextTokens = %d, %v; want 8192", model, n, err)
		}
	}
	n, err := newClient(t, llmtest.New(t), llm.Config{}).ContextTokens(t.Context())
	if err != nil || n != 0 {
		t.Errorf("without a context length: %d, %v; want 0", n, err)
	}
}

func TestContextTokensError(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Retry-After", "3")
		http.Error(w, "overloaded", http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	c, err := llm.New(llm.Config{BaseURL: srv.URL + "/v1", Model: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.ContextTokens(t.Context())
	var me *agent.ModelError
	if !errors.As(err, &me) || me.Status != 503 || me.RetryAfter != 3*time.Second || me.Message != "overloaded" {
		t.Errorf("err = %#v", err)
	}
}

func TestNew(t *testing.T) {
	tests := []struct {
		name string
		cfg  llm.Config
		ok   bool
	}{
		{"ok", llm.Config{BaseURL: "http://127.0.0.1:11434/v1", Model: "m"}, true},
		{"https", llm.Config{BaseURL: "https://api.example.com/v1", Model: "m", ResponseFormat: "none"}, true},
		{"no model", llm.Config{BaseURL: "http://127.0.0.1/v1"}, false},
		{"no URL", llm.Config{Model: "m"}, false},
		{"not http", llm.Config{BaseURL: "ftp://host/v1", Model: "m"}, false},
		{"no host", llm.Config{BaseURL: "http:///v1", Model: "m"}, false},
		{"bad format", llm.Config{BaseURL: "http://h/v1", Model: "m", ResponseFormat: "xml"}, false},
		{"negative timeout", llm.Config{BaseURL: "http://h/v1", Model: "m", Timeout: -1}, false},
		{"negative cap", llm.Config{BaseURL: "http://h/v1", Model: "m", MaxResponseBytes: -1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.APIKey = "sk-never-shown"
			_, err := llm.New(tt.cfg)
			if (err == nil) != tt.ok {
				t.Errorf("New: err = %v, want ok %t", err, tt.ok)
			}
			if err != nil && strings.Contains(err.Error(), tt.cfg.APIKey) {
				t.Errorf("the key shows in %v", err)
			}
		})
	}
	if _, err := llm.New(llm.Config{BaseURL: "http://h/v1", Model: "m"}); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidSchema(t *testing.T) {
	srv := llmtest.New(t)
	c := newClient(t, srv, llm.Config{})
	p := prompt("x")
	p.Schema = json.RawMessage(`{"type":`)
	if _, err := c.Complete(t.Context(), p); err == nil || srv.Calls() != 0 {
		t.Errorf("invalid schema: err %v after %d calls", err, srv.Calls())
	}
}

func TestConcurrent(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Error(400, "response_format json_schema not supported"))
	srv.SetHandler(func(r llmtest.Request) llmtest.Reply {
		return llmtest.Text(r.Messages[len(r.Messages)-1].Content)
	})
	c := newClient(t, srv, llm.Config{})
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Go(func() {
			for i := range 10 {
				p := prompt(fmt.Sprintf("%d-%d", w, i))
				p.Schema = json.RawMessage(schema)
				got, err := c.Complete(context.Background(), p)
				if err != nil || got.Text != p.Messages[1].Content {
					t.Errorf("Complete(%s) = %v, %v", p.Messages[1].Content, got, err)
				}
			}
		})
	}
	wg.Wait()
	if n := srv.Calls(); n < 41 {
		t.Errorf("%d calls, want at least 41", n)
	}
}

// Check looks at the server's /models before a job needs it: a server
// that cannot be reached or refuses is an error (a refusal an
// *agent.ModelError, as a completion's is), a model name the server does
// not list (of several) is ErrModelNotListed naming what it lists, a
// server without /models is ErrNoModelList (which may be a wrong base
// URL), and a server with the model or only one passes.
func TestCheck(t *testing.T) {
	many := `{"data":[` + strings.TrimSuffix(strings.Repeat(`{"id":"x"},`, 12), ",") + `]}`
	tests := []struct {
		name    string
		status  int
		body    string
		wantErr string // "" passes
		notList bool
		noList  bool
		refused int // the status of the *agent.ModelError
	}{
		{"listed", 200, `{"data":[{"id":"a"},{"id":"m1","max_model_len":4096}]}`, "", false, false, 0},
		{"one model", 200, `{"data":[{"id":"/models/qwen.gguf"}]}`, "", false, false, 0},
		{"empty list", 200, `{"data":[]}`, "", false, false, 0},
		{"no /models", 404, `404 page not found`, "no model list", false, true, 0},
		{"not pulled", 200, `{"data":[{"id":"llama3:8b"},{"id":"qwen3:4b"}]}`, `lists no model of that name "m1": it lists "llama3:8b", "qwen3:4b"`, true, false, 0},
		{"many", 200, many, `and 2 more`, true, false, 0},
		{"unauthorized", 401, `{"error":{"message":"bad key"}}`, "bad key", false, false, 401},
		{"forbidden", 403, `{"error":"no access"}`, "no access", false, false, 403},
		{"down", 503, `busy`, "busy", false, false, 503},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			}))
			defer srv.Close()
			c, err := llm.New(llm.Config{BaseURL: srv.URL + "/v1", Model: "m1"})
			if err != nil {
				t.Fatal(err)
			}
			err = c.Check(t.Context())
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("Check: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("Check = %v; want an error with %q", err, tt.wantErr)
			case errors.Is(err, llm.ErrModelNotListed) != tt.notList:
				t.Errorf("Check = %v; ErrModelNotListed %v, want %v", err, errors.Is(err, llm.ErrModelNotListed), tt.notList)
			case errors.Is(err, llm.ErrNoModelList) != tt.noList:
				t.Errorf("Check = %v; ErrNoModelList %v, want %v", err, errors.Is(err, llm.ErrNoModelList), tt.noList)
			}
			var me *agent.ModelError
			if got := errors.As(err, &me); got != (tt.refused != 0) || got && me.Status != tt.refused {
				t.Errorf("Check = %v (%T); want a ModelError of status %d", err, err, tt.refused)
			}
		})
	}
	closed := nettest.RefusedAddr(t).String()
	c, err := llm.New(llm.Config{BaseURL: "http://" + closed + "/v1", Model: "m1"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check(t.Context()); err == nil {
		t.Error("Check of a server that is not there passed")
	}
}

// The request carries reasoning_effort only when the client is given
// one, as given, on every request (the json_object one after a refused
// json_schema too); a value no API documents is refused at New. Before,
// the client had no way to turn a thinking model's thinking down or off.
func TestReasoningEffort(t *testing.T) {
	for _, effort := range []string{"", "none", "minimal", "low", "medium", "high", "xhigh"} {
		t.Run("effort="+effort, func(t *testing.T) {
			srv := llmtest.New(t)
			srv.Push(llmtest.Error(400, "response_format json_schema is not supported"), llmtest.Text("{}"))
			c := newClient(t, srv, llm.Config{ReasoningEffort: effort})
			p := prompt("x")
			p.Schema = json.RawMessage(schema)
			if _, err := c.Complete(t.Context(), p); err != nil {
				t.Fatal(err)
			}
			reqs := srv.Requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests; want 2 (json_schema refused, then json_object)", len(reqs))
			}
			for i, r := range reqs {
				want := ""
				if effort != "" {
					want = `"` + effort + `"`
				}
				if got := string(r.ReasoningEffort); got != want {
					t.Errorf("request %d: reasoning_effort %s; want %s (body %s)", i, got, cmp.Or(want, "none sent"), r.Body)
				}
				if effort == "" && bytes.Contains(r.Body, []byte("reasoning_effort")) {
					t.Errorf("request %d sent reasoning_effort: %s", i, r.Body)
				}
			}
		})
	}
	for _, bad := range []string{"off", "High", "max", " low"} {
		if _, err := llm.New(llm.Config{BaseURL: "http://127.0.0.1:1/v1", Model: "m", ReasoningEffort: bad}); err == nil ||
			!strings.Contains(err.Error(), "ReasoningEffort") {
			t.Errorf("New with ReasoningEffort %q: %v; want it refused", bad, err)
		}
	}
}

// A server's refusal of the reasoning effort is not taken for a refusal
// of json_schema, though it may say "not supported" (Ollama: think value
// "medium" is not supported for this model): the error is returned after
// one request, and json_schema is still sent afterwards.
func TestReasoningEffortRefusalIsNotSchemaRefusal(t *testing.T) {
	srv := llmtest.New(t)
	srv.Push(llmtest.Error(400, `think value "medium" is not supported for this model`), llmtest.Text("{}"))
	c := newClient(t, srv, llm.Config{ReasoningEffort: "medium"})
	p := prompt("x")
	p.Schema = json.RawMessage(schema)
	var me *agent.ModelError
	if _, err := c.Complete(t.Context(), p); !errors.As(err, &me) || me.Status != 400 {
		t.Fatalf("Complete: %v; want the server's HTTP 400", err)
	}
	if _, err := c.Complete(t.Context(), p); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests; want 2 (the refusal not asked again as json_object)", len(reqs))
	}
	if !bytes.Contains(reqs[1].ResponseFormat, []byte("json_schema")) {
		t.Errorf("after the refusal, response_format %s; want json_schema still", reqs[1].ResponseFormat)
	}
}
