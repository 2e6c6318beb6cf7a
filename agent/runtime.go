package agent

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/internal/fairqueue"
	"github.com/snapnode/snapnode/internal/periodic"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// Tasks is what the runtime needs of the task service (*tasks.Service):
// it reads a task, moves it through its states, notes progress and adds
// artifacts, each write publishing its event to the task's subscribers.
type Tasks interface {
	Task(ctx context.Context, taskID string) (*tasks.Task, error)
	Transition(ctx context.Context, taskID string, to tasks.State, note string) (*tasks.Task, error)
	Progress(ctx context.Context, taskID, note string) (*tasks.Task, error)
	// Settle records an outcome of the task inside the executor's last
	// commit of a step's action (see tasks.Settlement).
	Settle(taskID string) *tasks.Settlement
	AddArtifact(ctx context.Context, taskID string, a tasks.Artifact) (*tasks.Task, error)
	// Resolve records an outcome, its state and artifacts, in one write
	// (tasks.Store.Apply).
	Resolve(ctx context.Context, taskID string, out tasks.Outcome) (*tasks.Task, error)
	Events() *tasks.Broker
}

// Executor is what the runtime needs of the executor (*executor.Executor):
// every proposal of the model goes through Run, the same lifecycle as a
// peer's proposal; Actions tells, after a crash, whether a proposal ran.
type Executor interface {
	Run(ctx context.Context, req executor.Request) (*executor.Result, error)
	Actions(ctx context.Context, taskID string) ([]executor.Action, error)
	// Pending and Deny withdraw an action a job held when the job goes on
	// without an operator's decision (the requester wrote again).
	Pending(ctx context.Context, taskID string) ([]executor.Pending, error)
	Deny(ctx context.Context, actionID, approver, reason string) (*executor.Result, error)
	// Rollback restores what a promoted action changed (ResumeFrom).
	Rollback(ctx context.Context, actionID string) error
}

var (
	_ Tasks    = (*tasks.Service)(nil)
	_ Executor = (*executor.Executor)(nil)
)

// Config is what a Runtime is made of. Store, Tasks, Executor and Model
// are required; zero limits take the defaults below.
type Config struct {
	// Queue is where the task service hands jobs in (NewQueue on Store).
	Queue    *Queue
	Store    *Store
	Tasks    Tasks
	Executor Executor
	Model    Model
	// ModelName is recorded in the history's request metadata.
	ModelName string
	// Holder names this process in leases; default a fresh id. A holder
	// that stays the same across restarts (the node's: its host and data
	// folder) lets a restarted node take up at once the jobs its previous
	// run held, instead of waiting for their leases to lapse: Run releases
	// every lease of its holder before it starts.
	Holder string

	MaxJobs int // jobs worked on at once (default 4)
	// MaxJobsPerRequester bounds the jobs of one requester worked on at
	// once (default: half of MaxJobs, rounded up; at most MaxJobs), so
	// that one requester's jobs leave slots for the others'.
	MaxJobsPerRequester int
	// Uncapped, when set, reports whether a requester's jobs are exempt
	// from MaxJobsPerRequester: the node's operators (the share keeps the
	// slots from one peer, not from the node's owner, whose tasks would
	// otherwise run on half of them). It is asked at each dispatch, so a
	// reloaded list of operators takes effect at once.
	Uncapped            func(requester string) bool
	MaxSteps            int           // model calls per job (default 30)
	MaxCostCents        float64       // 0: no cost limit
	MaxTime             time.Duration // default 60 min
	PricePerMTokPrompt  float64       // USD per million tokens
	PricePerMTokAnswer  float64
	Temperature         float64
	MaxTokens           int           // one answer's cap (default 2048)
	RequestTimeout      time.Duration // one model call (default 120 s)
	ContextTokens       int           // the prompt's bound (default: the model's, else 16384)
	Lease               time.Duration // default 30 s
	MaxObservationBytes int           // default 16 KiB
	MaxAnswerBytes      int           // default 64 KiB
	MaxHistoryBytes     int64         // live history per job before it is archived (default 100 MiB)
	MaxRetries          int           // RETRY answers per phase (default 3)
	// Redact are removed from everything stored or logged; Secrets too
	// (the API key), as plain strings. New hands this redaction to Queue,
	// which stores a requester's texts through it.
	Redact  []*regexp.Regexp
	Secrets []string
	// SystemPrompt is appended to the built-in one (the worker's and the
	// supervisor's).
	SystemPrompt string
	// Review makes a supervisor review every worker's COMPLETED before the
	// job ends (see PhaseReview). ReviewModel answers as the supervisor,
	// recorded as ReviewModelName; nil: Model.
	Review          bool
	ReviewModel     Model
	ReviewModelName string
	// Sensitive seals the jobs' archived history (Store.UseKey gives the
	// key), so the prompts it holds are unreadable without it.
	Sensitive bool
	// Backoff is the first wait before retrying a failed model call
	// (DefaultBackoff when 0), doubling each time, each wait at most
	// MaxRetryWait; a server's Retry-After wins when longer, within the
	// same bound.
	Backoff time.Duration
	// Rand returns a number in [0, 1) that spreads the retry waits: each
	// is cut by up to a quarter, so that jobs an outage failed at once do
	// not come back together to a model server that is starting again
	// (math/rand/v2's Float64 when nil; tests fix it).
	Rand func() float64
	// Poll is how often the runtime looks for jobs other processes left
	// (default 1 s); jobs taken here wake it at once.
	Poll time.Duration
	// PassTimeout bounds each pass of the runtime's loops on the
	// database (its look for jobs and each claim, its reconcile, its
	// forgetting of ended jobs; default 5 min; see periodic.Pass): a
	// pass a database that does not answer holds is given up, warned
	// of, and the loop goes on at its next tick. A lease's renewal is
	// bounded by a third of the lease.
	PassTimeout time.Duration
	// ForgetAfter, when positive, forgets an ended job (its history,
	// recovery points and archive) once it ended that long ago and its
	// task is gone: the node sets it to its task retention, so that what
	// the retention deletes of a task, its job goes with. 0 keeps ended
	// jobs.
	ForgetAfter time.Duration
	// Observer, when set, is told of every model call (the node's
	// metrics).
	Observer Observer
	Now      func() time.Time
	Logger   *slog.Logger
}

// Observer is told of every model call: its status (SUCCESS, ERROR or
// TIMEOUT), how long it took and what it cost in US cents. It must not
// block.
type Observer interface {
	ObserveModelCall(status string, took time.Duration, costCents float64)
}

// Defaults of Config.
const (
	DefaultMaxJobs       = 4
	DefaultMaxSteps      = 30
	DefaultContextTokens = 16384
	// ContextWait bounds how long Run waits at start for the model's
	// context length (ContextSizer) before it takes DefaultContextTokens.
	ContextWait       = 10 * time.Second
	DefaultMaxRetries = 3
	// MaxAPIRetries is how often a failed model call is retried: an API
	// error is retried automatically up to 3 times (docs/agent.md).
	MaxAPIRetries = 3
	// DefaultBackoff is the first wait before a failed model call is
	// tried again: the waits (10, 20, 40 s) span 70 s, a model server's
	// restart (Ollama loads a model in 10 to 60 s), where 1 + 2 + 4 s
	// failed the step while it was still starting.
	DefaultBackoff = 10 * time.Second
	// MaxRetryWait bounds each wait before a failed model call is tried
	// again, a server's Retry-After included: with MaxAPIRetries, a
	// step waits at most 3 minutes in all.
	MaxRetryWait = time.Minute
	// MaxInvalidAnswers is how often an invalid answer is fed back before
	// the job is STUCK.
	MaxInvalidAnswers = 2
)

// Runtime works on the agent's jobs: it takes free-text tasks (as the task
// service's tasks.Agent), claims jobs with a lease in the database, and
// drives each through the loop of model calls and actions.
type Runtime struct {
	cfg     Config
	log     *slog.Logger
	wake    chan struct{}
	slots   chan struct{}
	mu      sync.Mutex
	running map[string]context.CancelCauseFunc
	// resuming holds the jobs a ResumeFrom of this process works on.
	resuming map[string]bool
	// served is when a job of each requester was last claimed here.
	served map[string]time.Time
	// busy counts the jobs of each requester this process works on (a
	// requester with none has no entry: at most MaxJobs entries).
	busy map[string]int
	// waitCursor is where reconcile's next page of waiting jobs starts
	// (reconcile runs on the dispatcher's goroutine only).
	waitCursor string
	// endedCursor is where forget's next page of ended jobs starts (the
	// forgetting goroutine's only).
	endedCursor Job
	wg          sync.WaitGroup
	// budget is the context length, in tokens, prompts are built for:
	// ContextLength's, unless a model's server named a smaller one
	// (lowered). Jobs read it at each step.
	budget atomic.Int64
	// lowered is, by model name, the context a model's server named
	// when it refused a prompt as over it, smaller than budget (see
	// lowerBudget): that model's prompts are built for it.
	lowMu   sync.Mutex
	lowered map[string]int
	// contextLen is the context length the runtime works with, settled
	// once (see ContextLength).
	contextOnce sync.Once
	contextLen  ContextLength
}

// ContextFrom says where the context length a Runtime works with comes
// from (see Runtime.ContextLength).
type ContextFrom int

const (
	// ContextConfigured: Config.ContextTokens.
	ContextConfigured ContextFrom = iota + 1
	// ContextModel: the model's, as its server tells it (ContextSizer).
	ContextModel
	// ContextDefault: DefaultContextTokens, the model telling none.
	ContextDefault
	// ContextNotTold: DefaultContextTokens, the model not telling its
	// length within ContextWait of the start, or failing to.
	ContextNotTold
)

// ContextLength is the context length, in tokens, a Runtime works with,
// and where it comes from.
type ContextLength struct {
	Tokens int
	From   ContextFrom
	// Err, for ContextNotTold, is why the model's length was not had.
	Err error
}

// ContextLength returns the context length the runtime works with for
// good: Config.ContextTokens when set, else the model's if it tells it
// (ContextSizer) within ContextWait, else DefaultContextTokens. It is
// settled once, by Run first thing or by a caller before it (with that
// caller's ctx), and a caller meanwhile waits for it, at most
// ContextWait: a model's answer that comes later does not change it.
func (r *Runtime) ContextLength(ctx context.Context) ContextLength {
	r.contextOnce.Do(func() { r.contextLen = r.settleContext(ctx) })
	return r.contextLen
}

func (r *Runtime) settleContext(ctx context.Context) ContextLength {
	if n := r.cfg.ContextTokens; n > 0 {
		return ContextLength{Tokens: n, From: ContextConfigured}
	}
	cs, ok := r.cfg.Model.(ContextSizer)
	if !ok {
		return ContextLength{Tokens: DefaultContextTokens, From: ContextDefault}
	}
	cctx, cancel := context.WithTimeout(ctx, ContextWait)
	defer cancel()
	n, err := cs.ContextTokens(cctx)
	switch {
	case err != nil:
		return ContextLength{Tokens: DefaultContextTokens, From: ContextNotTold, Err: err}
	case n <= 0:
		return ContextLength{Tokens: DefaultContextTokens, From: ContextDefault}
	}
	return ContextLength{Tokens: n, From: ContextModel}
}

// lowerBudget makes n the context length the prompts of the model
// named model are built for from now on, when it is smaller than the
// one they are: the context its server gave in its refusal of a prompt
// too long (llama-server's n_ctx, its -c, which its model list does not
// give). Another job's refusal may have lowered it already. Another
// model (the supervisor's) keeps its own.
func (r *Runtime) lowerBudget(model string, n int) {
	r.lowMu.Lock()
	defer r.lowMu.Unlock()
	old := r.contextForLocked(model)
	if old <= n {
		return
	}
	r.lowered[model] = n
	r.log.Warn("agent: the model server refused a prompt as over its context, which is smaller than the one the agent built it for; the following prompts are built for the server's (set agent.context_tokens to it to start with it)",
		"model", model, "context_tokens", old, "server_context_tokens", n)
}

// contextFor is the context length, in tokens, the prompts of the model
// named model are built for.
func (r *Runtime) contextFor(model string) int {
	r.lowMu.Lock()
	defer r.lowMu.Unlock()
	return r.contextForLocked(model)
}

func (r *Runtime) contextForLocked(model string) int {
	n := int(r.budget.Load())
	if l, ok := r.lowered[model]; ok && l < n {
		return l
	}
	return n
}

// The runtime is what proposals reach its jobs through.
var _ proposals.Jobs = (*Runtime)(nil)

// New returns a Runtime on cfg. Call Run to start working.
func New(cfg Config) (*Runtime, error) {
	switch {
	case cfg.Queue == nil, cfg.Store == nil, cfg.Tasks == nil, cfg.Executor == nil, cfg.Model == nil:
		return nil, errors.New("agent: Config.Queue, Store, Tasks, Executor and Model are required")
	case cfg.Sensitive && cfg.Store.sealer == nil:
		return nil, errors.New("agent: Config.Sensitive needs the history key (Store.UseKey)")
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&cfg.MaxJobs, DefaultMaxJobs)
	def(&cfg.MaxJobsPerRequester, (cfg.MaxJobs+1)/2)
	cfg.MaxJobsPerRequester = min(cfg.MaxJobsPerRequester, cfg.MaxJobs)
	def(&cfg.MaxSteps, DefaultMaxSteps)
	def(&cfg.MaxTokens, 2048)
	def(&cfg.MaxObservationBytes, 16<<10)
	def(&cfg.MaxAnswerBytes, 64<<10)
	if cfg.MaxRetries < 0 {
		cfg.MaxRetries = 0
	} else if cfg.MaxRetries == 0 {
		cfg.MaxRetries = DefaultMaxRetries
	}
	if cfg.MaxHistoryBytes <= 0 {
		cfg.MaxHistoryBytes = 100 << 20
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v <= 0 {
			*v = d
		}
	}
	defDur(&cfg.MaxTime, time.Hour)
	defDur(&cfg.RequestTimeout, 2*time.Minute)
	defDur(&cfg.Lease, 30*time.Second)
	defDur(&cfg.Backoff, DefaultBackoff)
	defDur(&cfg.Poll, time.Second)
	defDur(&cfg.PassTimeout, 5*time.Minute)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Rand == nil {
		cfg.Rand = rand.Float64
	}
	if cfg.Holder == "" {
		cfg.Holder = newHolder()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Runtime{cfg: cfg, wake: cfg.Queue.wake, slots: make(chan struct{}, cfg.MaxJobs),
		running: map[string]context.CancelCauseFunc{}, resuming: map[string]bool{}, served: map[string]time.Time{}, busy: map[string]int{}, lowered: map[string]int{}}
	r.budget.Store(int64(cfg.ContextTokens))
	// Its lines carry errors of the model server and the node, which may
	// name a secret: redacted as the history is.
	r.log = RedactingLogger(cfg.Logger, r.redact)
	// The queue stores the requester's texts (a new task's, a
	// follow-up) through the same redaction.
	redact := r.redact
	cfg.Queue.redact.Store(&redact)
	return r, nil
}

// Decided resumes the job of taskID after an operator approved or denied
// the action it waits on, held with the diff held: res is the executor's
// result of the decision, told to the model at the next step. The task's
// artifact of the changes held says what became of them
// (proposals.Settled), and the task goes back to working. It returns the
// task; ErrNoJob when the task is not the agent's.
func (r *Runtime) Decided(ctx context.Context, taskID string, res *executor.Result, approved bool, held string) (*tasks.Task, error) {
	word, how := "approved", proposals.SettledApproved
	if !approved {
		word, how = "denied", proposals.SettledDenied
	}
	r.settleChanges(ctx, taskID, proposals.Settled(res.ActionID, held, res, how))
	for _, a := range r.actionArtifacts(res) {
		// An artifact of the action's id on the task already is this
		// decision's, put there by an earlier hand-over that a stop cut
		// (the restart's reconcile hands the decision again): once is
		// enough.
		if _, err := r.cfg.Tasks.AddArtifact(ctx, taskID, a); err != nil && !errors.Is(err, tasks.ErrExists) {
			r.log.Warn("agent: artifact of a decision", "task", taskID, "err", err)
		}
	}
	j, err := r.cfg.Store.Get(ctx, taskID)
	if err != nil {
		return nil, err
	}
	if j.Status.Terminal() {
		return r.cfg.Tasks.Task(ctx, taskID)
	}
	if res.Outcome == executor.NeedsConfirmation {
		// Approved, but what it would change changed meanwhile: held
		// again, with the new diff, for the operator to decide again.
		// The job keeps waiting.
		if err := r.settleHeld(ctx, taskID, res, ObsNeedsConfirmation); err != nil {
			return nil, err
		}
		return r.cfg.Tasks.Task(ctx, taskID)
	}
	outcome := ObsApproved
	switch {
	case !approved:
		outcome = ObsDenied
	case res.Outcome == executor.Failed:
		// Approved but not carried out: its promotion failed, or a stop
		// cut it and the executor undid it (executor.ReasonInterrupted).
		// The step failed, as the executor recorded it: it changed
		// nothing (an approved step counts among the job's changes).
		outcome = ObsFailed
	}
	// The decision's outcome goes on the step that proposed the action
	// (the model sees it there); the guidance only says what happened.
	if err := r.settleHeld(ctx, taskID, res, outcome); err != nil {
		return nil, err
	}
	text := fmt.Sprintf("The operator %s action %s (its outcome is on the step that proposed it).", word, res.ActionID)
	switch {
	case outcome == ObsFailed:
		text = fmt.Sprintf("The operator approved action %s, but it was not carried out: %s", res.ActionID, cut(r.redact(res.Reason), 1000))
	case !approved && res.Reason != "":
		text = fmt.Sprintf("The operator denied action %s: %s", res.ActionID, cut(r.redact(res.Reason), 1000))
	}
	// The job is queued again first: should the node stop before the
	// task's write below, the runtime's start makes the task work again.
	if _, err := r.cfg.Store.AddInput(ctx, taskID, text, false, r.cfg.Now()); err != nil {
		return nil, err
	}
	if j.Status == InterventionRequired {
		if err := ensureWorking(ctx, r.cfg.Tasks, taskID, "resumed after the operator "+word+" action "+res.ActionID); err != nil {
			return nil, err
		}
	}
	r.Wake()
	return r.cfg.Tasks.Task(ctx, taskID)
}

// settleHeld records in the history what became of an action a job held:
// the interaction that proposed it gets the outcome (approved, denied,
// withdrawn as denied) and, when it ran, its diff; a decision keeps the
// reason the action was held for (held_reason) and says who took it and
// when.
func (r *Runtime) settleHeld(ctx context.Context, taskID string, res *executor.Result, outcome string) error {
	its, err := r.cfg.Store.Interactions(ctx, taskID)
	if err != nil {
		return err
	}
	for i := len(its) - 1; i >= 0; i-- {
		it := its[i]
		if it.Observation == nil || it.Observation.ActionID != res.ActionID {
			continue
		}
		held := it.Observation
		o := r.redactObservation(observe(res, r.cfg.MaxObservationBytes))
		o.Outcome = outcome
		if outcome != ObsNeedsConfirmation {
			o.HeldReason = held.HeldReason
			if o.HeldReason == "" && held.Outcome == ObsNeedsConfirmation {
				o.HeldReason = held.Reason
			}
			now := r.cfg.Now().UTC()
			o.DecidedBy, o.DecidedAt = res.DecidedBy, &now
			if held.DecidedAt != nil && held.Outcome == outcome && res.DecidedBy == "" {
				// The same decision handed again from the executor's
				// record (a restart's reconcile): the first says who.
				o.DecidedBy, o.DecidedAt = held.DecidedBy, held.DecidedAt
			}
		}
		it.Observation = o
		return r.cfg.Store.ReplaceInteraction(ctx, taskID, &it)
	}
	return nil // not one of the job's (a peer's proposal on the task)
}

// show brings the task of a job that now waits for a human or ended to
// the state its status st maps to (input_required, completed or failed)
// with the note and artifacts, in one write of the task (Tasks.Resolve):
// a write that fails leaves the task as it was, to be made again as a
// whole, never the state without the artifacts. It then records the job
// as settled in st. It goes on when ctx ends (a stopping node finishes
// what it began); a node that died in between finishes it at its next
// start (reconcile).
func (r *Runtime) show(ctx context.Context, taskID string, st Status, note string, arts []tasks.Artifact) error {
	to := st.TaskState()
	ctx = context.WithoutCancel(ctx)
	t, err := r.cfg.Tasks.Task(ctx, taskID)
	if err != nil {
		return err
	}
	switch {
	case t.Status.State == to:
	case t.Status.State.Terminal():
		// Canceled meanwhile (or ended by another writer): the task's
		// word stands.
		return r.cfg.Store.Settle(ctx, taskID, st)
	default:
		out := tasks.Outcome{State: to, Note: cut(note, tasks.MaxStatusMessage-4), Artifacts: r.fit(t, arts)}
		if _, err := r.cfg.Tasks.Resolve(ctx, taskID, out); err != nil {
			return err
		}
	}
	return r.cfg.Store.Settle(ctx, taskID, st)
}

// fit is arts less what task t can never take, which would fail every
// write of the task's state with them: those it has already (written
// before a crash: once is enough), an invalid one, and those past the
// task's bound on its artifacts (tasks.MaxArtifacts), each logged.
func (r *Runtime) fit(t *tasks.Task, arts []tasks.Artifact) []tasks.Artifact {
	have := make(map[string]bool, len(t.Artifacts)+len(arts))
	for _, a := range t.Artifacts {
		have[a.ArtifactID] = true
	}
	room := tasks.MaxArtifacts - len(t.Artifacts)
	var out []tasks.Artifact
	for _, a := range arts {
		switch err := a.Validate(); {
		case have[a.ArtifactID]:
		case err != nil:
			r.log.Warn("agent: artifact left out: invalid", "task", t.ID, "artifact", a.ArtifactID, "err", err)
		case len(out) >= room:
			r.log.Warn("agent: artifact left out: the task has as many as it may", "task", t.ID, "artifact", a.ArtifactID, "max", tasks.MaxArtifacts)
		default:
			have[a.ArtifactID] = true
			out = append(out, a)
		}
	}
	return out
}

// reconcile brings the tasks of jobs that wait for a human or ended to the
// state their jobs show, where a node stopped before it wrote it, and ends
// the jobs whose tasks were canceled while they waited (a page of them a
// pass), and cancels the work their model started elsewhere (JobCanceler)
// for jobs that ended other than in success, or were rewound, whose
// record no one took yet (a page a pass). Jobs this process works on, or
// that a live lease holds, are left to their node.
func (r *Runtime) reconcile(ctx context.Context) {
	now := r.cfg.Now()
	unsettled, err := r.cfg.Store.Unsettled(ctx, now, 200)
	if err != nil {
		r.log.Warn("agent: reconcile", "err", err)
		return
	}
	waiting, err := r.cfg.Store.Waiting(ctx, r.waitCursor, 200)
	if err != nil {
		r.log.Warn("agent: reconcile", "err", err)
		return
	}
	if len(waiting) < 200 {
		r.waitCursor = "" // the next pass starts over
	} else {
		r.waitCursor = waiting[len(waiting)-1].TaskID
	}
	for _, j := range append(unsettled, waiting...) {
		r.mu.Lock()
		_, mine := r.running[j.TaskID]
		r.mu.Unlock()
		if mine || j.LeaseUntil.After(now) {
			continue
		}
		t, err := r.cfg.Tasks.Task(ctx, j.TaskID)
		if err != nil {
			continue
		}
		if t.Status.State == tasks.StateCanceled && !j.Status.Terminal() {
			was := j.Status
			j.Status, j.Reason, j.UpdatedAt = Canceled, "the task was canceled", r.cfg.Now()
			if err := r.cfg.Store.Write(ctx, Save{Job: j, Expect: was}); err != nil {
				continue // it moved on: a later pass sees it
			}
			r.cancelElsewhere(ctx, j.TaskID)
		}
		if j.settled && !t.Status.State.Terminal() && r.catchUp(ctx, j, t) {
			r.Wake() // a reply it was not given: it works again
			continue
		}
		var err2 error
		switch {
		case j.settled:
			// Waiting, its task showed it: only a cancel mattered.
		case j.Status == Success, j.Status == HaltedCost, j.Status == HaltedTime, j.Status == InterventionRequired:
			// What the job's own write shows, made from the job and its
			// history as the job makes it (ending); a history that cannot
			// be read does not keep the task from showing it (a success
			// with the answer its reason keeps).
			// A wait on a held action shows its diff, made from the
			// executor's record of it as the job's own wait makes it.
			var its []Interaction
			if j.Status == Success || j.Status == InterventionRequired {
				if its, err = r.cfg.Store.Interactions(ctx, j.TaskID); err != nil {
					r.log.Warn("agent: reconcile: the job's history, for its artifacts", "task", j.TaskID, "err", err)
				}
			}
			note, arts := ending(j, its)
			if j.Status == InterventionRequired {
				arts = append(arts, r.heldOf(ctx, j.TaskID, its)...)
			}
			err2 = r.show(ctx, j.TaskID, j.Status, note, arts)
		case j.Status == Canceled:
			err2 = r.cfg.Store.Settle(ctx, j.TaskID, j.Status)
		}
		if err2 == nil && j.Status == InterventionRequired {
			err2 = r.decidedMeanwhile(ctx, j, now)
		}
		if err2 != nil {
			r.log.Warn("agent: reconcile", "task", j.TaskID, "err", err2)
		}
	}
	r.cancelLeft(ctx)
}

// cancelElsewhere cancels the work the model of the job of taskID started
// elsewhere (JobCanceler) and no longer goes on with: each record the job
// gave up to be canceled (it ended other than in success, or was rewound:
// see Store.KeepSent) that no one took yet. A failure is logged: the
// record stays, for the next reconcile pass.
func (r *Runtime) cancelElsewhere(ctx context.Context, taskID string) {
	if err := r.cancelLeftOf(ctx, taskID); err != nil {
		r.log.Warn("agent: the job's record, to cancel its model's work elsewhere; the next reconcile pass does", "task", taskID, "err", err)
	}
}

// cancelLeftOf is cancelElsewhere returning its failure to read or take
// the records, which then stay to be canceled.
func (r *Runtime) cancelLeftOf(ctx context.Context, taskID string) error {
	if _, ok := r.cfg.Model.(JobCanceler); !ok {
		return nil
	}
	left, err := r.cfg.Store.SentToCancel(context.WithoutCancel(ctx), taskID)
	if err != nil {
		return err
	}
	var errs []error
	for _, c := range left {
		errs = append(errs, r.cancelSent(ctx, c))
	}
	return errors.Join(errs...)
}

// cancelLeft cancels the work elsewhere of the records jobs gave up to be
// canceled, not taken, or whose take lapsed (a page a
// pass; those another process holds are not in it): ended or
// canceled while the node was down, or by a node that stopped before it
// canceled that work.
func (r *Runtime) cancelLeft(ctx context.Context) {
	if _, ok := r.cfg.Model.(JobCanceler); !ok {
		return
	}
	left, err := r.cfg.Store.CanceledSentUntaken(ctx, r.cfg.Now(), 100)
	if err != nil {
		r.log.Warn("agent: reconcile: the work elsewhere of jobs ended or rewound", "err", err)
		return
	}
	for _, c := range left {
		if err := r.cancelSent(ctx, c); err != nil {
			r.log.Warn("agent: the job's record, to cancel its model's work elsewhere; the next reconcile pass does", "task", c.TaskID, "err", err)
		}
	}
}

// cancelSent takes c's record (Store.TakeCanceledSent: one process at a
// time, whichever process or pass comes first) and gives it to the
// model's CancelJob on a goroutine of its own: the model's bound, not the
// caller, waits. The record is forgotten once CancelJob succeeded, or
// given up after its MaxCancelTries-th take failed (counted in the job's
// history, Store.GiveUpCanceledSent); else it stays, taken again once
// its take (Config.Lease) lapses. A record another holds already is no
// error; a failed take leaves it.
func (r *Runtime) cancelSent(ctx context.Context, c CanceledRecord) error {
	jc, ok := r.cfg.Model.(JobCanceler)
	if !ok {
		return nil
	}
	ctx = context.WithoutCancel(ctx)
	now := r.cfg.Now()
	tries, err := r.cfg.Store.TakeCanceledSent(ctx, c.TaskID, c.Sent, now, now.Add(r.cfg.Lease))
	if err != nil || tries == 0 {
		return err
	}
	r.wg.Go(func() {
		if err := jc.CancelJob(ctx, c.TaskID, c.Sent); err != nil {
			if tries < MaxCancelTries {
				r.log.Warn("agent: the model's work elsewhere for the job was not canceled; it is tried again once its take lapses",
					"task", c.TaskID, "try", tries, "err", err)
				return
			}
			r.log.Warn("agent: the model's work elsewhere for the job was not canceled, and is given up",
				"task", c.TaskID, "tries", tries, "err", err)
			// The job's history counts it (cancels_given_up).
			if _, err := r.cfg.Store.GiveUpCanceledSent(ctx, c.TaskID, c.Sent); err != nil {
				r.log.Warn("agent: giving up the job's record of its work elsewhere; it is tried again once its take lapses",
					"task", c.TaskID, "err", err)
			}
			return
		}
		if _, err := r.cfg.Store.ForgetCanceledSent(ctx, c.TaskID, c.Sent); err != nil {
			r.log.Warn("agent: forgetting the job's record of its work elsewhere, canceled; it is canceled again once its take lapses",
				"task", c.TaskID, "err", err)
		}
	})
	return nil
}

// catchUp gives job j the messages of its task t (as read now) it was
// not given (Queue.tell): a follow-up whose hand-over to the agent failed
// after the message was stored, its request answered with the task
// (tasks.Service.Committed). It reports whether the job took some; a
// failure is logged, and the job's next step or the next reconcile pass
// tries again.
func (r *Runtime) catchUp(ctx context.Context, j *Job, t *tasks.Task) bool {
	if j.Told < 0 || len(t.History) <= j.Told {
		return false // j.Told only grows: nothing is missing
	}
	told, err := r.cfg.Queue.tell(ctx, t, false)
	if err != nil {
		r.log.Warn("agent: giving the job its task's messages", "task", j.TaskID, "err", err)
		return false
	}
	if told {
		r.log.Info("agent: the job is given its task's messages whose hand-over failed", "task", j.TaskID,
			"from", j.Told, "to", len(t.History))
		j.Told = len(t.History)
	}
	return told
}

// settleChanges puts a, the artifact saying what became of the changes
// an action of the job of taskID held (proposals.Settled), redacted, in
// the place of the one that showed them waiting. A write that fails is
// logged: the job goes on.
func (r *Runtime) settleChanges(ctx context.Context, taskID string, a tasks.Artifact) {
	out := tasks.Outcome{State: tasks.StateKept, Replace: r.redactArtifacts([]tasks.Artifact{a})}
	if _, err := r.cfg.Tasks.Resolve(ctx, taskID, out); err != nil && !errors.Is(err, tasks.ErrTerminal) {
		r.log.Warn("agent: the artifact of the changes an action held", "task", taskID, "action", a.ArtifactID, "err", err)
	}
}

// actionArtifacts is what the task of a job shows of the executor's
// result res of its action (proposals.Artifacts), redacted: for an action
// held, the diff the operator and the requester read while the job waits
// on it.
func (r *Runtime) actionArtifacts(res *executor.Result) []tasks.Artifact {
	return r.redactArtifacts(proposals.Artifacts(res))
}

// heldOf is the artifacts of the action the job of taskID, with history
// its, waits on, made from the executor's record of it as the job's own
// wait makes them from the executor's result (actionArtifacts): none when
// its last step held nothing, or the action is decided already
// (decidedMeanwhile hands the decision to the job). A record that cannot
// be read is logged and leaves them out.
func (r *Runtime) heldOf(ctx context.Context, taskID string, its []Interaction) []tasks.Artifact {
	if len(its) == 0 {
		return nil
	}
	o := its[len(its)-1].Observation
	if o == nil || o.ActionID == "" || o.Outcome != ObsNeedsConfirmation {
		return nil
	}
	acts, err := r.cfg.Executor.Actions(ctx, taskID)
	if err != nil {
		r.log.Warn("agent: reconcile: the held action's record, for its artifacts", "task", taskID, "action", o.ActionID, "err", err)
		return nil
	}
	for _, a := range acts {
		if res := a.Result(); a.ActionID == o.ActionID && res.Outcome == executor.NeedsConfirmation {
			return r.actionArtifacts(res)
		}
	}
	return nil
}

// decidedMeanwhile hands job j, waiting for an operator's decision on the
// action it held, the decision the executor carried out but the runtime
// never heard of (the node stopped between the two, before Decided or
// half-way through it): left so, the job would wait for ever, with
// nothing left to decide. A record decided less than a lease ago is left
// alone: its Decided may be on its way.
func (r *Runtime) decidedMeanwhile(ctx context.Context, j *Job, now time.Time) error {
	held, err := r.cfg.Executor.Pending(ctx, j.TaskID)
	if err != nil || len(held) > 0 {
		return err
	}
	its, err := r.cfg.Store.Interactions(ctx, j.TaskID)
	if err != nil || len(its) == 0 {
		return err
	}
	// The step that held it: still held as far as the job knows, or given
	// the outcome before the node stopped (Decided's first write: failed
	// for an approval that was not carried out).
	o := its[len(its)-1].Observation
	if o == nil || o.ActionID == "" || (o.Outcome != ObsNeedsConfirmation && o.Outcome != ObsApproved && o.Outcome != ObsDenied && o.Outcome != ObsFailed) {
		return nil // waiting for guidance, not for a decision
	}
	acts, err := r.cfg.Executor.Actions(ctx, j.TaskID)
	if err != nil {
		return err
	}
	for _, a := range acts {
		if a.ActionID != o.ActionID {
			continue
		}
		// A job changed since the decision went on from it (and may
		// wait for guidance now).
		if a.State == "pending" || a.State == "approving" || !a.Updated.After(j.UpdatedAt) || a.Updated.After(now.Add(-r.cfg.Lease)) {
			return nil
		}
		r.log.Info("agent: an operator's decision the node's stop kept from the job is handed to it", "task", j.TaskID, "action", a.ActionID, "state", a.State)
		_, err := r.Decided(ctx, j.TaskID, a.Result(), a.State != "denied", a.Diff)
		return err
	}
	return nil
}

// ensureWorking moves the task to working unless it is there already
// (another writer may have moved it first).
func ensureWorking(ctx context.Context, ts Tasks, taskID, note string) error {
	t, err := ts.Task(ctx, taskID)
	if err != nil || t.Status.State == tasks.StateWorking {
		return err
	}
	if _, err := ts.Transition(ctx, taskID, tasks.StateWorking, note); err != nil {
		if t, rerr := ts.Task(ctx, taskID); rerr == nil && t.Status.State == tasks.StateWorking {
			return nil
		}
		return err
	}
	return nil
}

// Owns reports whether taskID is one of the agent's jobs.
func (r *Runtime) Owns(ctx context.Context, taskID string) (bool, error) {
	_, err := r.cfg.Store.Get(ctx, taskID)
	if errors.Is(err, ErrNoJob) {
		return false, nil
	}
	return err == nil, err
}

// Wake tells the dispatcher to look for runnable jobs now.
func (r *Runtime) Wake() { r.cfg.Queue.Wake() }

// Run claims and works on jobs until ctx ends, then waits for the jobs in
// progress to stop at their next step boundary (their leases are released,
// so a restart takes them up at once).
func (r *Runtime) Run(ctx context.Context) error {
	cl := r.ContextLength(ctx)
	r.budget.Store(int64(cl.Tokens))
	if cl.From != ContextConfigured {
		if cl.Tokens < 2*r.cfg.MaxTokens {
			// A context the server gives (a model loaded with a small
			// window) that an answer of MaxTokens would mostly fill:
			// answers get a quarter of it, so the prompt keeps room.
			r.log.Warn("agent: the model's context is small for max_tokens; answers are capped at a quarter of it",
				"context_tokens", cl.Tokens, "max_tokens", r.cfg.MaxTokens, "now", cl.Tokens/4)
			r.cfg.MaxTokens = max(cl.Tokens/4, 1) // 0 would send no cap at all
		}
	}
	defer r.wg.Wait()
	// Leases of this holder are a previous run's: that process is gone.
	if n, err := r.cfg.Store.ReleaseHolder(ctx, r.cfg.Holder); err != nil {
		r.log.Warn("agent: releasing the previous run's jobs", "err", err)
	} else if n > 0 {
		r.log.Info("agent: taking up the jobs the previous run left", "count", n)
	}
	r.pass(ctx, "agent reconcile", r.reconcile)
	if r.cfg.ForgetAfter > 0 {
		// On a goroutine of its own: a pass reads and deletes up to a
		// page of jobs, which must not hold up the dispatch of new ones.
		r.wg.Go(func() {
			r.pass(ctx, "agent forget", r.forget) // at once, as before
			_ = periodic.Every(ctx, "agent forget", 30*r.cfg.Poll, r.cfg.PassTimeout, func(ctx context.Context) error {
				r.forget(ctx)
				return ctx.Err()
			}, func(err error) { r.log.Warn("agent: forgetting ended jobs", "err", err) })
		})
	}
	tick := time.NewTicker(r.cfg.Poll)
	defer tick.Stop()
	for polls := 1; ; polls++ {
		r.dispatch(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-r.wake:
		case <-tick.C:
			if polls%30 == 0 {
				r.pass(ctx, "agent reconcile", r.reconcile)
			}
		}
	}
}

// pass runs f as one pass of the loop named loop, given up after
// PassTimeout (periodic.Pass), which is warned of; f warns of its own
// failures.
func (r *Runtime) pass(ctx context.Context, loop string, f func(context.Context)) {
	_, err := periodic.Pass(ctx, loop, r.cfg.PassTimeout, func(ctx context.Context) (struct{}, error) {
		f(ctx)
		return struct{}{}, ctx.Err()
	})
	if errors.Is(err, periodic.ErrAbandoned) {
		r.log.Warn("agent: "+loop, "err", err)
	}
}

// forget deletes, a page at a time, the ended jobs whose task is gone
// (deleted by the node's task retention) and that ended ForgetAfter ago.
func (r *Runtime) forget(ctx context.Context) {
	if r.cfg.ForgetAfter <= 0 {
		return
	}
	const page = 100
	ended, err := r.cfg.Store.Ended(ctx, r.cfg.Now().Add(-r.cfg.ForgetAfter), &r.endedCursor, page)
	if err != nil {
		r.log.Warn("agent: looking for ended jobs to forget", "err", err)
		return
	}
	if len(ended) < page {
		r.endedCursor = Job{} // the next pass starts over
	} else {
		r.endedCursor = *ended[len(ended)-1]
	}
	forgotten := 0
	for _, j := range ended {
		if _, err := r.cfg.Tasks.Task(ctx, j.TaskID); snap.CodeOf(err) != snap.CodeTaskNotFound {
			continue // its task is kept (or could not be read): so is the job
		}
		if ok, err := r.cfg.Store.Forget(ctx, j.TaskID); err != nil {
			r.log.Warn("agent: forgetting an ended job", "task", j.TaskID, "err", err)
		} else if ok {
			forgotten++
		}
	}
	if forgotten > 0 {
		r.log.Info("agent: forgot ended jobs whose task the retention deleted", "count", forgotten)
	}
}

// dispatch claims runnable jobs while slots are free, taking requesters
// in turn (the oldest job of each first), so one requester's many jobs
// cannot keep another's waiting: a requester already working on
// MaxJobsPerRequester jobs here waits for one of them to end (unless
// Config.Uncapped exempts it), and among the others those with the fewest
// jobs running come first, then those served least recently.
func (r *Runtime) dispatch(ctx context.Context) {
	free := cap(r.slots) - len(r.slots)
	if free <= 0 || ctx.Err() != nil {
		return
	}
	// Each requester is listed with as many jobs as it could start (at
	// most every slot, for an uncapped one): the rest of the list is
	// others' jobs.
	perRequester := r.cfg.MaxJobsPerRequester
	if r.cfg.Uncapped != nil {
		perRequester = cap(r.slots)
	}
	// Each database call bounded (periodic.Pass), not the whole pass:
	// the jobs claimed run on ctx, and a goroutine started within a
	// pass would carry its labels.
	cands, err := periodic.Pass(ctx, "agent dispatch", r.cfg.PassTimeout, func(pctx context.Context) ([]Candidate, error) {
		return r.cfg.Store.Runnable(pctx, r.cfg.Now(), perRequester, 4*cap(r.slots)+16)
	})
	if err != nil {
		r.log.Warn("agent: looking for jobs", "err", err)
		return
	}
	// Requesters with the fewest jobs running here come first, then
	// those served least recently; each requester's jobs stay oldest
	// first.
	r.mu.Lock()
	slices.SortStableFunc(cands, func(a, b Candidate) int {
		if c := cmp.Compare(r.busy[a.Requester], r.busy[b.Requester]); c != 0 {
			return c
		}
		return r.served[a.Requester].Compare(r.served[b.Requester])
	})
	r.mu.Unlock()
	q := fairqueue.New[string, Candidate](len(cands) + 1)
	for _, c := range cands {
		q.Push(c.Requester, c)
	}
	q.Close() // Pop returns false once the candidates are taken
	for free > 0 {
		c, ok := q.Pop()
		if !ok {
			return
		}
		r.mu.Lock()
		_, running := r.running[c.TaskID]
		full := r.busy[c.Requester] >= r.cfg.MaxJobsPerRequester
		r.mu.Unlock()
		if full && r.cfg.Uncapped != nil && r.cfg.Uncapped(c.Requester) {
			full = false
		}
		if running || full {
			continue
		}
		now := r.cfg.Now()
		won, err := periodic.Pass(ctx, "agent dispatch", r.cfg.PassTimeout, func(pctx context.Context) (bool, error) {
			return r.cfg.Store.Claim(pctx, c.TaskID, r.cfg.Holder, now, now.Add(r.cfg.Lease))
		})
		if err != nil {
			r.log.Warn("agent: claim", "task", c.TaskID, "err", err)
			return
		}
		if !won {
			continue
		}
		free--
		r.slots <- struct{}{}
		jctx, cancel := context.WithCancelCause(ctx)
		r.mu.Lock()
		r.running[c.TaskID] = cancel
		r.busy[c.Requester]++
		r.serve(c.Requester, now)
		r.mu.Unlock()
		r.wg.Go(func() {
			defer func() {
				cancel(nil)
				r.mu.Lock()
				delete(r.running, c.TaskID)
				if r.busy[c.Requester]--; r.busy[c.Requester] <= 0 {
					delete(r.busy, c.Requester)
				}
				r.mu.Unlock()
				<-r.slots
				r.Wake()
			}()
			r.work(jctx, cancel, c.TaskID)
		})
	}
}

// maxServed bounds the requesters whose last claim is remembered.
const maxServed = 10_000

// serve records that a job of requester was claimed at now; r.mu held.
func (r *Runtime) serve(requester string, now time.Time) {
	if len(r.served) >= maxServed {
		clear(r.served) // all start equal again
	}
	r.served[requester] = now
}

// Running returns how many jobs this process works on now.
func (r *Runtime) Running() int { return len(r.slots) }

// keep renews the job's lease while it runs and cancels the job when the
// lease is lost or the task canceled (seen in its events, or at a renewal
// for a cancel made by another process).
func (r *Runtime) keep(ctx context.Context, taskID string, cancel context.CancelCauseFunc) {
	events := r.cfg.Tasks.Events().Subscribe(ctx, taskID)
	every := r.cfg.Lease / 3
	tick := time.NewTicker(every)
	defer tick.Stop()
	renewed := r.cfg.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				events = nil
				continue
			}
			if ev.Status != nil && ev.Status.State == tasks.StateCanceled {
				cancel(ErrCanceled)
				return
			}
		case <-tick.C:
			now := r.cfg.Now()
			// Bounded by the time to the next renewal: one that does not
			// come back (a database that hung) is a renewal failed, and
			// the job stops before its lease could lapse.
			ok, err := periodic.Pass(ctx, "agent lease renewal", every, func(ctx context.Context) (bool, error) {
				return r.cfg.Store.Renew(ctx, taskID, r.cfg.Holder, now.Add(r.cfg.Lease))
			})
			switch {
			case err == nil && !ok:
				cancel(ErrLeaseLost)
				return
			case err == nil:
				renewed = now
			case now.Sub(renewed) >= r.cfg.Lease-every:
				// Not renewed for most of a lease: another process may
				// claim the job soon; this one stops before it can.
				r.log.Warn("agent: the job's lease cannot be renewed; stopping it", "task", taskID, "err", err)
				cancel(ErrLeaseLost)
				return
			}
			t, err := periodic.Pass(ctx, "agent lease renewal", every, func(ctx context.Context) (*tasks.Task, error) {
				return r.cfg.Tasks.Task(ctx, taskID)
			})
			if err == nil && t.Status.State == tasks.StateCanceled {
				cancel(ErrCanceled)
				return
			}
		}
	}
}

// messageText is the text of a message's parts: text as it is, data as
// JSON, raw content of a type the node reads (tasks.InputModes) decoded,
// files by name. The task service refused every other raw part; one
// stored before it did is named by its type.
func messageText(m tasks.Message) string {
	var parts []string
	for _, p := range m.Parts {
		switch {
		case p.Text != nil:
			parts = append(parts, *p.Text)
		case len(p.Data) > 0:
			parts = append(parts, string(p.Data))
		case p.Raw != nil:
			text, ok := p.RawText()
			if !ok || snap.CheckReadable("", []snap.Part{p}, tasks.InputModes()) != nil {
				text = "(an attachment of type " + p.MediaType + " the node cannot read)"
			}
			parts = append(parts, text)
		case p.URL != nil:
			parts = append(parts, "(a file at "+*p.URL+")")
		}
	}
	return strings.Join(parts, "\n")
}

// builtinRedact are secrets removed from everything stored or sent to a
// peer, beside Config.Redact: bearer tokens, API keys of the common model
// providers and code hosts, Nostr secret keys, PEM private keys.
var builtinRedact = []struct {
	// hint is a literal every match contains (lower case): the regular
	// expression runs only on text that holds it.
	hint string
	re   *regexp.Regexp
}{
	{"bearer", regexp.MustCompile(`(?i)\bbearer\s+[a-z0-9._~+/-]{20,}=*`)},
	{"sk-", regexp.MustCompile(`\bsk-[A-Za-z0-9_-]{16,}`)},
	{"_", regexp.MustCompile(`\b(?:ghp|gho|ghs|ghu|github_pat)_[A-Za-z0-9_]{20,}`)},
	{"xox", regexp.MustCompile(`\bxox[abprs]-[A-Za-z0-9-]{10,}`)},
	{"akia", regexp.MustCompile(`\bAKIA[0-9A-Z]{16}\b`)},
	{"nsec1", regexp.MustCompile(`\bnsec1[02-9ac-hj-np-z]{58}\b`)},
	{"private key", regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----`)},
}

// redact removes the secrets and the configured patterns from s.
func (r *Runtime) redact(s string) string { return redactText(s, r.cfg.Secrets, r.cfg.Redact) }

// Redact is s without the secrets the runtime removes from everything it
// stores (bearer tokens, provider and code-host keys, Nostr secret keys,
// PEM private keys), without each of secrets and without the matches of
// extra (the operator's agent.redact): for the text a part of the node
// logs or audits itself, such as an external worker's error output.
func Redact(s string, secrets []string, extra []*regexp.Regexp) string {
	return redactText(s, secrets, extra)
}

// redactText removes the built-in patterns, the secrets and the extra
// patterns from s.
func redactText(s string, secrets []string, extra []*regexp.Regexp) string {
	var lower string
	for _, b := range builtinRedact {
		if lower == "" {
			lower = strings.ToLower(s)
		}
		if strings.Contains(lower, b.hint) {
			s = b.re.ReplaceAllString(s, "[REDACTED]")
			lower = ""
		}
	}
	for _, sec := range secrets {
		if sec != "" {
			s = strings.ReplaceAll(s, sec, "[REDACTED]")
		}
	}
	for _, re := range extra {
		s = re.ReplaceAllString(s, "[REDACTED]")
	}
	return s
}

// Store returns the runtime's job store (manifests and histories).
func (r *Runtime) Store() *Store { return r.cfg.Store }

// redactArtifacts removes secrets from the text of artifacts.
func (r *Runtime) redactArtifacts(arts []tasks.Artifact) []tasks.Artifact {
	for i := range arts {
		for k, p := range arts[i].Parts {
			if p.Text != nil {
				t := r.redact(*p.Text)
				arts[i].Parts[k].Text = &t
			}
		}
	}
	return arts
}

// redactObservation removes secrets from everything an observation keeps.
// The output is JSON: a secret inside one of its strings is replaced by
// plain text, which keeps it JSON; should a pattern ever cut across its
// syntax, the output is left out (the text fed back remains).
func (r *Runtime) redactObservation(o *Observation) *Observation {
	o.Text, o.Reason, o.Diff = r.redact(o.Text), r.redact(o.Reason), r.redact(o.Diff)
	if len(o.Output) > 0 {
		out := []byte(r.redact(string(o.Output)))
		if !json.Valid(out) {
			out = nil
		}
		o.Output = out
	}
	return o
}
