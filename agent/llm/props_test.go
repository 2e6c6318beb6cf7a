package llm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/llm"
)

// llamaModels is llama-server's GET /v1/models: one entry, whose meta
// gives the context the model was trained with, not the server's -c.
const llamaModels = `{"object":"list","data":[{"id":"/models/qwen.gguf","object":"model","owned_by":"llamacpp","created":1,` +
	`"meta":{"vocab_type":2,"n_vocab":151936,"n_ctx_train":32768,"n_embd":4096,"n_params":7615616512,"size":4677120000}}]}`

// llamaProps is llama-server's GET /props of a server run with -c 16384.
const llamaProps = `{"default_generation_settings":{"id":0,"id_task":-1,"n_ctx":16384,"speculative":false,"is_processing":false,` +
	`"params":{"n_predict":-1,"temperature":0.8,"max_tokens":-1}},"total_slots":1,` +
	`"model_path":"/models/qwen.gguf","chat_template":"…","modalities":{"vision":false},"build_info":"b6000-abc","is_sleeping":false}`

// scriptedLlama is a server shaped like llama-server: /v1/models and, at
// its root, /props, which answers as props says. It counts the requests
// of each path.
type scriptedLlama struct {
	srv   *httptest.Server
	mu    sync.Mutex
	hits  map[string]int
	auths []string
}

func newScriptedLlama(t *testing.T, models string, props http.HandlerFunc) *scriptedLlama {
	t.Helper()
	s := &scriptedLlama{hits: map[string]int{}}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.hits[r.URL.Path]++
		s.auths = append(s.auths, r.Header.Get("Authorization"))
		s.mu.Unlock()
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/models":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, models)
		case r.Method == http.MethodGet && r.URL.Path == "/props" && props != nil:
			props(w, r)
		default:
			http.Error(w, `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}`, http.StatusNotFound)
		}
	}))
	t.Cleanup(s.srv.Close)
	return s
}

func (s *scriptedLlama) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits[path]
}

func jsonBody(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, body)
	}
}

// llama-server's model list gives only the model's trained context
// (meta.n_ctx_train): the client asks the server's GET /props, at its
// root, for the context it runs with (default_generation_settings.n_ctx),
// once. Before, the client took 32768, and a prompt built for it was
// refused by a server run with -c 16384.
func TestContextTokensLlamaServerProps(t *testing.T) {
	s := newScriptedLlama(t, llamaModels, jsonBody(llamaProps))
	c, err := llm.New(llm.Config{BaseURL: s.srv.URL + "/v1", Model: "qwen", APIKey: "sk-local"})
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		n, from, err := c.ContextTokensFrom(t.Context())
		if err != nil || n != 16384 || from != llm.ContextFromProps {
			t.Errorf("ContextTokensFrom = %d, %v, %v; want 16384 from llama-server's /props", n, from, err)
		}
		if n, err := c.ContextTokens(t.Context()); err != nil || n != 16384 {
			t.Errorf("ContextTokens = %d, %v; want 16384", n, err)
		}
	}
	if err := c.Check(t.Context()); err != nil {
		t.Errorf("Check = %v", err)
	}
	if m, p := s.count("/v1/models"), s.count("/props"); m != 1 || p != 1 {
		t.Errorf("%d GET /v1/models and %d GET /props, want one each (kept)", m, p)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, a := range s.auths {
		if a != "Bearer sk-local" {
			t.Errorf("request %d: Authorization %q", i, a)
		}
	}
}

// A server without llama-server's /props (Ollama, vLLM, OpenAI answer
// 404), or whose /props cannot be read, leaves the model list's figure
// (llama.cpp's n_ctx_train, or none), with a debug line and no error;
// the answer is kept all the same, so that /props is asked once.
func TestContextTokensPropsFallback(t *testing.T) {
	const ollamaModels = `{"object":"list","data":[{"id":"m1","object":"model","created":1,"owned_by":"library"}]}`
	tests := []struct {
		name   string
		models string
		props  http.HandlerFunc
		cfg    llm.Config
		want   int
		from   llm.ContextFrom
	}{
		{"404 (Ollama)", ollamaModels, nil, llm.Config{}, 0, llm.ContextFromNone},
		{"404 (llama.cpp model list)", llamaModels, nil, llm.Config{}, 32768, llm.ContextFromTrained},
		{"not JSON", llamaModels, func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "<html>hello</html>") }, llm.Config{}, 32768, llm.ContextFromTrained},
		{"n_ctx not a number", llamaModels, jsonBody(`{"default_generation_settings":{"n_ctx":"16384"}}`), llm.Config{}, 32768, llm.ContextFromTrained},
		{"no n_ctx (router mode)", llamaModels, jsonBody(`{"role":"router"}`), llm.Config{}, 32768, llm.ContextFromTrained},
		{"n_ctx out of range", llamaModels, jsonBody(`{"default_generation_settings":{"n_ctx":1e12}}`), llm.Config{}, 32768, llm.ContextFromTrained},
		{"n_ctx 2^53", llamaModels, jsonBody(`{"default_generation_settings":{"n_ctx":9007199254740992}}`), llm.Config{}, 32768, llm.ContextFromTrained},
		{"n_ctx 0", llamaModels, jsonBody(`{"default_generation_settings":{"n_ctx":0}}`), llm.Config{}, 32768, llm.ContextFromTrained},
		{"n_ctx negative", llamaModels, jsonBody(`{"default_generation_settings":{"n_ctx":-4096}}`), llm.Config{}, 32768, llm.ContextFromTrained},
		{"n_ctx 1", llamaModels, jsonBody(`{"default_generation_settings":{"n_ctx":1}}`), llm.Config{}, 32768, llm.ContextFromTrained},
		{"n_ctx 1023", llamaModels, jsonBody(`{"default_generation_settings":{"n_ctx":1023}}`), llm.Config{}, 32768, llm.ContextFromTrained},
		{"max_model_len 1 (vLLM)", `{"object":"list","data":[{"id":"m1","object":"model","max_model_len":1}]}`, nil, llm.Config{}, 0, llm.ContextFromNone},
		{"n_ctx 1023 in the model list", `{"object":"list","data":[{"id":"m1","object":"model","meta":{"n_ctx":1023,"n_ctx_train":32768}}]}`, nil, llm.Config{}, 32768, llm.ContextFromTrained},
		{"500", llamaModels, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "boom", 500) }, llm.Config{}, 32768, llm.ContextFromTrained},
		{"over the cap", llamaModels, jsonBody(`{"default_generation_settings":{"n_ctx":16384},"chat_template":"` + strings.Repeat("x", 4096) + `"}`),
			llm.Config{MaxResponseBytes: 2048}, 32768, llm.ContextFromTrained},
		{"too slow", llamaModels, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() },
			llm.Config{Timeout: 200 * time.Millisecond}, 32768, llm.ContextFromTrained},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newScriptedLlama(t, tt.models, tt.props)
			var logs bytes.Buffer
			cfg := tt.cfg
			cfg.BaseURL, cfg.Model = s.srv.URL+"/v1/", "m1"
			cfg.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
			c, err := llm.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			for range 2 {
				n, from, err := c.ContextTokensFrom(t.Context())
				if err != nil || n != tt.want || from != tt.from {
					t.Errorf("ContextTokensFrom = %d, %v, %v; want %d, %v", n, from, err, tt.want, tt.from)
				}
			}
			if err := c.Check(t.Context()); err != nil {
				t.Errorf("Check = %v", err)
			}
			if m, p := s.count("/v1/models"), s.count("/props"); m != 1 || p != 1 {
				t.Errorf("%d GET /v1/models and %d GET /props, want one each (kept)", m, p)
			}
			if !strings.Contains(logs.String(), "level=DEBUG") || !strings.Contains(logs.String(), "/props") || strings.Contains(logs.String(), "level=WARN") {
				t.Errorf("logs = %s; want a debug line naming /props, no warning", logs.String())
			}
		})
	}
}

// A model list that gives a context the server runs with (vLLM's
// max_model_len, a llama.cpp build's meta.n_ctx), or that does not list
// the model, is not followed by GET /props; nor is any with
// Config.ContextSet.
func TestContextTokensNoPropsNeeded(t *testing.T) {
	for _, models := range []string{
		`{"data":[{"id":"m1","max_model_len":8192}]}`,
		`{"data":[{"id":"m1","meta":{"n_ctx_train":40960,"n_ctx":8192}}]}`,
		`{"data":[{"id":"a"},{"id":"b"}]}`,
	} {
		s := newScriptedLlama(t, models, jsonBody(llamaProps))
		c, err := llm.New(llm.Config{BaseURL: s.srv.URL + "/v1", Model: "m1"})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.ContextTokens(t.Context()); err != nil {
			t.Fatal(err)
		}
		if p := s.count("/props"); p != 0 {
			t.Errorf("%s: %d GET /props, want none", models, p)
		}
	}
	// Nor is a list of llama-server's when the context is set apart
	// (Config.ContextSet: the operator's agent.context_tokens).
	s := newScriptedLlama(t, llamaModels, jsonBody(llamaProps))
	c, err := llm.New(llm.Config{BaseURL: s.srv.URL + "/v1", Model: "qwen", ContextSet: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p := s.count("/props"); p != 0 {
		t.Errorf("ContextSet: %d GET /props, want none", p)
	}
}

// llama-server refuses a prompt longer than its context with HTTP 400
// and its context in the body (n_ctx): the ModelError gives it, for the
// runtime to build the next prompts for it. A refusal without it, or
// one that is not of the context, gives none.
func TestContextRefusalGivesTheServersContext(t *testing.T) {
	tests := []struct {
		name   string
		body   string
		ctxLen bool
		want   int
	}{
		{"llama-server", `{"error":{"code":400,"message":"request (20480 tokens) exceeds the available context size (16384 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":20480,"n_ctx":16384}}`, true, 16384},
		{"vLLM", `{"object":"error","message":"This model's maximum context length is 8192 tokens. However, you requested 9000 tokens.","type":"BadRequestError","code":400}`, true, 0},
		{"other refusal", `{"error":{"code":400,"message":"bad grammar","type":"invalid_request_error","n_ctx":16384}}`, false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusBadRequest)
				fmt.Fprint(w, tt.body)
			}))
			defer srv.Close()
			c, err := llm.New(llm.Config{BaseURL: srv.URL + "/v1", Model: "m1", ResponseFormat: llm.FormatNone})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Complete(t.Context(), prompt("x"))
			var me *agent.ModelError
			if !errors.As(err, &me) || me.Status != 400 || me.ContextLength != tt.ctxLen || me.ContextTokens != tt.want {
				t.Errorf("err = %#v; want a ModelError 400, ContextLength %v, ContextTokens %d", err, tt.ctxLen, tt.want)
			}
		})
	}
}

// A /props that does not answer (a proxy that holds the request, a
// server busy loading) is given less time than the caller has: the
// model list's figure (n_ctx_train) is still had within the caller's
// deadline, as the runtime's wait at start (agent.ContextWait) is.
// Before, /props had the client's whole time-out (2 minutes by
// default), the caller's deadline passed, and the model list's figure
// was lost with it: the runtime took the default.
func TestContextTokensPropsHanging(t *testing.T) {
	release := make(chan struct{})
	s := newScriptedLlama(t, llamaModels, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	c, err := llm.New(llm.Config{BaseURL: s.srv.URL + "/v1", Model: "qwen"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	n, from, err := c.ContextTokensFrom(ctx)
	if err != nil || n != 32768 || from != llm.ContextFromTrained {
		t.Errorf("ContextTokensFrom = %d, %v, %v; want 32768 from the model's trained context", n, from, err)
	}
}

// GET /props is asked at the configured base URL less its /v1, on its
// host: a base with a path before /v1 (a proxy's /api/v1) has it at
// that path's /props, a base without /v1 at its own /props.
func TestPropsPath(t *testing.T) {
	for _, tt := range []struct{ base, want string }{
		{"/v1", "/props"},
		{"/v1/", "/props"},
		{"/api/v1", "/api/props"},
		{"/llama", "/llama/props"},
		{"", "/props"},
	} {
		var mu sync.Mutex
		var paths []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			paths = append(paths, r.URL.Path)
			mu.Unlock()
			w.Header().Set("Content-Type", "application/json")
			if strings.HasSuffix(r.URL.Path, "/models") {
				fmt.Fprint(w, llamaModels)
				return
			}
			fmt.Fprint(w, llamaProps)
		}))
		c, err := llm.New(llm.Config{BaseURL: srv.URL + tt.base, Model: "qwen"})
		if err != nil {
			t.Fatal(err)
		}
		n, err := c.ContextTokens(t.Context())
		srv.Close()
		mu.Lock()
		if err != nil || len(paths) != 2 || paths[1] != tt.want {
			t.Errorf("base %q: ContextTokens = %d, %v after requests of %q; want GET %s second", tt.base, n, err, paths, tt.want)
		}
		mu.Unlock()
	}
}
