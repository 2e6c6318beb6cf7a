package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Model proposes a job's next step: given the conversation so far, it
// answers with text that should be exactly one JSON object (a proposal or
// an agent response). The built-in implementation is the OpenAI-compatible
// chat-completions client in package agent/llm; external workers implement
// it too.
//
// The contract:
//   - Complete honours ctx: a canceled or expired ctx aborts the call at
//     once and Complete returns an error wrapping ctx.Err().
//   - The answer is bounded: a reply larger than the implementation's cap
//     is an error, never a partial answer.
//   - An error the server reported is a *ModelError (its HTTP status,
//     Retry-After, whether the prompt was over the model's context length);
//     an answer of a success status that cannot be taken (malformed, over
//     the cap) is an *AnsweredError, which carries the call's usage; any
//     other error is a transport failure (connection refused, reset, a
//     time-out). The runtime retries them with backoff, but for a
//     ModelError that is not Transient, which fails the step at once;
//     Complete itself does not retry.
//   - Implementations are safe for concurrent use.
type Model interface {
	Complete(ctx context.Context, p Prompt) (*Completion, error)
}

// Prompt is one request to the model.
type Prompt struct {
	// Messages are the conversation: the system prompt first, then the
	// task and, for every earlier step, the model's answer and the host's
	// observation.
	Messages []ChatMessage `json:"messages"`
	// Schema is the JSON Schema the answer must follow, sent as the
	// response_format where the server supports it; SchemaName names it.
	Schema     json.RawMessage `json:"-"`
	SchemaName string          `json:"-"`
	// Temperature and MaxTokens (the answer's cap; 0: the server's default).
	Temperature float64 `json:"temperature"`
	MaxTokens   int     `json:"max_tokens,omitempty"`
	// Job is the job's request and Step the sequence of the step asked
	// for: what an external worker is told (a chat model needs only
	// Messages).
	Job  *JobRequest `json:"-"`
	Step int         `json:"-"`
	// Sent is what the model last recorded of the job with KeepSent (nil:
	// nothing): the step it sent, and what it started elsewhere for the
	// job (a delegate's task on another agent), which the job's next
	// step continues, also after the node stopped (or crashed) or the
	// job waited for a human.
	Sent []byte `json:"-"`
	// SentAnswered reports that the step Sent names was answered since,
	// or the job left it (it waited for a human, or was queued again):
	// it is not sent again as the same step. When false, the step is
	// being tried again, after a failed call or by a node that stopped
	// and claimed the job again, and the model sends it as the same step.
	SentAnswered bool `json:"-"`
	// KeepSent, when not nil, records sent in the job's row before the
	// model sends a step that must not be done twice (a delegate's
	// idempotency key and message id), and after its answer (what the
	// job's next step continues); it fails, and nothing must be sent or
	// answered, when the job is no longer this process's. What it
	// recorded comes back as Sent until it records another, the job
	// ends, or it is rewound to a checkpoint (Runtime.ResumeFrom, after
	// which its next step starts afresh); unless the job succeeded, the
	// last record then goes to CancelJob (JobCanceler).
	KeepSent func(ctx context.Context, sent []byte) error `json:"-"`
	// KeepSentCanceling, when not nil, is KeepSent giving cancel, an
	// earlier record of the model's whose work elsewhere the job no
	// longer goes on with, up to CancelJob (JobCanceler) in the same
	// write: a step given up whose cancel the peer did not answer. That
	// record is kept apart from the job's others, canceled by whichever
	// process takes it first, while the job goes on, and the job's next
	// records, its end and rewinds never take its place.
	KeepSentCanceling func(ctx context.Context, sent, cancel []byte) error `json:"-"`
}

// JobEnder is implemented by models that keep something for each job (an
// external worker's process): the runtime calls EndJob when it stops
// working on the job (it ended, waits for a human, or the node stops), and
// a later step of the job starts afresh.
type JobEnder interface {
	EndJob(jobID string)
}

// JobCanceler is implemented by models that start work elsewhere for a
// job (a delegate's task on another agent): once the job no longer goes
// on with that work other than by succeeding (it ended canceled, by any
// path: its task canceled while the job ran, waited for a human or was
// queued, or while the node was down; it halted at a limit, or its task
// failed; or it was rewound to a checkpoint, the work holding the steps
// undone), the runtime calls CancelJob on a goroutine of its own,
// with what the model last recorded of the job (Prompt.KeepSent), and the
// model stops that work, within a bound of its own (well under
// Config.Lease). The record is forgotten only once CancelJob returns nil:
// the work was stopped, or its peer answered that it would not (a
// refusal, a task already ended or not found), or the record names no
// work. An error (no answer) leaves it, and so does a node that stops or
// crashes during the call: the record is taken again, by whichever
// process comes first once Config.Lease passed, and CancelJob called
// again with it, up to MaxCancelTries times; no two processes take it at
// once. A rewound job may be at work on its next step meanwhile, which
// starts new work: CancelJob stops only the work its record names.
type JobCanceler interface {
	CancelJob(ctx context.Context, jobID string, sent []byte) error
}

// MaxCancelTries is how many times a job's record of its model's work
// elsewhere is taken to cancel that work (JobCanceler) before it is
// given up, logged at warn: a peer that never answers is not asked
// forever.
const MaxCancelTries = 5

// ErrWorkerFailed is wrapped by a Model's error when the worker behind it
// broke its protocol (it crashed, hung past its step time-out, wrote
// garbage or flooded its output) and was stopped: the job waits for a
// human at once, with the error as its reason, instead of being retried.
var ErrWorkerFailed = errors.New("the worker failed")

// ErrTimeLimit is the cause (context.Cause) of a model call's context
// cut at the job's time limit (max_time_minutes or a peer's
// time_threshold_minutes), rather than at the request time-out: a worker
// or a delegate stopped there did not break its protocol.
var ErrTimeLimit = errors.New("the job reached its time limit")

// ErrCanceled is the cause (context.Cause) of a job's context, and of
// its model call's, when its task was canceled (by its requester or an
// operator): a model that started work elsewhere for the job (a
// delegate's task on another agent) stops it, where a job stopped because
// the node stops (or its lease was lost) is taken up again and goes on
// with that work.
var ErrCanceled = errors.New("agent: the task was canceled")

// The roles of chat messages.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// ChatMessage is one message of a prompt.
type ChatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Completion is the model's answer.
type Completion struct {
	// Text is the answer's content, as the server sent it.
	Text string
	// Reasoning is a thinking model's trace that the server sent beside
	// the content (Ollama's "reasoning", llama-server's and vLLM's
	// "reasoning_content"), whole: the runtime redacts it, then cuts it
	// to MaxReasoningBytes for the history (cut first, a secret the cut
	// split would no longer be found). It is never the answer.
	Reasoning string
	// ReasoningBytes is the length in bytes of the reasoning as the
	// server sent it, before the cut (0 when there was none): a
	// thinking model's tokens, which the job pays for, so a call whose
	// server reports no usage is priced at their estimate with the
	// answer's. An implementation that leaves it 0 has the length of
	// Reasoning counted.
	ReasoningBytes int
	// Model is the model that answered, as the server named it.
	Model string
	// PromptTokens and CompletionTokens are the server's usage figures (0
	// when it sent none); the runtime prices them.
	PromptTokens, CompletionTokens int
	// Truncated reports that the answer stopped at MaxTokens
	// (finish_reason "length").
	Truncated bool
	// Filtered reports that the server's content filter withheld or cut
	// the answer (finish_reason "content_filter").
	Filtered bool
	// LateLines are the past steps named by the lines a worker wrote
	// late (a duplicated or late answer) that were skipped during this
	// call, never run, in the order they came; the step's history keeps
	// them (Response.LateLines).
	LateLines []int
	// ToolCalls names the tools the answer called (a chat message's
	// tool_calls, or an older server's function_call), as the server
	// named them. No tool is offered: an answer that calls one instead
	// of writing its JSON object in Text is refused, saying so.
	ToolCalls []string
}

// MaxReasoningBytes bounds a step's reasoning (Completion.Reasoning, a
// history's response.reasoning), in bytes, the mark of a cut included.
const MaxReasoningBytes = 8 << 10

// ModelError is an error answer of the model server.
type ModelError struct {
	// Status is the HTTP status (429, 500, …).
	Status int
	// RetryAfter is the server's Retry-After, 0 when it gave none.
	RetryAfter time.Duration
	// ContextLength reports that the prompt was longer than the model's
	// context (the server's error says so), or larger than the server
	// takes (HTTP 413, which the runtime answers alike: the prompt is
	// condensed and sent again once).
	ContextLength bool
	// ContextTokens is, with ContextLength, the server's context in
	// tokens as its refusal gives it (llama-server's n_ctx), 0 when it
	// gives none: the runtime builds the following prompts for it when
	// it is smaller than its own.
	ContextTokens int
	// Message is the server's error message, cut to a few hundred bytes.
	Message string
}

func (e *ModelError) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("model server: HTTP %d", e.Status)
	}
	return fmt.Sprintf("model server: HTTP %d: %s", e.Status, e.Message)
}

// Transient reports whether the refusal may pass when the call is made
// again: a time-out (408), a conflict (409), too early (425), a rate
// limit (429) or the server's own failure (5xx). Another 4xx (a refused
// API key, a model or path the server does not have, an invalid request)
// answers the same however often the call is made.
func (e *ModelError) Transient() bool {
	switch e.Status {
	case http.StatusRequestTimeout, http.StatusConflict, http.StatusTooEarly, http.StatusTooManyRequests:
		return true
	}
	return e.Status < 400 || e.Status >= 500
}

// Advice says, for the node's operator, what a refusal that is not
// Transient means and what to check, by its status, of a worker's call.
func (e *ModelError) Advice() string { return e.advice(RoleWorker) }

// advice is Advice of a refusal of role's call: the supervisor's names
// the supervisor's model and reasoning effort (agent.review_model,
// agent.review_reasoning_effort), which are what its calls send (the
// worker's when they are empty).
func (e *ModelError) advice(role string) string {
	model, effort := "agent.llm_model", "agent.reasoning_effort"
	if role == RoleSupervisor {
		model = "the supervisor's model, agent.review_model (empty: agent.llm_model)"
		effort = "agent.review_reasoning_effort (empty: agent.reasoning_effort's)"
	}
	switch e.Status {
	case http.StatusUnauthorized:
		return "the API key was refused: check it (SNAPNODE_LLM_API_KEY, or the file agent.llm_api_key_file names)"
	case http.StatusForbidden:
		return "the API key may not do this: check the key (SNAPNODE_LLM_API_KEY, or the file agent.llm_api_key_file names) and that it may use the model (" + model + ")"
	case http.StatusNotFound:
		return "no such model or path: check the model name (" + model + ") and the base URL (agent.llm_url, ending in /v1)"
	}
	return "the request was refused as invalid: check the model name (" + model + ") and the settings sent with it (agent.response_format, agent.max_tokens, agent.temperature, " + effort + ")"
}

// AnsweredError is the error of a model call the server answered, with a
// success status, in a way that cannot be taken: a chat completion
// without the one choice asked for, a content that is not a string, a
// body that is not one JSON value or over the client's cap, or one a
// time-out cut before it ended (AnswerBytes then counts what came); or a
// worker's or a delegate's answer refused as garbage or over its bound
// (its error also wrapping ErrWorkerFailed). The server did the work,
// and may have charged for it: the runtime counts the call
// against the job's budget as it counts an answer, from the usage the
// server reported or, when it reported none, from the estimate of the
// prompt and of AnswerBytes. Err is the refusal.
type AnsweredError struct {
	// PromptTokens and CompletionTokens are the server's usage figures,
	// 0 when it sent none or they could not be read.
	PromptTokens, CompletionTokens int
	// AnswerBytes is the size of the body the server sent (the client's
	// cap when it sent more).
	AnswerBytes int
	Err         error
}

func (e *AnsweredError) Error() string { return e.Err.Error() }
func (e *AnsweredError) Unwrap() error { return e.Err }

// ContextSizer is implemented by models that can tell their context
// length (in tokens), as the server gives it (its /v1/models entry, or
// llama-server's /props); 0 when the server does not say.
type ContextSizer interface {
	ContextTokens(ctx context.Context) (int, error)
}
