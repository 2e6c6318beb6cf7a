package delegate

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/worker"
	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/periodic"
	"github.com/snapnode/snapnode/internal/textcut"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snapnostr"
	"github.com/snapnode/snapnode/tasks"
)

// Relays carries the requests to the delegate and finds its card: it
// subscribes and publishes events (the requests and their answers) and
// queries stored ones (the card). *relay.Pool implements it.
type Relays interface {
	snapnostr.Transport
	snapnostr.Querier
}

// Config is what a Delegate asks and how.
type Config struct {
	// Key signs the requests: the node's own key.
	Key *identity.Key
	// Relays are the node's relays.
	Relays Relays
	// Verifier is the one Relays check events with
	// (relay.PoolConfig.Verifier): the requests are signed through it, so
	// that publishing them checks no signature just made. Nil: they are
	// signed alone, and checked when published.
	Verifier *relay.Verifier
	// HTTP, when set, carries the requests to the HTTP and WebSocket
	// endpoints the delegate's card declares, tried in their declared
	// order before Nostr (client.ToCard); nil: Nostr only. NewHTTP makes
	// the one a node uses.
	HTTP *client.HTTP
	// Fallback configures client.ToCard, with the Delegate's Logger;
	// zero: its defaults.
	Fallback client.FallbackConfig
	// Address is the delegate's P2TR address (required).
	Address string
	// Discover judges the dates of the delegate's cards found on the
	// relays: the node's clock and timestamp window (max_drift); zero:
	// time.Now and snap.DefaultMaxDrift.
	Discover snapnostr.DiscoverConfig
	// StepTimeout bounds the wait for one answer (0: only the caller's
	// context bounds it).
	StepTimeout time.Duration
	// CancelTimeout bounds the tasks/cancel sent for the job's task on
	// the delegate when the node gives up on a step, and, before it, the
	// wait for the answer to a message/send in flight then that opens
	// the job's task, to learn the task (default DefaultCancelTimeout).
	CancelTimeout time.Duration
	// MaxLineBytes bounds one answer (default worker.DefaultMaxLineBytes).
	MaxLineBytes int
	// Audit, when set, records every protocol violation.
	Audit worker.Auditor
	// Redact are the operator's patterns (agent.redact) removed, beside
	// the runtime's built-in ones (agent.Redact), from what the delegate
	// says of its failures before it is logged, audited or returned.
	Redact []*regexp.Regexp
	Logger *slog.Logger
}

// Delegate is an agent.Model that asks another SNAP agent. It is safe for
// concurrent use; the steps of one job come one at a time.
type Delegate struct {
	cfg    Config
	log    *slog.Logger
	client *client.Nostr

	mu sync.Mutex
	// to carries the requests to the delegate, found by its card the
	// first time.
	to client.Transport
	// remote is each running job's task on the delegate, the answers its
	// last step saw and the step sent that is not answered yet; EndJob
	// forgets it, so it holds at most the jobs running at once.
	remote map[string]remoteTask
	// stepContext bounds step step on ctx by Config.StepTimeout; a step
	// past it is canceled with the cause context.DeadlineExceeded. Tests
	// replace it (TimeOutStepsOn).
	stepContext func(ctx context.Context, step int) (context.Context, context.CancelFunc)
}

// remoteTask is a job's task on the delegate.
type remoteTask struct {
	id string
	// seen names the answers the task held when the job's last step was
	// answered (see answer.seen).
	seen []string
	// unanswered is the step whose exchange failed, sent again by the
	// job's next step; nil: none.
	unanswered *sentStep
}

// sentStep is what names a step to the delegate across its tries: the
// idempotency key of its message/send and the message's id.
type sentStep struct {
	key, messageID string
}

// keptStep is what the job's row keeps of the job's task on the delegate
// (agent.Prompt.KeepSent), written before each step is sent and once it
// is answered: the delegate asked, the job's task on it ("": the step
// opens one) and the answers the task held when the step before was
// answered, the step's sequence, idempotency key and message id, and,
// once answered, the task and its answers then.
type keptStep struct {
	Delegate  string    `json:"delegate"`
	Task      string    `json:"task,omitempty"`
	Seen      []string  `json:"seen,omitempty"`
	Step      int       `json:"step"`
	Key       string    `json:"key"`
	MessageID string    `json:"message_id"`
	Answered  *keptTask `json:"answered,omitempty"`
	// Canceled: the node sent the task tasks/cancel when it gave up on
	// the step, and the delegate answered; the job's next step opens a
	// new one, and the job's cancel sends none.
	Canceled bool `json:"canceled,omitempty"`
	// CancelUnanswered: the node sent the task tasks/cancel when it gave
	// up on the step, and the delegate did not answer; the job's next
	// step opens a new one, and the job's cancel sends it again. Only
	// read: older builds wrote it, where this build gives such a task up
	// to be canceled in a record of its own (keepCanceling).
	CancelUnanswered bool `json:"cancel_unanswered,omitempty"`
}

// keptTask is the job's task on the delegate and the answers it held
// when the job's last step was answered (see answer.seen).
type keptTask struct {
	Task string   `json:"task"`
	Seen []string `json:"seen,omitempty"`
}

// kept reads what the job's row kept (agent.Prompt.Sent) as the job's
// remote task: with the step unanswered, to send again as the same step,
// unless answered (agent.Prompt.SentAnswered: the job recorded its answer,
// or left it to wait for a human); else the task the job's next step
// continues. It reports false when there is none, the task was canceled,
// or the record is not one this Delegate made (another delegate's, the
// node's settings changed meanwhile): the step starts afresh.
func (d *Delegate) kept(b []byte, answered bool) (remoteTask, bool) {
	k, ok := d.record(b)
	switch {
	case !ok, k.CancelUnanswered:
		return remoteTask{}, false
	case !answered && k.Key != "" && k.MessageID != "":
		return remoteTask{id: k.Task, seen: k.Seen, unanswered: &sentStep{key: k.Key, messageID: k.MessageID}}, true
	}
	id, seen := k.task()
	return remoteTask{id: id, seen: seen}, id != ""
}

// record decodes b, a job's record (Prompt.Sent), if it is one of this
// delegate's, not already canceled.
func (d *Delegate) record(b []byte) (keptStep, bool) {
	var k keptStep
	if err := json.Unmarshal(b, &k); err != nil || k.Delegate != d.cfg.Address || k.Canceled {
		return keptStep{}, false
	}
	return k, true
}

// task is the task on the delegate k names, and the answers seen on it:
// the one its step was answered on, else the one the step continued ("":
// none known).
func (k keptStep) task() (string, []string) {
	if k.Answered != nil && k.Answered.Task != "" {
		return k.Answered.Task, k.Answered.Seen
	}
	return k.Task, k.Seen
}

var (
	_ agent.Model       = (*Delegate)(nil)
	_ agent.JobEnder    = (*Delegate)(nil)
	_ agent.JobCanceler = (*Delegate)(nil)
)

// New returns the Delegate of cfg; it sends nothing until a job asks.
func New(cfg Config) (*Delegate, error) {
	if cfg.Key == nil || cfg.Relays == nil {
		return nil, errors.New("delegate: Config.Key and Config.Relays are required")
	}
	if err := identity.CheckAddressSyntax(cfg.Address); err != nil {
		return nil, fmt.Errorf("delegate: address %q: %w", cfg.Address, err)
	}
	if cfg.MaxLineBytes <= 0 {
		cfg.MaxLineBytes = worker.DefaultMaxLineBytes
	}
	if cfg.CancelTimeout <= 0 {
		cfg.CancelTimeout = DefaultCancelTimeout
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	d := &Delegate{cfg: cfg, remote: map[string]remoteTask{}}
	d.stepContext = func(ctx context.Context, _ int) (context.Context, context.CancelFunc) {
		return context.WithTimeout(ctx, cfg.StepTimeout)
	}
	// What the delegate and its endpoints answer (an error response's
	// message, an HTTP error's body) reaches the log through the
	// Delegate's lines and its client's: redacted there, as the
	// violations' reasons are.
	d.log = agent.RedactingLogger(cfg.Logger, d.redact)
	d.client = client.NewNostr(client.NostrConfig{Key: cfg.Key, Relays: cfg.Relays, Verifier: cfg.Verifier, Logger: d.log})
	return d, nil
}

// Name is how histories name the model: "delegate:" and the address.
func (d *Delegate) Name() string { return "delegate:" + d.cfg.Address }

// Complete implements agent.Model: it sends the job's next step to the
// delegate and returns its answer line.
func (d *Delegate) Complete(ctx context.Context, pr agent.Prompt) (*agent.Completion, error) {
	if pr.Job == nil {
		return nil, errors.New("delegate: the prompt carries no job request")
	}
	job := pr.Job.JobID
	if h := pr.Job.Metadata.Hops; h >= MaxHops {
		// The job came through MaxHops agents' jobs already: agents
		// delegating to each other in a loop would hand it on for as
		// long as they run, a new job on each at every hop.
		d.log.Warn("delegate: a job that came through as many agents' jobs as allowed is not handed on; it waits for a human",
			"job", job, "hops", h, "max", MaxHops)
		return nil, fmt.Errorf("%w: the job came through %d agents' jobs (hops in its job request), which is as many as a delegate hands on (%d): agents delegating to each other in a loop? It is not sent to %s",
			agent.ErrWorkerFailed, h, MaxHops, d.cfg.Address)
	}
	d.mu.Lock()
	remote, known := d.remote[job]
	d.mu.Unlock()
	if !known && pr.Sent != nil {
		// The job's task, kept with the job before the node stopped (or
		// before this claim of the job): a step sent whose answer the job
		// did not record is sent again as the same step, on the task it
		// was sent on; else the step continues the task.
		if k, ok := d.kept(pr.Sent, pr.SentAnswered); ok {
			remote = k
			if k.unanswered != nil {
				d.log.Info("delegate: a step sent before the job was taken up again is sent again with its idempotency key",
					"job", job, "step", pr.Step, "task", k.id)
			} else {
				d.log.Info("delegate: the job taken up again continues its task on the delegate", "job", job, "step", pr.Step, "task", k.id)
			}
		}
	}
	var (
		line []byte
		err  error
	)
	if remote.id == "" {
		line, err = worker.RequestLine(pr)
	} else {
		line = worker.ObservationLine(pr)
	}
	if err == nil {
		err = worker.CheckSent(line)
	}
	if err != nil {
		return nil, fmt.Errorf("delegate: %w", err)
	}
	outer := ctx
	if d.cfg.StepTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = d.stepContext(ctx, pr.Step)
		defer cancel()
	}
	// The step's key and message id: an attempt that reaches the
	// delegate after one whose answer was lost finds the task the first
	// made or continued, and the answer after the first's message. That
	// holds for ToCard's attempts (by the same endpoint or the next) and
	// for the runtime's: a step whose exchange failed is tried again as
	// the job's next, sent with the same key and id (its line may say
	// more: the first that arrives is the one the delegate keeps). The
	// key and id are recorded in the job's row before the first send
	// (Prompt.KeepSent), so that a node that stops, or crashes, before
	// the answer is recorded sends the step again alike once it takes
	// the job up (Prompt.Sent). Once the step is answered, the record
	// says so, with the task the job's next step continues (KeepSent
	// again): a node that stops between steps, or a job that waits for a
	// human, continues it alike.
	// A step sent again is recorded again too, alike: the record is
	// written only while this process holds the job, so a process whose
	// lease lapsed (another took the job, and sends the step itself)
	// sends nothing.
	st := remote.unanswered
	if st == nil {
		st = &sentStep{key: snap.NewID(), messageID: uuid.NewString()}
	}
	if err := d.keep(ctx, pr, keptStep{Task: remote.id, Seen: remote.seen, Key: st.key, MessageID: st.messageID}); err != nil {
		return nil, fmt.Errorf("delegate: recording step %d before sending it: %w", pr.Step, err)
	}
	remote.unanswered = st
	d.mu.Lock()
	d.remote[job] = remote
	d.mu.Unlock()
	sent := st.messageID
	to, err := d.find(ctx)
	if err != nil {
		return nil, d.failed(outer, ctx, nil, job, "", pr.Step, err, nil, nil)
	}
	req := map[string]any{"message": snap.InnerMessage{MessageID: sent, Role: snap.RoleUser,
		Parts: []snap.Part{snap.DataPart(line)}}, "idempotencyKey": st.key}
	if remote.id != "" {
		req["taskId"] = remote.id
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("delegate: %w", err)
	}
	q := question{step: pr.Step, task: remote.id, sent: sent, seen: remote.seen, max: d.cfg.MaxLineBytes}
	var (
		resp *snap.Message
		// learn, when the step opens the job's task, is the task its
		// message/send opened, read on ctx after the step gave up.
		learn func(ctx context.Context) string
	)
	if remote.id == "" {
		// The step opens the job's task: a step given up while its
		// message/send is in flight still reads the answer, to learn
		// the task to cancel (see failed).
		o := d.open(ctx, to, body)
		resp, err = o.wait(ctx)
		learn = func(ctx context.Context) string { return o.task(ctx, q) }
	} else {
		resp, err = to.Send(ctx, "message/send", body)
	}
	a := answer{}
	if err == nil {
		a = q.answerOf(resp.Payload)
	}
	// A delegate still at work is asked again, at growing intervals. The
	// step's message reached it: a look that fails (a relay gone) is
	// tried again, not the step, which would send the message twice.
	for wait := firstPoll; err == nil && a.pending; wait = min(2*wait, maxPoll) {
		if err = periodic.Sleep(ctx, wait); err != nil {
			break
		}
		q.task = a.taskID
		get, _ := json.Marshal(map[string]string{"taskId": a.taskID})
		resp, lookErr := to.Send(ctx, "tasks/get", get)
		switch {
		case lookErr == nil:
			a = q.answerOf(resp.Payload)
		case ctx.Err() != nil:
			err = lookErr
		default:
			d.log.Warn("delegate: asking for the answer failed; asking again", "job", job, "step", pr.Step, "task", a.taskID, "err", lookErr)
		}
	}
	if err != nil {
		// The job's task on the delegate, if known: the one the step
		// continues, or the one its answer named while at work.
		task := remote.id
		if a.taskID != "" {
			task = a.taskID
		}
		if task != "" {
			learn = nil
		}
		return nil, d.failed(outer, ctx, to, job, task, pr.Step, err, learn, func(task string, answered bool) {
			// Canceled: the job's next step opens a new task, and
			// the job's cancel sends nothing for this one. A cancel
			// unanswered is given up to be canceled again in the
			// same write, a record of its own that the job's next
			// records do not take the place of. A record that fails
			// (the job is another process's) leaves the task to be
			// canceled again.
			bg := context.WithoutCancel(outer)
			if answered {
				_ = d.keep(bg, pr, keptStep{Task: task, Canceled: true})
				return
			}
			_ = d.keepCanceling(bg, pr, keptStep{Task: task, Canceled: true}, keptStep{Task: task})
		})
	}
	if a.rule != "" {
		d.EndJob(job)
		// The job's task on the delegate, as far as the step learned it
		// (the one it continued, or the one it opened, named by an
		// answer at work or by the one refused), is kept with the job,
		// as an answered step's is: the job waits for a human, and goes
		// on with that task, or, ending other than in success, cancels
		// it (CancelJob). Kept only if the step opened one; a record
		// that fails (the job is another process's) leaves it as it was.
		if task := cmp.Or(a.taskID, q.task); task != remote.id {
			seen := a.seen
			if a.taskID == "" {
				seen = nil
			}
			_ = d.keep(context.WithoutCancel(outer), pr, keptStep{Task: remote.id, Seen: remote.seen, Key: st.key, MessageID: st.messageID,
				Answered: &keptTask{Task: task, Seen: seen}})
		}
		err := d.violation(job, a.rule, a.reason)
		if a.rule != ruleError {
			// The delegate answered, and was refused: what it sent
			// counts against the job's budget, as a model server's
			// refused answer does. An error response is its refusal,
			// which costs nothing, as a model server's error status.
			err = worker.Refused(a.size, err)
		}
		return nil, err
	}
	answered := &keptTask{Task: a.taskID, Seen: a.seen}
	if err := d.keep(ctx, pr, keptStep{Task: remote.id, Seen: remote.seen, Key: st.key, MessageID: st.messageID, Answered: answered}); err != nil {
		// The step is sent again, as the same step.
		return nil, fmt.Errorf("delegate: recording the answer to step %d: %w", pr.Step, err)
	}
	d.mu.Lock()
	d.remote[job] = remoteTask{id: a.taskID, seen: a.seen}
	d.mu.Unlock()
	return &agent.Completion{Text: string(a.line), Model: d.Name()}, nil
}

// opening is a step's message/send that opens the job's task on the
// delegate, sent on a context of its own: the step's end (given up: the
// job canceled, its time limit, a time-out) does not drop its answer,
// which names the task the send opened, to cancel. The send has
// Config.CancelTimeout more once the step is over.
type opening struct {
	done chan struct{}
	resp *snap.Message
	err  error
}

// open sends body, a message/send that opens the job's task, to the
// delegate on to, bounded by ctx, the step's, and Config.CancelTimeout
// past its end.
func (d *Delegate) open(ctx context.Context, to client.Transport, body []byte) *opening {
	o := &opening{done: make(chan struct{})}
	sendCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		defer close(o.done)
		defer cancel()
		o.resp, o.err = to.Send(sendCtx, "message/send", body)
	}()
	go func() {
		select {
		case <-o.done:
		case <-ctx.Done():
			t := time.NewTimer(d.cfg.CancelTimeout)
			defer t.Stop()
			select {
			case <-o.done:
			case <-t.C:
				cancel()
			}
		}
	}()
	return o
}

// wait returns the send's answer, or ctx's error once ctx is done first:
// the step's.
func (o *opening) wait(ctx context.Context) (*snap.Message, error) {
	select {
	case <-o.done:
		return o.resp, o.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// task is the task the send opened, as its answer to q names it, waited
// for on ctx; "": none known (no answer within ctx, or one naming none).
func (o *opening) task(ctx context.Context, q question) string {
	select {
	case <-o.done:
	case <-ctx.Done():
		return ""
	}
	if o.err != nil {
		return ""
	}
	return q.answerOf(o.resp.Payload).taskID
}

// keep records k, of step pr, in the job's row (pr.KeepSent), if the
// runtime keeps one.
func (d *Delegate) keep(ctx context.Context, pr agent.Prompt, k keptStep) error {
	if pr.KeepSent == nil {
		return nil
	}
	k.Delegate, k.Step = d.cfg.Address, pr.Step
	b, err := json.Marshal(k)
	if err != nil {
		return err
	}
	return pr.KeepSent(ctx, b)
}

// keepCanceling is keep giving cancel, a record of the job's task the
// job no longer goes on with, up to be canceled in the same write
// (agent.Prompt.KeepSentCanceling). A caller that offers no such write
// (the runtime does) has k kept alone: cancel's task is not canceled
// again.
func (d *Delegate) keepCanceling(ctx context.Context, pr agent.Prompt, k, cancel keptStep) error {
	if pr.KeepSentCanceling == nil {
		return d.keep(ctx, pr, k)
	}
	k.Delegate, k.Step = d.cfg.Address, pr.Step
	cancel.Delegate, cancel.Step = d.cfg.Address, pr.Step
	b, err := json.Marshal(k)
	if err != nil {
		return err
	}
	c, err := json.Marshal(cancel)
	if err != nil {
		return err
	}
	return pr.KeepSentCanceling(ctx, b, c)
}

// MaxHops is how many agents' jobs a job may have come through (its job
// request's hops, agent.JobRequestMetadata) and still be handed on to
// the delegate: agents delegating to each other in a loop stop there.
const MaxHops = 4

// How often a delegate still at work is asked again: first after
// firstPoll, then twice as long each time, up to maxPoll.
const (
	firstPoll = 50 * time.Millisecond
	maxPoll   = 2 * time.Second
)

// question is what a step asked the delegate, to read its answers by.
type question struct {
	step int
	// task is the job's remote task ("": the step opens one); sent, the
	// id of the step's message.
	task, sent string
	// seen are the answers the task held when the step before was
	// answered (see answer.seen): none of them answers this step, unless
	// it comes after the step's own message.
	seen []string
	max  int // bytes of an answer line
}

// answer is what a response payload says to a question: an answer line
// and where it came from, a rule it breaks and why, or that the delegate
// is still at work on the step.
type answer struct {
	taskID string
	line   []byte
	// source names the message or the artifact that holds the answer
	// (see sourceOf).
	source string
	// seen names the answers the task holds with this one: the answer,
	// the latest agent message's and the latest artifact's, none of which
	// answers the next step unless it comes after that step's message.
	seen         []string
	rule, reason string
	pending      bool
	// size is the bytes of the response payload read.
	size int
}

// ruleError is the rule of an error response to a step.
const ruleError = "error"

// answerOf reads the delegate's response payload (to message/send or
// tasks/get) to q.
func (q *question) answerOf(payload []byte) answer {
	a := q.read(payload)
	a.size = len(payload)
	return a
}

// read is answerOf without the payload's size.
func (q *question) read(payload []byte) answer {
	if e := snap.ResponseError(payload); e != nil {
		// The delegate chooses its message and data, up to the
		// transport's message size (megabytes over HTTP): cut before
		// they reach the log, the audit log and the job.
		return answer{rule: ruleError, reason: fmt.Sprintf("the delegate answered step %d with an error: %s", q.step, cutText(e.Error(), maxErrorText))}
	}
	var out struct {
		Task *tasks.Task `json:"task"`
	}
	if err := json.Unmarshal(payload, &out); err != nil || out.Task == nil || out.Task.ID == "" {
		return answer{rule: "object", reason: fmt.Sprintf("the delegate answered step %d without a task", q.step)}
	}
	task := out.Task
	if e := snap.CheckID("task.id", task.ID); e != nil {
		// The node keeps the delegate's task id with the job, names it
		// in its log and sends it back (the next step, tasks/cancel):
		// an id of SNAP's shape alone, not whatever the delegate chose.
		return answer{rule: "object", reason: fmt.Sprintf("the delegate answered step %d on a task whose id is not a SNAP id (1–%d characters of A–Z, a–z, 0–9, _ and -): %s",
			q.step, snap.MaxIDLength, cutText(task.ID, 64))}
	}
	if q.task != "" && task.ID != q.task {
		return answer{rule: "object", reason: fmt.Sprintf("the delegate answered step %d on task %s, not the job's task %s", q.step, task.ID, q.task)}
	}
	state := task.Status.State
	atWork := state == tasks.StateSubmitted || state == tasks.StateWorking
	data, source, fresh := answerPart(task, q.sent)
	// An agent message after the step's own is its answer; any other was
	// there, or may have been, when the step before was answered.
	stale := data != nil && !fresh && slices.Contains(q.seen, source)
	switch {
	case (data == nil || stale) && atWork:
		return answer{taskID: task.ID, pending: true}
	case data == nil:
		return answer{taskID: task.ID, seen: seenOf(task, ""), rule: "object", reason: fmt.Sprintf("the delegate's task %s (%s) holds no answer to step %d: no data part in an agent message or artifact",
			task.ID, state, q.step)}
	case stale:
		return answer{taskID: task.ID, seen: seenOf(task, ""), rule: "object", reason: fmt.Sprintf("the delegate's task %s (%s) holds no new answer to step %d: its latest was there when the step before was answered",
			task.ID, state, q.step)}
	}
	// One line, as a worker writes it: the data part may come indented.
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err == nil {
		data = compact.Bytes()
	}
	if _, err := worker.ParseLine(data, q.max); err != nil {
		le := &worker.LineError{Rule: "json", Message: err.Error()}
		errors.As(err, &le)
		return answer{taskID: task.ID, seen: seenOf(task, source), rule: le.Rule, reason: "the delegate answered garbage: " + le.Message}
	}
	return answer{taskID: task.ID, line: data, source: source, seen: seenOf(task, source)}
}

// seenOf is answer.seen of task answered from source ("": none): the
// answers a later step must not take as its own.
func seenOf(task *tasks.Task, source string) []string {
	var seen []string
	if source != "" {
		seen = append(seen, source)
	}
	for _, s := range latest(task) {
		if s != "" && !slices.Contains(seen, s) {
			seen = append(seen, s)
		}
	}
	return seen
}

// maxErrorText bounds what a delegate's error response says (its code,
// message and data) in the reason of the step's failure.
const maxErrorText = 500

// cutText is s, as valid UTF-8, cut to at most n bytes and marked so.
func cutText(s string, n int) string {
	return textcut.Shorten(strings.ToValidUTF8(s, "\uFFFD"), n, "…")
}

// answerPart is the data of the task's answer and where it is (see
// answer.source): the first data part of its latest agent message after
// the message sent (of the whole history when it does not hold that
// message), else of its latest artifact; nil when it has none. fresh
// reports an agent message that the history shows after the message sent.
func answerPart(t *tasks.Task, sent string) (data []byte, source string, fresh bool) {
	from := 0
	for i, m := range t.History {
		if m.MessageID == sent && m.Role == snap.RoleUser {
			from = i + 1
		}
	}
	if b, s := messageAnswer(t, from); b != nil {
		return b, s, from > 0
	}
	b, s := artifactAnswer(t)
	return b, s, false
}

// messageAnswer is the data of the task's latest agent message at or
// after index from of its history, and its source; nil when that message
// has no data part, or there is none.
func messageAnswer(t *tasks.Task, from int) ([]byte, string) {
	for i := len(t.History) - 1; i >= from; i-- {
		if m := t.History[i]; m.Role == snap.RoleAgent {
			if b := dataOf(m.Parts); b != nil {
				return b, sourceOf("message", m.MessageID, b)
			}
			break
		}
	}
	return nil, ""
}

// artifactAnswer is the data of the task's latest artifact and its
// source; nil when it has none or no data part.
func artifactAnswer(t *tasks.Task) ([]byte, string) {
	if n := len(t.Artifacts); n > 0 {
		a := t.Artifacts[n-1]
		if b := dataOf(a.Parts); b != nil {
			return b, sourceOf("artifact", a.ArtifactID, b)
		}
	}
	return nil, ""
}

// latest names the answers a later step could take from the task as it
// is: its latest agent message's and its latest artifact's ("" for none).
func latest(t *tasks.Task) [2]string {
	_, m := messageAnswer(t, 0)
	_, a := artifactAnswer(t)
	return [2]string{m, a}
}

// sourceOf names an answer: where it is (a message or an artifact, by its
// id) and a hash of its data, so that a message or artifact whose data
// changed in place is a new answer.
func sourceOf(kind, id string, data []byte) string {
	sum := sha256.Sum256(data)
	return kind + ":" + id + ":" + hex.EncodeToString(sum[:8])
}

func dataOf(parts []snap.Part) []byte {
	for _, p := range parts {
		if p.Data != nil {
			return p.Data
		}
	}
	return nil
}

// find returns the Transport to the delegate, from its card on the relays
// the first time: the card's endpoints in their order, then Nostr on the
// node's relays (client.ToCard), when the card declares endpoints and the
// Delegate has an HTTP client; else Nostr. The Transport is kept for every later step
// and poll, so an endpoint that failed is set aside for all of them.
func (d *Delegate) find(ctx context.Context) (client.Transport, error) {
	d.mu.Lock()
	to := d.to
	d.mu.Unlock()
	if to != nil {
		return to, nil
	}
	found, _, err := snapnostr.DiscoverByIdentity(ctx, d.cfg.Relays, d.cfg.Address, d.cfg.Discover)
	if err != nil {
		return nil, fmt.Errorf("finding the delegate's card: %w", err)
	}
	to = d.client.To(client.Target{Address: d.cfg.Address, PubKey: found.PubKey, Card: found.Card}, false)
	if d.cfg.HTTP != nil && len(found.Card.Endpoints) > 0 {
		fc := d.cfg.Fallback
		// The card was found on the node's relays, which carry the
		// requests over Nostr: the delegate is asked there after its
		// endpoints, whether or not its card names relays, as a card
		// without endpoints is.
		fc.Logger, fc.NostrWithoutRelays = d.log, true
		if to, err = client.ToCard(found.Card, d.cfg.HTTP, to, fc); err != nil {
			return nil, fmt.Errorf("the delegate's card: %w", err)
		}
	}
	d.mu.Lock()
	d.to = to
	d.mu.Unlock()
	return to, nil
}

// NewHTTP returns the HTTP client of a node's Delegate of the agent
// address, signing with key: it follows no redirect, and, unless private,
// refuses to connect to loopback, link-local, private, shared, unspecified,
// multicast, reserved and the other non-public addresses
// (client.NetConfig.RefusePrivate), what a card found
// on the relays must not make the node reach; the first refusal is logged
// at warn.
func NewHTTP(key *identity.Key, address string, private bool, logger *slog.Logger) *client.HTTP {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	var warned atomic.Bool
	return client.NewHTTP(client.HTTPConfig{Key: key, Net: client.NetConfig{NoRedirects: true, RefusePrivate: !private,
		OnRefused: func(a netip.AddrPort) {
			if !warned.Swap(true) {
				logger.Warn("delegate: an endpoint of the delegate's card is on a non-public address, not connected to; its other endpoints, then Nostr, are used (agent.delegate_private_endpoints allows it)",
					"delegate", address, "addr", a.String())
			}
		}}})
}

// failed is the error of a step the delegate did not answer: past the
// step time-out (step's deadline) or the caller's deadline (outer's) it is
// a violation, and the job waits for a human; so is a step an endpoint
// took and answered without a SNAP response (client.ErrNotSentAgain),
// which the delegate may have acted on; a canceled step (the node
// stops) or a failed exchange is returned as it is, and the runtime
// retries the step. When the node gives up on the step (a time-out, the
// job's time limit, the job canceled: agent.ErrCanceled), the job's task
// on the delegate, task ("": not known), sent on to, is canceled
// (cancelTask), canceled (when not nil) is called once it was sent
// tasks/cancel, saying whether the delegate answered, and the error says
// so (the job canceled: the canceled step's, in the job's history); a step stopped because the node
// stops, or the job went to another process, leaves it at work, for the
// step sent again when the job is taken up. When the task is not known
// and learn is not nil (the step's message/send, which opens the task, is
// in flight), the task is the one learn reads of its answer, within
// Config.CancelTimeout; canceled is given the task canceled.
func (d *Delegate) failed(outer, step context.Context, to client.Transport, job, task string, seq int, err error, learn func(context.Context) string, canceled func(task string, answered bool)) error {
	cancelTask := func(why string) string {
		// On a context of its own: outer, the step's caller's, is done.
		ctx, cancel := d.cancelContext(outer)
		defer cancel()
		if task == "" && learn != nil && to != nil {
			if task = learn(ctx); task != "" {
				d.log.Info("delegate: the step's message/send, in flight when the node gave up on it, opened a task on the delegate; it is canceled",
					"job", job, "step", seq, "task", task, "why", why)
			}
		}
		note, cerr := d.cancelTask(ctx, to, job, task, seq, why)
		if to != nil && task != "" && canceled != nil {
			canceled(task, cerr == nil)
		}
		return note
	}
	var limit string
	switch cause := context.Cause(outer); {
	case errors.Is(cause, agent.ErrTimeLimit):
		// The job's time ran out, not the delegate's.
		d.EndJob(job)
		stopped := worker.TimeLimit(d.log, d.cfg.Audit, job, seq, map[string]any{"delegate": d.cfg.Address})
		if note := cancelTask("the job reached its time limit"); note != "" {
			return fmt.Errorf("%w; %s", stopped, note)
		}
		return stopped
	case errors.Is(outer.Err(), context.DeadlineExceeded):
		limit = "the request time-out"
	case outer.Err() == nil && errors.Is(context.Cause(step), context.DeadlineExceeded):
		limit = "its step time-out of " + d.cfg.StepTimeout.String()
	default:
		switch {
		case errors.Is(cause, agent.ErrCanceled):
			// What became of the task is said in the error too: the
			// job's history keeps it with the step given up.
			d.EndJob(job)
			if note := cancelTask("the job was canceled"); note != "" {
				err = fmt.Errorf("%w; %s", err, note)
			}
		case outer.Err() == nil && errors.Is(err, client.ErrNotSentAgain):
			// An endpoint took the step and answered without a SNAP
			// response: the delegate may have acted on it, and may
			// keep no idempotency keys (an agent of the reference
			// SDK answers so when its handler failed, after it made
			// or continued the task). The runtime would send the step
			// again: the job waits for a human instead, its record
			// keeping the task the step continued, which the step that
			// resumes it continues with a key of its own.
			d.EndJob(job)
			return d.violation(job, "unanswered", fmt.Sprintf("the delegate did not answer step %d: %v; a delegate may keep no idempotency keys, and the job's task there may have been made or changed: a message to the job sends its next step", seq, err))
		case outer.Err() != nil && to != nil:
			d.log.Info("delegate: the step was stopped (the node stops, or the job went to another process); the job's task on the delegate is left at work, for the step sent again when the job is taken up",
				"job", job, "step", seq, "task", task)
		}
		if ctxErr := outer.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%w (%w)", err, ctxErr)
		}
		return fmt.Errorf("delegate: %w", err)
	}
	d.EndJob(job)
	reason := fmt.Sprintf("the delegate did not answer step %d within %s: %v", seq, limit, err)
	if note := cancelTask("the step timed out"); note != "" {
		reason += "; " + note
	}
	return d.violation(job, "timeout", reason)
}

// DefaultCancelTimeout is Config.CancelTimeout's default.
const DefaultCancelTimeout = 5 * time.Second

// cancelContext is the context a tasks/cancel is sent on: ctx's values,
// not its end (the caller's may be done), and Config.CancelTimeout.
func (d *Delegate) cancelContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d.cfg.CancelTimeout)
}

// CancelJob implements agent.JobCanceler: the job no longer continues its
// task on the delegate, named by sent (what the job's row kept,
// agent.Prompt.KeepSent): it ended other than in success (canceled while
// it was not in a step, halted at a limit, its task failed), or was
// rewound to a checkpoint, the task's history holding the steps undone.
// The task is sent tasks/cancel within Config.CancelTimeout (finding the
// delegate's card included), as when the node gives up on a step
// (cancelTask). It returns nil once the delegate answered, a refusal
// included (a task it ended already, or does not know), or when there is
// nothing to cancel: a task the node canceled already, giving up on a
// step, one of another delegate's, or none known. Else (the delegate not
// found, or no answer) it returns the error, and the runtime calls it
// again later (at least once: a node that crashed before the answer
// leaves the record to the next). The job's next step, if any (a rewound
// job's), opens a new task.
func (d *Delegate) CancelJob(ctx context.Context, job string, sent []byte) error {
	k, ok := d.record(sent)
	if !ok {
		return nil
	}
	task, _ := k.task()
	// A rewound job may be at work on its new task already: only what
	// is known here of the old one is forgotten.
	d.mu.Lock()
	if r, ok := d.remote[job]; ok && r.id == task {
		delete(d.remote, job)
	}
	d.mu.Unlock()
	if task == "" {
		d.log.Warn("delegate: the job ended or was rewound; its task on the delegate is not known (its first step's message/send was not answered), and is not canceled",
			"job", job, "step", k.Step)
		return nil
	}
	ctx, cancel := d.cancelContext(ctx)
	defer cancel()
	to, err := d.find(ctx)
	if err != nil {
		d.log.Warn("delegate: the job ended or was rewound; its task on the delegate could not be canceled: the delegate was not found",
			"job", job, "task", task, "err", err)
		return fmt.Errorf("delegate: canceling task %s of job %s: %w", task, job, err)
	}
	_, err = d.cancelTask(ctx, to, job, task, k.Step, "the job ended other than in success, or was rewound to a checkpoint")
	return err
}

// cancelTask sends the delegate, on to, tasks/cancel for task, the job's
// task there, once the node gave up on step seq of the job, or the job
// (why): the delegate would go on working on it, and spending, for
// nothing. It is sent once, on ctx (bounded by its caller: see
// cancelContext); a refusal or no answer is logged. It returns what the
// step's error says of it ("" when nothing was sent to the delegate: to
// is nil), and, when the delegate did not answer, the error.
func (d *Delegate) cancelTask(ctx context.Context, to client.Transport, job, task string, seq int, why string) (string, error) {
	if to == nil {
		return "", nil
	}
	if task == "" {
		d.log.Warn("delegate: the job's task on the delegate is not known (the step's message/send was not answered); it is not canceled",
			"job", job, "step", seq, "why", why)
		return "the task the step may have made on the delegate is not known (its message/send was not answered) and was not canceled", nil
	}
	body, err := json.Marshal(snap.CancelParams{TaskID: task})
	if err != nil {
		return "", nil
	}
	resp, err := to.Send(ctx, "tasks/cancel", body)
	if err != nil {
		msg := cutText(err.Error(), maxErrorText)
		d.log.Warn("delegate: the delegate did not answer the cancel of the job's task on it",
			"job", job, "step", seq, "task", task, "why", why, "err", msg)
		return fmt.Sprintf("its task %s on the delegate was sent tasks/cancel, which was not answered: %s", task, msg),
			fmt.Errorf("delegate: tasks/cancel of task %s of job %s not answered: %w", task, job, err)
	}
	if e := snap.ResponseError(resp.Payload); e != nil {
		msg := cutText(e.Error(), maxErrorText)
		d.log.Warn("delegate: the delegate refused the cancel of the job's task on it; it is not asked again",
			"job", job, "step", seq, "task", task, "why", why, "err", msg)
		return fmt.Sprintf("its task %s on the delegate was sent tasks/cancel, which it refused: %s", task, msg), nil
	}
	var out struct {
		Task struct {
			Status struct {
				State tasks.State `json:"state"`
			} `json:"status"`
		} `json:"task"`
	}
	_ = json.Unmarshal(resp.Payload, &out)
	state := cutText(string(out.Task.Status.State), 40)
	d.log.Info("delegate: the job's task on the delegate was canceled", "job", job, "step", seq, "task", task, "why", why, "state", state)
	if out.Task.Status.State != tasks.StateCanceled {
		return fmt.Sprintf("its task %s on the delegate was sent tasks/cancel, and says it is %q", task, state), nil
	}
	return fmt.Sprintf("its task %s on the delegate was canceled (tasks/cancel)", task), nil
}

// violation audits the delegate's violation and returns the error that
// makes the job wait for a human. The reason, which may carry what the
// delegate answered (an error response's message), is redacted first:
// the log and the audit log keep it.
func (d *Delegate) violation(job, rule, reason string) error {
	return worker.Violation(d.log, d.cfg.Audit, job, rule, d.redact(reason), map[string]any{"delegate": d.cfg.Address})
}

// EndJob implements agent.JobEnder: the job's remote task is forgotten
// here; a later step of the job continues the task the job's row kept
// (agent.Prompt.Sent), sending again a step not answered, or, without
// one, starts a new task with the job request.
func (d *Delegate) EndJob(job string) {
	d.mu.Lock()
	delete(d.remote, job)
	d.mu.Unlock()
}
