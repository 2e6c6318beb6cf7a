package llmtest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// DefaultModel is the model the server names when no WithModel option
// was given and the request named none.
const DefaultModel = "llmtest"

// Reply is one scripted answer to a chat-completions request.
type Reply struct {
	// Content is the assistant message's content, sent wrapped in a
	// chat.completion object.
	Content string
	// Status is the HTTP status; 0 means 200. A status other than 200
	// sends Body, or else a JSON error object carrying Message.
	Status int
	// Message is the error message of a non-200 reply.
	Message string
	// Body, when not empty, is sent as is instead of the JSON the other
	// fields would make (whatever the status).
	Body string
	// Header holds extra response headers (e.g. Retry-After).
	Header http.Header
	// Delay is waited before answering; the wait ends early, without an
	// answer, when the client goes away or the server closes.
	Delay time.Duration
	// PromptTokens and CompletionTokens are the usage figures; 0 means a
	// rough count of 4 bytes a token.
	PromptTokens, CompletionTokens int
	// FinishReason is the choice's finish_reason ("stop" when empty).
	FinishReason string
	// Reasoning and ReasoningContent, when not empty, are sent as the
	// message's "reasoning" (Ollama's) and "reasoning_content"
	// (llama-server's, vLLM's): a thinking model's trace beside its
	// content.
	Reasoning, ReasoningContent string
}

// Text returns a Reply whose content is content.
func Text(content string) Reply { return Reply{Content: content} }

// JSON returns a Reply whose content is v marshaled as JSON. It panics if
// v cannot be marshaled.
func JSON(v any) Reply {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("llmtest.JSON: %v", err))
	}
	return Reply{Content: string(b)}
}

// Error returns a Reply of HTTP status with the error message msg.
func Error(status int, msg string) Reply { return Reply{Status: status, Message: msg} }

// Message is one chat message of a recorded request.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Request is a request the server received.
type Request struct {
	Method, Path string
	Header       http.Header
	Body         []byte

	// The fields below are decoded from a chat-completions body.

	Messages []Message
	Model    string
	// ResponseFormat is the raw response_format value, nil when absent.
	ResponseFormat json.RawMessage
	// Temperature is nil when the request sent none.
	Temperature *float64
	// MaxTokens is max_tokens, or else max_completion_tokens.
	MaxTokens int
	// ReasoningEffort is the raw reasoning_effort value, nil when
	// absent.
	ReasoningEffort json.RawMessage
}

// An Option configures a Server.
type Option func(*Server)

// WithModel makes GET /v1/models list the model id with the context
// length contextTokens, in the shapes of vLLM (max_model_len) and
// llama.cpp (meta.n_ctx_train).
func WithModel(id string, contextTokens int) Option {
	return func(s *Server) { s.modelID, s.contextTokens = id, contextTokens }
}

// WithMaxContext makes the server refuse, with HTTP 400 and an OpenAI
// context_length_exceeded error, a chat-completions request whose
// messages' contents total more than tokens*4 bytes. The refusal is
// recorded and counted as a call but consumes no scripted reply.
func WithMaxContext(tokens int) Option {
	return func(s *Server) { s.maxContext = tokens }
}

// Server is a scripted OpenAI-compatible HTTP server.
type Server struct {
	srv       *httptest.Server
	done      chan struct{} // closed when the server shuts down
	closeOnce sync.Once

	// set by options before the server starts
	modelID       string
	contextTokens int
	maxContext    int

	mu       sync.Mutex
	script   []Reply
	handler  func(Request) Reply
	requests []Request
	calls    int
	changed  chan struct{} // closed and replaced on every call
}

// New starts a Server, closed when tb's test ends.
func New(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s := Start(opts...)
	tb.Cleanup(s.Close)
	return s
}

// Start starts a Server that the caller must Close, for use where there
// is no testing.TB (examples, TestMain).
func Start(opts ...Option) *Server {
	s := &Server{done: make(chan struct{}), changed: make(chan struct{})}
	for _, o := range opts {
		o(s)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.record(r, false)
		writeError(w, http.StatusNotFound, "llmtest: no route "+r.Method+" "+r.URL.Path, nil)
	})
	s.srv = httptest.NewServer(mux)
	return s
}

// Close shuts the server down, ending pending delayed replies, and waits
// for its handlers to return. It may be called more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// URL returns the server's base URL, ending in "/v1".
func (s *Server) URL() string { return s.srv.URL + "/v1" }

// Push appends replies to the script.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append(s.script, replies...)
}

// SetHandler sets the function that answers once the script is used up;
// nil removes it. It is called from the server's goroutines, outside the
// server's lock.
func (s *Server) SetHandler(h func(req Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = h
}

// Requests returns the requests received so far, in order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Request, len(s.requests))
	copy(out, s.requests)
	return out
}

// Calls returns the number of chat-completions requests received so far.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls
}

// WaitCalls blocks until at least n chat-completions requests have
// arrived, or ctx is done.
func (s *Server) WaitCalls(ctx context.Context, n int) error {
	for {
		s.mu.Lock()
		calls, changed := s.calls, s.changed
		s.mu.Unlock()
		if calls >= n {
			return nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return fmt.Errorf("llmtest: waiting for %d calls, got %d: %w", n, calls, ctx.Err())
		}
	}
}

// record decodes and stores r; a chat request is counted as a call.
func (s *Server) record(r *http.Request, chat bool) Request {
	body, _ := io.ReadAll(r.Body)
	req := Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body}
	if chat {
		decodeChat(&req)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
	if chat {
		s.calls++
		close(s.changed)
		s.changed = make(chan struct{})
	}
	return req
}

// decodeChat fills req's chat fields from its body, leaving them empty
// when the body is not a chat-completions object.
func decodeChat(req *Request) {
	var b struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		ResponseFormat      json.RawMessage `json:"response_format"`
		Temperature         *float64        `json:"temperature"`
		MaxTokens           int             `json:"max_tokens"`
		MaxCompletionTokens int             `json:"max_completion_tokens"`
		ReasoningEffort     json.RawMessage `json:"reasoning_effort"`
	}
	if json.Unmarshal(req.Body, &b) != nil {
		return
	}
	req.Model, req.ResponseFormat, req.Temperature = b.Model, b.ResponseFormat, b.Temperature
	req.MaxTokens, req.ReasoningEffort = b.MaxTokens, b.ReasoningEffort
	if req.MaxTokens == 0 {
		req.MaxTokens = b.MaxCompletionTokens
	}
	for _, m := range b.Messages {
		req.Messages = append(req.Messages, Message{Role: m.Role, Content: content(m.Content)})
	}
}

// content returns a message's content: a string, or the text parts of an
// array of parts joined.
func content(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func (s *Server) chat(w http.ResponseWriter, r *http.Request) {
	req := s.record(r, true)
	size := 0
	for _, m := range req.Messages {
		size += len(m.Content)
	}
	if s.maxContext > 0 && size > s.maxContext*4 {
		msg := fmt.Sprintf("This model's maximum context length is %d tokens. However, your messages resulted in %d tokens. Please reduce the length of the messages.",
			s.maxContext, (size+3)/4)
		writeError(w, http.StatusBadRequest, msg, "context_length_exceeded")
		return
	}
	reply := s.next(req)
	if reply.Delay > 0 {
		t := time.NewTimer(reply.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		}
	}
	for k, vs := range reply.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	switch {
	case reply.Body != "":
		if w.Header().Get("Content-Type") == "" {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			if json.Valid([]byte(reply.Body)) {
				w.Header().Set("Content-Type", "application/json")
			}
		}
		w.WriteHeader(status)
		io.WriteString(w, reply.Body)
	case status != http.StatusOK:
		writeError(w, status, reply.Message, nil)
	default:
		writeJSON(w, http.StatusOK, completion(req, reply, s.model(req), size))
	}
}

// next takes the reply to req from the script, else from the handler.
func (s *Server) next(req Request) Reply {
	s.mu.Lock()
	if len(s.script) > 0 {
		r := s.script[0]
		s.script = s.script[1:]
		s.mu.Unlock()
		return r
	}
	h := s.handler
	s.mu.Unlock()
	if h != nil {
		return h(req)
	}
	return Error(http.StatusInternalServerError, "llmtest: script exhausted")
}

// model is the model name the server answers with.
func (s *Server) model(req Request) string {
	switch {
	case req.Model != "":
		return req.Model
	case s.modelID != "":
		return s.modelID
	}
	return DefaultModel
}

// completion is the chat.completion object of a successful reply.
func completion(req Request, reply Reply, model string, promptBytes int) map[string]any {
	pt, ct := reply.PromptTokens, reply.CompletionTokens
	if pt == 0 {
		pt = promptBytes/4 + 1
	}
	if ct == 0 {
		ct = (len(reply.Content)+len(reply.Reasoning)+len(reply.ReasoningContent))/4 + 1
	}
	finish := reply.FinishReason
	if finish == "" {
		finish = "stop"
	}
	msg := map[string]any{"role": "assistant", "content": reply.Content}
	if reply.Reasoning != "" {
		msg["reasoning"] = reply.Reasoning
	}
	if reply.ReasoningContent != "" {
		msg["reasoning_content"] = reply.ReasoningContent
	}
	return map[string]any{
		"id":      "chatcmpl-llmtest-" + strconv.FormatInt(time.Now().UnixNano(), 36),
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   model,
		"choices": []any{map[string]any{
			"index":         0,
			"message":       msg,
			"finish_reason": finish,
		}},
		"usage": map[string]any{"prompt_tokens": pt, "completion_tokens": ct, "total_tokens": pt + ct},
	}
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	s.record(r, false)
	entry := map[string]any{"id": DefaultModel, "object": "model", "owned_by": "llmtest"}
	if s.modelID != "" {
		entry["id"] = s.modelID
		entry["max_model_len"] = s.contextTokens
		entry["meta"] = map[string]any{"n_ctx_train": s.contextTokens}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{entry}})
}

// writeError writes an OpenAI-style error object.
func writeError(w http.ResponseWriter, status int, msg string, code any) {
	typ := "server_error"
	switch {
	case status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case status == http.StatusUnauthorized:
		typ = "authentication_error"
	case status < 500:
		typ = "invalid_request_error"
	}
	writeJSON(w, status, map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": code}})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}
