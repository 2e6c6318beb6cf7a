package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/snapnode/snapnode/internal/textcut"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/retryafter"
)

// Defaults of Config.
const (
	DefaultTimeout          = 120 * time.Second
	DefaultMaxResponseBytes = 1 << 20
)

// The values of Config.ResponseFormat.
const (
	// FormatAuto sends a json_schema response_format when the prompt has
	// a schema, and falls back to json_object for good once the server
	// refuses json_schema. Without a schema it sends json_object.
	FormatAuto = "auto"
	// FormatJSONSchema always sends the prompt's schema (json_object when
	// the prompt has none).
	FormatJSONSchema = "json_schema"
	// FormatJSONObject always sends json_object.
	FormatJSONObject = "json_object"
	// FormatNone sends no response_format.
	FormatNone = "none"
)

// maxMessage is the longest ModelError message, in bytes.
const maxMessage = 300

// maxHeaderBytes bounds a response's headers (Go's default is 10 MiB,
// ten times the default cap of a body): a model server's are a few
// kilobytes.
const maxHeaderBytes = 64 << 10

// Config configures a Client.
type Config struct {
	// BaseURL is the API's base URL, ending with /v1
	// (e.g. http://127.0.0.1:11434/v1 for Ollama).
	BaseURL string
	// Model is the model to ask, as the server names it.
	Model string
	// APIKey, when set, is sent as "Authorization: Bearer …". It never
	// appears in a log or an error.
	APIKey string
	// Timeout bounds each HTTP request (DefaultTimeout when 0).
	Timeout time.Duration
	// MaxResponseBytes caps a response body (DefaultMaxResponseBytes when
	// 0); a larger body is an error.
	MaxResponseBytes int64
	// ResponseFormat is one of FormatAuto (when empty), FormatJSONSchema,
	// FormatJSONObject and FormatNone.
	ResponseFormat string
	// ReasoningEffort, when not empty, is sent as the request's
	// reasoning_effort, to turn a thinking model's thinking down or off:
	// one of the values of OpenAI's chat-completions API (minimal, low,
	// medium, high, xhigh, and none, which Ollama's /v1 also takes to
	// turn thinking off). Which a server takes depends on the server
	// and the model.
	ReasoningEffort string
	// ContextSet reports that the model's context length is set apart
	// (the operator's agent.context_tokens): the client then asks no
	// GET /props for it, and ContextTokens gives only the model list's.
	ContextSet bool
	// HTTPClient sends the requests (when nil, a new http.Client that
	// follows no redirect and reads at most 64 KiB of response headers).
	HTTPClient *http.Client
	// Logger logs fallbacks and, at debug level, completions (nothing when
	// nil).
	Logger *slog.Logger
}

// String describes c without its API key, nor its base URL's password
// and query.
func (c Config) String() string {
	return fmt.Sprintf("llm.Config{BaseURL: %s, Model: %s}", config.ShowURL(c.BaseURL), c.Model)
}

// LogValue logs c without its API key, nor its base URL's password and
// query.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("base_url", config.ShowURL(c.BaseURL)),
		slog.String("model", c.Model),
		slog.Bool("api_key_set", c.APIKey != ""),
		slog.Duration("timeout", c.Timeout),
		slog.String("response_format", c.ResponseFormat),
		slog.String("reasoning_effort", c.ReasoningEffort),
	)
}

// Client is an agent.Model and agent.ContextSizer backed by an
// OpenAI-compatible chat-completions server. It is safe for concurrent
// use.
type Client struct {
	cfg  Config
	base string // BaseURL without a trailing slash
	root string // base without its /v1: where llama-server serves /props
	api  *openai.Client
	doer *doer
	log  *slog.Logger

	// reasoning reports a model that go-openai treats as a reasoning
	// model (o1, o3, gpt-5, …): it takes max_completion_tokens instead of
	// max_tokens, and no temperature.
	reasoning bool
	// noSchema records that the server refused json_schema (FormatAuto).
	noSchema atomic.Bool

	lookMu sync.Mutex
	look   *modelsLook // the GET /models in flight or answered; nil before, and after a failure
}

var (
	_ agent.Model        = (*Client)(nil)
	_ agent.ContextSizer = (*Client)(nil)
)

// New returns a Client for cfg, after checking it.
func New(cfg Config) (*Client, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("llm: BaseURL is not an http or https URL")
	}
	if cfg.Model == "" {
		return nil, errors.New("llm: no Model")
	}
	switch cfg.ResponseFormat {
	case "":
		cfg.ResponseFormat = FormatAuto
	case FormatAuto, FormatJSONSchema, FormatJSONObject, FormatNone:
	default:
		return nil, fmt.Errorf("llm: ResponseFormat %q is not one of auto, json_schema, json_object, none", cfg.ResponseFormat)
	}
	switch cfg.ReasoningEffort {
	case "", "none", "minimal", "low", "medium", "high", "xhigh":
	default:
		return nil, fmt.Errorf("llm: ReasoningEffort %q is not one of none, minimal, low, medium, high, xhigh", cfg.ReasoningEffort)
	}
	switch {
	case cfg.Timeout < 0:
		return nil, errors.New("llm: negative Timeout")
	case cfg.Timeout == 0:
		cfg.Timeout = DefaultTimeout
	}
	switch {
	case cfg.MaxResponseBytes < 0:
		return nil, errors.New("llm: negative MaxResponseBytes")
	case cfg.MaxResponseBytes == 0:
		cfg.MaxResponseBytes = DefaultMaxResponseBytes
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.APIKey != "" && u.Scheme == "http" && !loopback(u.Hostname()) {
		log.Warn("llm: the API key goes to the model server over plain http, in the clear for anyone on the network path to read; use an https base URL, or reach the server over loopback (an SSH or TLS tunnel)",
			"base_url", config.ShowURL(cfg.BaseURL))
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxResponseHeaderBytes = maxHeaderBytes
	var hc openai.HTTPDoer = &http.Client{Transport: tr, CheckRedirect: noRedirect}
	if cfg.HTTPClient != nil {
		hc = cfg.HTTPClient
	}
	d := &doer{next: hc, max: cfg.MaxResponseBytes}
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	oc.HTTPClient = d
	probe := openai.ChatCompletionRequest{Model: cfg.Model, MaxTokens: 1}
	return &Client{
		cfg:       cfg,
		base:      oc.BaseURL,
		root:      strings.TrimSuffix(oc.BaseURL, "/v1"),
		api:       openai.NewClientWithConfig(oc),
		doer:      d,
		log:       log,
		reasoning: errors.Is(openai.NewReasoningValidator().Validate(probe), openai.ErrReasoningModelMaxTokensDeprecated),
	}, nil
}

// Complete asks the model for the answer to p. See agent.Model for the
// contract; with FormatAuto, a server that refuses json_schema (HTTP 400)
// is asked again at once with json_object, and from then on always so.
func (c *Client) Complete(ctx context.Context, p agent.Prompt) (*agent.Completion, error) {
	if len(p.Schema) > 0 && !json.Valid(p.Schema) {
		return nil, errors.New("llm: the prompt's schema is not valid JSON")
	}
	req := openai.ChatCompletionRequest{
		Model:    c.cfg.Model,
		Messages: make([]openai.ChatCompletionMessage, len(p.Messages)),
		N:        1, // one answer; see readAnswer for a server that sends more
		// Left out when empty (omitempty): the server's default.
		ReasoningEffort: c.cfg.ReasoningEffort,
	}
	for i, m := range p.Messages {
		req.Messages[i] = openai.ChatCompletionMessage{Role: m.Role, Content: m.Content}
	}
	if c.reasoning {
		req.MaxCompletionTokens = p.MaxTokens
	} else {
		req.MaxTokens = p.MaxTokens
		req.Temperature = float32(p.Temperature)
	}
	zeroTemp := !c.reasoning && p.Temperature == 0
	req.ResponseFormat = c.responseFormat(p)

	start := time.Now()
	resp, err := c.send(ctx, req, zeroTemp)
	if err != nil && c.schemaRefused(req.ResponseFormat, err) {
		c.noSchema.Store(true)
		c.log.Warn("llm: the server refused a json_schema response_format; using json_object from now on",
			"model", c.cfg.Model, "err", err)
		req.ResponseFormat = &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
		resp, err = c.send(ctx, req, zeroTemp)
	}
	if err != nil {
		return nil, err
	}
	if resp.choices > 1 {
		c.log.Warn("llm: the server sent several choices though one was asked for (n=1); the one of index 0 was taken",
			"model", c.cfg.Model, "choices", resp.choices)
	}
	out := &agent.Completion{
		Text:             resp.text,
		Reasoning:        resp.reasoning,
		ReasoningBytes:   resp.reasoningBytes,
		Model:            resp.model,
		PromptTokens:     resp.promptTokens,
		CompletionTokens: resp.completionTokens,
		Truncated:        resp.finish == string(openai.FinishReasonLength),
		Filtered:         resp.finish == string(openai.FinishReasonContentFilter),
		ToolCalls:        resp.toolCalls,
	}
	if out.Model == "" {
		out.Model = c.cfg.Model
	}
	c.log.Debug("llm: completion", "model", out.Model, "prompt_tokens", out.PromptTokens,
		"completion_tokens", out.CompletionTokens, "truncated", out.Truncated, "filtered", out.Filtered, "reasoning_bytes", out.ReasoningBytes, "tool_calls", len(out.ToolCalls), "elapsed", time.Since(start))
	return out, nil
}

// loopback reports whether host (a URL's, without brackets) names this
// machine: localhost, or a loopback address.
func loopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}

// responseFormat is the response_format to send with p, nil for none.
func (c *Client) responseFormat(p agent.Prompt) *openai.ChatCompletionResponseFormat {
	switch c.cfg.ResponseFormat {
	case FormatNone:
		return nil
	case FormatAuto, FormatJSONSchema:
		if len(p.Schema) > 0 && (c.cfg.ResponseFormat == FormatJSONSchema || !c.noSchema.Load()) {
			name := p.SchemaName
			if name == "" {
				name = "answer"
			}
			return &openai.ChatCompletionResponseFormat{
				Type:       openai.ChatCompletionResponseFormatTypeJSONSchema,
				JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{Name: name, Schema: p.Schema},
			}
		}
	}
	return &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject}
}

// schemaRefused reports whether err is the server's refusal of the
// json_schema response_format sent under FormatAuto.
func (c *Client) schemaRefused(sent *openai.ChatCompletionResponseFormat, err error) bool {
	var me *agent.ModelError
	if c.cfg.ResponseFormat != FormatAuto || sent == nil || sent.Type != openai.ChatCompletionResponseFormatTypeJSONSchema ||
		!errors.As(err, &me) || me.Status != http.StatusBadRequest || me.ContextLength {
		return false
	}
	m := strings.ToLower(me.Message)
	if c.cfg.ReasoningEffort != "" && !strings.Contains(m, "json") && !strings.Contains(m, "response") &&
		(strings.Contains(m, "reasoning") || strings.Contains(m, "think")) {
		// The refusal of the reasoning effort (Ollama: think value
		// "medium" is not supported for this model), which json_object
		// would meet alike.
		return false
	}
	return strings.Contains(m, "response_format") || strings.Contains(m, "response format") ||
		strings.Contains(m, "json_schema") || strings.Contains(m, "not supported")
}

// send makes one chat-completions request and reads its answer. An
// answer of a success status that cannot be taken is an
// *agent.AnsweredError, with the usage the server reported.
func (c *Client) send(ctx context.Context, req openai.ChatCompletionRequest, zeroTemp bool) (*answer, error) {
	cl := &call{zeroTemperature: zeroTemp, answer: true}
	rctx, cancel := context.WithTimeout(withCall(ctx, cl), c.cfg.Timeout)
	defer cancel()
	var a *answer
	_, err := c.api.CreateChatCompletion(rctx, req)
	switch {
	case err != nil:
		err = c.failure(ctx, cl, err)
	case cl.body == nil:
		err = fmt.Errorf("%w: no body", ErrMalformedResponse)
	default:
		if a, err = readAnswer(cl.body); err == nil {
			return a, nil
		}
		if a != nil && a.serverError != "" {
			err = fmt.Errorf("%w: the server's answer has no choices but an error: %s", ErrMalformedResponse, cut(strings.ToValidUTF8(c.redactKey(a.serverError), "\uFFFD"), maxMessage))
		}
	}
	err = c.scrub(err)
	// A success answer the caller's deadline cut (the runtime's request
	// time-out, or the job's time limit) is answered as one the client's
	// Timeout cut: the server was at work on it. The caller's cancel is
	// not.
	if cl.status < http.StatusOK || cl.status >= http.StatusMultipleChoices ||
		ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return nil, err
	}
	ae := &agent.AnsweredError{AnswerBytes: cl.size, Err: err}
	if a != nil {
		ae.PromptTokens, ae.CompletionTokens = a.promptTokens, a.completionTokens
	}
	return nil, ae
}

// failure turns the error of a request into the error Complete returns:
// the caller's ctx error when ctx is done, a *agent.ModelError when the
// server answered with an error status, else the transport's error.
func (c *Client) failure(ctx context.Context, cl *call, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		if errors.Is(err, cerr) {
			return fmt.Errorf("llm: %w", err)
		}
		return fmt.Errorf("llm: %w: %w", cerr, err)
	}
	if cl.status == 0 || cl.status >= http.StatusOK && cl.status < http.StatusBadRequest {
		if errors.Is(err, ErrResponseTooLarge) || errors.Is(err, ErrMalformedResponse) {
			return err
		}
		return fmt.Errorf("llm: %w", err)
	}
	var (
		apiErr  *openai.APIError
		reqErr  *openai.RequestError
		msg     string
		details string // for recognizing a context-length error
	)
	switch {
	case errors.As(err, &apiErr) && apiErr.HTTPStatusCode != 0:
		msg = apiErr.Message
		details = fmt.Sprintf("%s %v", apiErr.Type, apiErr.Code)
	case errors.As(err, &reqErr):
		msg = bodyMessage(reqErr.Body)
	case errors.Is(err, ErrResponseTooLarge):
		msg = "error body too large"
	default:
		msg = err.Error()
	}
	me := c.modelError(cl.status, cl.header, msg, details)
	if me.ContextLength {
		me.ContextTokens = refusalContext(cl.errBody)
	}
	return me
}

// refusalContext is the server's context in tokens as its refusal of a
// prompt too long gives it, 0 when it does not: llama-server's
// {"error":{"type":"exceed_context_size_error","n_prompt_tokens":…,"n_ctx":…}}.
func refusalContext(body []byte) int {
	var b struct {
		Error struct {
			NCtx float64 `json:"n_ctx"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &b) != nil {
		return 0
	}
	return windowSize(b.Error.NCtx)
}

// modelError makes the ModelError of an answer of status. A 413 is a
// prompt too large whatever its words: a proxy's body limit in front of
// the server (nginx's "413 Request Entity Too Large"), a per-minute token
// limit the one request is over (Groq), a request cap (GitHub Models), or
// an empty body (llama-server's HTTP library, before its limit was
// raised); condensing the prompt is what may pass it.
func (c *Client) modelError(status int, h http.Header, msg, details string) *agent.ModelError {
	msg = c.redactKey(msg)
	return &agent.ModelError{
		Status:        status,
		RetryAfter:    retryAfter(h.Get("Retry-After"), time.Now()),
		ContextLength: status == http.StatusRequestEntityTooLarge || isContextLength(msg+" "+details),
		Message:       cut(strings.TrimSpace(msg), maxMessage),
	}
}

// maxErrorText bounds the text of an error the client returns, in bytes.
const maxErrorText = 800

// scrub returns err, or, when its text holds the API key or is longer
// than maxErrorText, an error that unwraps to it whose text is err's with
// the key redacted, cut. Errors quote what the server sent (a member
// name refused as a duplicate, the JSON path of a syntax error, a
// status line that is no HTTP, in Go's transport), which a server may
// make as long as its answer's cap and fill with the key it was sent;
// the runtime logs the error of each failed call, and the node Check's.
func (c *Client) scrub(err error) error {
	if err == nil {
		return nil
	}
	s := err.Error()
	r := c.redactKey(s)
	if r == s && len(s) <= maxErrorText {
		return err
	}
	return &scrubbedError{msg: cut(strings.ToValidUTF8(r, "\uFFFD"), maxErrorText), err: err}
}

// scrubbedError is an error with its text redacted and cut (see scrub).
type scrubbedError struct {
	msg string
	err error
}

func (e *scrubbedError) Error() string { return e.msg }
func (e *scrubbedError) Unwrap() error { return e.err }

// redactKey is s with the API key replaced: a server may echo the
// request's header in its error.
func (c *Client) redactKey(s string) string {
	if c.cfg.APIKey == "" {
		return s
	}
	return strings.ReplaceAll(s, c.cfg.APIKey, "[api key]")
}

// bodyMessage is the message of an error body go-openai could not read as
// {"error":{"message":…}} (or that of a success status, which go-openai
// does not read as an error): vLLM's {"message":…}, {"error":"…"},
// {"detail":…}, {"error":{"message":…}}, or else the body itself (e.g. a
// proxy's "502 Bad Gateway").
func bodyMessage(body []byte) string {
	var b struct {
		Message string          `json:"message"`
		Error   json.RawMessage `json:"error"`
		Detail  json.RawMessage `json:"detail"`
	}
	if json.Unmarshal(body, &b) == nil {
		if b.Message != "" {
			return b.Message
		}
		for _, raw := range []json.RawMessage{b.Error, b.Detail} {
			var s string
			if json.Unmarshal(raw, &s) == nil && s != "" {
				return s
			}
		}
		var e struct {
			Message string `json:"message"`
		}
		if json.Unmarshal(b.Error, &e) == nil && e.Message != "" {
			return e.Message
		}
	}
	return string(body)
}

// isContextLength reports whether an error message says the prompt was
// longer than the model's context, as OpenAI, vLLM, llama.cpp, Ollama
// and LiteLLM word it.
func isContextLength(s string) bool {
	s = strings.ToLower(s)
	for _, sub := range []string{
		"context length", "context_length", "maximum context", "context window",
		"too many tokens", "exceeds the available context size", "exceed_context_size",
	} {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// maxRetryAfter bounds a Retry-After.
const maxRetryAfter = 24 * time.Hour

// retryAfter is the model server's Retry-After (retryafter.Parse), in
// whole seconds, at most maxRetryAfter.
func retryAfter(v string, now time.Time) time.Duration {
	return min(retryafter.Parse(v, now).Round(time.Second), maxRetryAfter)
}

// cut returns s cut to at most n bytes (n > 3), at a rune boundary,
// marked with an ellipsis.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const ellipsis = "…"
	return textcut.Prefix(s, n-len(ellipsis)) + ellipsis
}
