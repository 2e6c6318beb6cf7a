package node

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/delegate"
	"github.com/snapnode/snapnode/agent/llm"
	"github.com/snapnode/snapnode/agent/worker"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/metrics"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
	"github.com/snapnode/snapnode/tasks"
)

// Why a free-text task fails at once when the node has no agent.
const (
	noAgentReason = "this node has no agent to work on free-text tasks: its operator can enable one with " +
		"--llm-url and --llm-model (any OpenAI-compatible server, such as Ollama at http://127.0.0.1:11434/v1) " +
		"or an external worker (agent.command) or another agent (agent.delegate); " +
		"proposals (data parts with a schema_version) are carried out without it"
	noDatabaseReason = "this node keeps its tasks in memory, and its agent needs a database to keep its jobs: " +
		"its operator can start it with a SQLite file or PostgreSQL (--database)"
)

// refuse is the tasks.Agent of a node without an agent: every free-text
// task fails at once with the reason, never waits for ever.
type refuse string

func (r refuse) Take(context.Context, *tasks.Task) error { return r.Screen() }

// Screen implements tasks.Screener: a new free-text task is created
// failed, in one write.
func (r refuse) Screen() *tasks.Refusal { return &tasks.Refusal{Reason: string(r)} }

// agentSkill is the card's skill of a node whose agent is on.
func agentSkill(cfg config.Config) snap.Skill {
	with := "the model " + cfg.Agent.LLMModel
	switch {
	case cfg.Agent.Delegate != "":
		with = "another agent it delegates to"
	case len(cfg.Agent.Command) > 0:
		with = "an external worker"
	}
	return snap.Skill{ID: "agent", Name: "Agent",
		Description: fmt.Sprintf("Works on free-text tasks (or a job request: task_description, phase, context_files) with %s: it proposes file actions in the node's sandbox one at a time, each validated, judged by policy and audited; risky ones wait for an operator.", with),
		Tags:        []string{"agent", "llm", "files"},
		Examples:    []string{"summarise notes.md into report.md"}}
}

// openAgentQueue opens the agent's job store on the node's database and
// the queue the task service hands jobs to, its jobs counted, and counts
// the messages, in taskStore, of the jobs an older version stored
// without that count (agent.Queue.CountTold), before the node takes
// requests. Its bounds (agent.max_queued_jobs, its share per requester
// and its newcomers' share) do not hold the requesters isOperator
// reports.
func openAgentQueue(ctx context.Context, db *sqldb.DB, taskStore tasks.Store, a config.Agent, isOperator func(string) bool, logger *slog.Logger) (*agent.Store, *agent.Queue, error) {
	store, err := agent.OpenStore(ctx, db)
	if err != nil {
		return nil, nil, fmt.Errorf("node: agent: %w", err)
	}
	store.SetMaxPendingInput(a.MaxPendingInputBytes)
	store.SetLogger(logger)
	queue := agent.NewLimitedQueue(store, nil, agent.QueueLimits{MaxQueued: a.MaxQueuedJobs,
		MaxQueuedPerRequester: a.MaxQueuedJobsPerRequester, MaxNewcomers: a.MaxNewcomerQueuedJobs, Exempt: isOperator})
	if err := queue.Recount(ctx); err != nil {
		return nil, nil, fmt.Errorf("node: %w", err)
	}
	n, err := queue.CountTold(ctx, taskStore.Get)
	if err != nil {
		return nil, nil, fmt.Errorf("node: %w", err)
	}
	if n > 0 {
		logger.Info("agent: counted the messages of the jobs an older version stored", "jobs", n)
	}
	return store, queue, nil
}

// startAgent builds the agent runtime on the node's job store, executor
// and sandbox, and the model client (or the external worker pool, whose
// protocol violations go to the audit log, or the delegate, whose requests
// go out on relays and are signed through their verifier) from the
// settings; mx gets its model calls and the worker's skipped lines. The runtime runs until ctx
// ends; done is closed when it has stopped.
func startAgent(ctx context.Context, cfg config.Config, store *agent.Store, queue *agent.Queue, exec agent.Executor, svc *tasks.Service, mx *metrics.Metrics, auditLog worker.Auditor, self *identity.Key, relays delegate.Relays, verifier *relay.Verifier, poll time.Duration, logger *slog.Logger) (*agent.Runtime, <-chan struct{}, error) {
	a := cfg.Agent
	var (
		key       string
		model     agent.Model
		modelName = a.LLMModel
		pool      *worker.Pool
		client    *llm.Client // the model server's, when the agent has one
		err       error
		// callTimeout bounds one step's call: a model call, or a
		// worker's answer (its step time-out, which then names the
		// limit, with a margin).
		callTimeout = a.RequestTimeout.Duration
	)
	// The operator's patterns, removed from what the runtime stores and
	// from what a worker (its error output) or a delegate (its error
	// responses) says of a failure, which the node logs and audits.
	redact := make([]*regexp.Regexp, 0, len(a.Redact))
	for _, p := range a.Redact {
		re, err := regexp.Compile(p)
		if err != nil {
			return nil, nil, fmt.Errorf("node: agent: redact %q: %w", p, err)
		}
		redact = append(redact, re)
	}
	switch {
	case a.Delegate != "":
		if addr, err := identity.ParseAddress(a.Delegate); err == nil && addr.Key == self.OutputKey() {
			return nil, nil, fmt.Errorf("node: agent: agent.delegate %s is this node's own address: want another agent", a.Delegate)
		}
		step := a.StepTimeout.Duration
		if step == 0 {
			step = a.RequestTimeout.Duration
		}
		var d *delegate.Delegate
		dlog := logger.With("part", "delegate")
		d, err = delegate.New(delegate.Config{Key: self, Relays: relays, Verifier: verifier, Address: a.Delegate, StepTimeout: step,
			Discover:     snapnostr.DiscoverConfig{MaxDrift: cfg.MaxDrift.Duration},
			HTTP:         delegate.NewHTTP(self, a.Delegate, a.DelegatePrivateEndpoints, dlog),
			MaxLineBytes: a.MaxAnswerBytes, Audit: auditLog, Redact: redact, Logger: dlog})
		if d != nil {
			model, modelName, callTimeout = d, d.Name(), step+5*time.Second
		}
	case len(a.Command) > 0:
		// The worker gets only its own settings: never the API key or
		// the node's keys.
		step := a.StepTimeout.Duration
		if step == 0 {
			step = a.RequestTimeout.Duration
		}
		pool, err = worker.New(worker.Config{Command: a.Command, Dir: a.CommandDir, Sandbox: cfg.SandboxPath(), Env: a.CommandEnv,
			StepTimeout: step, MaxLineBytes: a.MaxAnswerBytes, MaxProcs: a.MaxJobs, Audit: auditLog, Redact: redact, Logger: logger.With("part", "worker")})
		model, modelName, callTimeout = pool, "worker:"+filepath.Base(a.Command[0]), step+5*time.Second
	default:
		if key, err = cfg.LLMAPIKey(os.Getenv); err != nil {
			return nil, nil, fmt.Errorf("node: agent: %w", err)
		}
		client, err = llm.New(llm.Config{BaseURL: a.LLMURL, Model: a.LLMModel, APIKey: key,
			Timeout: a.RequestTimeout.Duration, MaxResponseBytes: responseCap(a.MaxAnswerBytes),
			ContextSet: a.ContextTokens > 0, ResponseFormat: a.ResponseFormat, ReasoningEffort: a.ReasoningEffort, Logger: logger.With("part", "llm")})
		model = client
	}
	if err != nil {
		return nil, nil, fmt.Errorf("node: agent: %w", err)
	}
	var review agent.Model
	reviewName := a.LLMModel
	if a.ReviewModel != "" {
		reviewName = a.ReviewModel
	}
	reviewEffort := a.ReviewReasoningEffort
	switch reviewEffort {
	case "":
		reviewEffort = a.ReasoningEffort
	case "default":
		reviewEffort = "" // none sent: the server's and the model's default
	}
	// The supervisor has a client of its own when it asks another model,
	// or the same with another reasoning effort.
	if a.Review && (reviewName != a.LLMModel || reviewEffort != a.ReasoningEffort) {
		if review, err = llm.New(llm.Config{BaseURL: a.LLMURL, Model: reviewName, APIKey: key,
			Timeout: a.RequestTimeout.Duration, MaxResponseBytes: responseCap(a.MaxAnswerBytes),
			ContextSet: a.ContextTokens > 0, ResponseFormat: a.ResponseFormat, ReasoningEffort: reviewEffort, Logger: logger.With("part", "llm", "role", "supervisor")}); err != nil {
			return nil, nil, fmt.Errorf("node: agent: review model: %w", err)
		}
	}
	hkey, err := cfg.HistoryKey()
	if err != nil {
		return nil, nil, fmt.Errorf("node: agent: %w", err)
	}
	if hkey != nil {
		sealer, err := agent.NewSealer(hkey)
		if err != nil {
			return nil, nil, fmt.Errorf("node: agent: %w", err)
		}
		store.UseKey(sealer)
	}
	holder, err := holderName(cfg)
	if err != nil {
		return nil, nil, err
	}
	rt, err := agent.New(agent.Config{
		Holder: holder, Queue: queue, Store: store, Tasks: svc, Executor: exec, Model: model,
		ModelName: modelName, MaxJobs: a.MaxJobs, MaxJobsPerRequester: a.MaxJobsPerRequester, Uncapped: svc.IsOperator, MaxSteps: a.MaxSteps, MaxCostCents: a.MaxCostCents,
		MaxTime: minutes(a.MaxTimeMinutes), PricePerMTokPrompt: a.PricePerMTokPrompt,
		PricePerMTokAnswer: a.PricePerMTokCompletion, Temperature: a.Temperature, MaxTokens: a.MaxTokens,
		RequestTimeout: callTimeout, ContextTokens: a.ContextTokens, Lease: a.Lease.Duration,
		MaxObservationBytes: a.MaxObservationBytes, MaxAnswerBytes: a.MaxAnswerBytes,
		MaxHistoryBytes: a.MaxHistoryBytes, MaxRetries: a.MaxRetries, Redact: redact, Secrets: []string{key},
		SystemPrompt: a.SystemPrompt, Review: a.Review, ReviewModel: review, ReviewModelName: reviewName, Sensitive: a.Sensitive, Backoff: a.RetryBackoff.Duration, Observer: mx, Logger: logger.With("part", "agent"),
		ForgetAfter: cfg.TaskRetention.Duration, PassTimeout: cfg.BackgroundTimeout.Duration, Poll: poll,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("node: agent: %w", err)
	}
	// Served whenever the agent runs, 0 without a worker, as the other
	// agent series are.
	stale := func() int64 { return 0 }
	if pool != nil {
		stale = pool.StaleLines
	}
	mx.SetWorkerStaleLines(stale)
	done := make(chan struct{})
	var looks sync.WaitGroup
	if client != nil {
		looks.Go(func() { checkModelServer(ctx, client, a.LLMURL, rt, logger) })
	}
	go func() {
		defer close(done)
		if err := rt.Run(ctx); err != nil {
			logger.Error("agent stopped", "err", err)
		}
		if pool != nil {
			pool.Close()
		}
		looks.Wait()
	}()
	logger.Info("agent ready", "llm_url", config.ShowURL(a.LLMURL), "model", modelName, "max_jobs", a.MaxJobs, "max_steps", a.MaxSteps)
	return rt, done, nil
}

// checkModelServer looks at the model server once at start (llm.Check,
// within its request time-out) and says in the log what a job would meet:
// a server that does not answer, does not list the model or has no model
// list is a warning with what to do, before a requester's task waits on
// it; a refusal that asking again does not mend (a bad API key) is an
// error with what to check, as a job's step that meets it says
// (agent.ModelError.Advice). A server reached is logged with the
// context length the agent's runtime works with and where it comes from
// (agent.Runtime.ContextLength): agent.context_tokens when set, else the
// server's if it came within agent.ContextWait (named by where the
// client found it: llama-server's /props, or the model's trained
// context, which a server run with a smaller -c refuses prompts of),
// else agent.DefaultContextTokens.
func checkModelServer(ctx context.Context, c *llm.Client, url string, rt contextUser, logger *slog.Logger) {
	err := c.Check(ctx)
	var me *agent.ModelError
	switch {
	case ctx.Err() != nil:
	case errors.As(err, &me) && !me.Transient():
		logger.Error(fmt.Sprintf("the model server refuses the agent's requests (HTTP %d): free-text tasks will fail at their first call, and wait for an operator; %s", me.Status, me.Advice()),
			"llm_url", config.ShowURL(url), "err", err)
	case me != nil:
		logger.Warn(fmt.Sprintf("the model server answers with an error (HTTP %d): free-text tasks will retry their calls, and wait for it if it goes on failing; check the server at --llm-url", me.Status),
			"llm_url", config.ShowURL(url), "err", err)
	case errors.Is(err, llm.ErrNoModelList):
		logger.Warn("the model server has no model list (HTTP 404 for GET /models): a server without one may still answer, but if free-text tasks fail with HTTP 404, check the base URL (agent.llm_url, with its /v1) and the model name (agent.llm_model)",
			"llm_url", config.ShowURL(url), "err", err)
	case errors.Is(err, llm.ErrModelNotListed):
		logger.Warn("the model server does not list the model the agent asks for: free-text tasks will fail at their first call; name one it lists (--llm-model), or pull it (ollama pull NAME)",
			"llm_url", config.ShowURL(url), "err", err)
	case err != nil:
		logger.Warn("the model server does not answer: free-text tasks will wait for it, and fail if it stays down; check that it runs at --llm-url (with its /v1)",
			"llm_url", config.ShowURL(url), "err", err)
	default:
		// What the runtime settled, not the answer Check had: an answer
		// after the runtime's wait (agent.ContextWait) came too late
		// for it.
		cl := rt.ContextLength(ctx)
		if ctx.Err() != nil {
			return
		}
		var from string
		switch cl.From {
		case agent.ContextConfigured:
			from = "agent.context_tokens"
		case agent.ContextModel:
			from = "the model server"
			// Which of its answers: the look is kept, so this asks
			// nothing more of the server.
			if _, src, err := c.ContextTokensFrom(ctx); err == nil {
				switch src {
				case llm.ContextFromProps:
					from = "llama-server /props"
				case llm.ContextFromTrained:
					from = "the model's trained context (n_ctx_train): set agent.context_tokens if the server runs with a smaller -c"
				}
			}
		case agent.ContextNotTold:
			from = fmt.Sprintf("the default: the server did not give its context length within %s of the start (agent.context_tokens sets one)", agent.ContextWait)
		default:
			from = "the default: the server gives no context length (agent.context_tokens sets one)"
		}
		logger.Info("model server reached", "llm_url", config.ShowURL(url), "context_tokens", cl.Tokens, "context_tokens_from", from)
	}
}

// contextUser is the agent runtime, as checkModelServer asks it the
// context length it works with.
type contextUser interface {
	ContextLength(ctx context.Context) agent.ContextLength
}

// holderName names this node in job leases, the same across restarts: a
// random id kept in its data folder (two processes never share a data
// folder: its admin socket is one process's), made on first start.
func holderName(cfg config.Config) (string, error) {
	path := filepath.Join(cfg.DataDir, "agent.id")
	if b, err := os.ReadFile(path); err == nil && len(strings.TrimSpace(string(b))) >= 16 {
		return "node-" + strings.TrimSpace(string(b)), nil
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("node: agent id: %w", err)
	}
	var id [12]byte
	if _, err := rand.Read(id[:]); err != nil {
		return "", err
	}
	s := hex.EncodeToString(id[:])
	if err := os.WriteFile(path, []byte(s+"\n"), 0o600); err != nil {
		return "", fmt.Errorf("node: agent id: %w", err)
	}
	return "node-" + s, nil
}

// minutes is m minutes as a duration.
func minutes(m float64) time.Duration { return time.Duration(m * float64(time.Minute)) }

func closedChan() <-chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}

// ResumeJob implements admin.Handler: `snapnode job resume`.
func (h adminHandler) ResumeJob(ctx context.Context, taskID, checkpoint string) (any, error) {
	if h.agent == nil {
		return nil, errors.New("this node has no agent: it has no jobs to resume")
	}
	return h.agent.ResumeFrom(ctx, taskID, checkpoint)
}

// Agent returns the node's agent runtime, nil when none is configured.
func (n *Node) Agent() *agent.Runtime { return n.agent }

// The node's metrics are its agent's observer.
var _ agent.Observer = (*metrics.Metrics)(nil)

// responseCap bounds the body of a model server's response carrying an
// answer of at most maxAnswer bytes. The answer travels as a JSON string,
// where a server may escape any byte as \u00XX: "<", ">" and "&" by Go's
// encoding/json, every non-ASCII character by Python's json.dumps (vLLM,
// LiteLLM), at up to six bytes each. So six times the answer, and 64 KiB
// for the rest of the response, lets every answer within max_answer_bytes
// arrive (the answer's own bound is checked on the decoded text).
func responseCap(maxAnswer int) int64 { return 6*int64(maxAnswer) + 64<<10 }
