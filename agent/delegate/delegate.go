// Package delegate hands an agent's jobs to another SNAP agent: a remote
// worker that speaks the external workers' JSON lines (see package
// agent/worker) inside signed SNAP messages over Nostr.
//
// The first step of a job sends the delegate a message/send whose one data
// part is the job request (schemas/job-request.v1.json); every later step
// continues the same remote task (its taskId) with a data part holding the
// observation (schemas/worker-observation.v1.json). The delegate's answer
// is the data part of the returned task's latest agent message (or, when
// it has none, of its latest artifact): exactly one worker answer
// (schemas/worker-answer.v1.json), a proposal or an agent response.
//
// A [Delegate] is an agent.Model: the node still validates, judges and
// carries out every proposal itself, on its own sandbox; the delegate
// never touches it. An answer that is missing, not a worker answer, an
// error response, or late (past the step time-out or the caller's
// deadline) is a protocol violation, audited as a worker's, and the error
// wraps agent.ErrWorkerFailed: the job waits for a human with the reason.
package delegate

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/agent/worker"
	"github.com/snapnode/snapnode/client"
	"github.com/snapnode/snapnode/identity"
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
	// Address is the delegate's P2TR address (required).
	Address string
	// StepTimeout bounds the wait for one answer (0: only the caller's
	// context bounds it).
	StepTimeout time.Duration
	// MaxLineBytes bounds one answer (default worker.DefaultMaxLineBytes).
	MaxLineBytes int
	// Audit, when set, records every protocol violation.
	Audit  worker.Auditor
	Logger *slog.Logger
}

// Delegate is an agent.Model that asks another SNAP agent. It is safe for
// concurrent use; the steps of one job come one at a time.
type Delegate struct {
	cfg    Config
	log    *slog.Logger
	client *client.Nostr

	mu     sync.Mutex
	target *client.Target
	// remote is each running job's task on the delegate; EndJob forgets
	// it, so it holds at most the jobs running at once.
	remote map[string]string
}

var (
	_ agent.Model    = (*Delegate)(nil)
	_ agent.JobEnder = (*Delegate)(nil)
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
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Delegate{cfg: cfg, log: cfg.Logger, remote: map[string]string{},
		client: client.NewNostr(client.NostrConfig{Key: cfg.Key, Relays: cfg.Relays, Logger: cfg.Logger})}, nil
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
	d.mu.Lock()
	remote := d.remote[job]
	d.mu.Unlock()
	var (
		line []byte
		err  error
	)
	if remote == "" {
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
		ctx, cancel = context.WithTimeout(ctx, d.cfg.StepTimeout)
		defer cancel()
	}
	t, err := d.find(ctx)
	if err != nil {
		return nil, d.failed(outer, ctx, job, pr.Step, err)
	}
	req := map[string]any{"message": snap.InnerMessage{MessageID: uuid.NewString(), Role: snap.RoleUser,
		Parts: []snap.Part{snap.DataPart(line)}}}
	if remote != "" {
		req["taskId"] = remote
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, fmt.Errorf("delegate: %w", err)
	}
	resp, err := d.client.Request(ctx, t, client.NostrRequest{Method: "message/send", Payload: body})
	if err != nil {
		return nil, d.failed(outer, ctx, job, pr.Step, err)
	}
	taskID, line, rule, reason := answerOf(resp.Payload, pr.Step, d.cfg.MaxLineBytes)
	if rule != "" {
		d.EndJob(job)
		return nil, d.violation(job, rule, reason)
	}
	d.mu.Lock()
	d.remote[job] = taskID
	d.mu.Unlock()
	return &agent.Completion{Text: string(line), Model: d.Name()}, nil
}

// answerOf reads the delegate's response payload to step: the id of its
// task and the answer line, or the rule the response breaks and why.
func answerOf(payload []byte, step, max int) (taskID string, line []byte, rule, reason string) {
	if e := snap.ResponseError(payload); e != nil {
		return "", nil, "error", fmt.Sprintf("the delegate answered step %d with an error: %s", step, e.Error())
	}
	var out struct {
		Task *tasks.Task `json:"task"`
	}
	if err := json.Unmarshal(payload, &out); err != nil || out.Task == nil || out.Task.ID == "" {
		return "", nil, "object", fmt.Sprintf("the delegate answered step %d without a task", step)
	}
	data := answerPart(out.Task)
	if data == nil {
		return "", nil, "object", fmt.Sprintf("the delegate's task %s (%s) holds no answer to step %d: no data part in an agent message or artifact",
			out.Task.ID, out.Task.Status.State, step)
	}
	// One line, as a worker writes it: the data part may come indented.
	var compact bytes.Buffer
	if err := json.Compact(&compact, data); err == nil {
		data = compact.Bytes()
	}
	if _, err := worker.ParseLine(data, max); err != nil {
		le := &worker.LineError{Rule: "json", Message: err.Error()}
		errors.As(err, &le)
		return "", nil, le.Rule, "the delegate answered garbage: " + le.Message
	}
	return out.Task.ID, data, "", ""
}

// answerPart is the data of the task's answer: the first data part of its
// latest agent message, else of its latest artifact; nil when it has none.
func answerPart(t *tasks.Task) []byte {
	for i := len(t.History) - 1; i >= 0; i-- {
		if m := t.History[i]; m.Role == snap.RoleAgent {
			if b := dataOf(m.Parts); b != nil {
				return b
			}
			break
		}
	}
	if n := len(t.Artifacts); n > 0 {
		return dataOf(t.Artifacts[n-1].Parts)
	}
	return nil
}

func dataOf(parts []snap.Part) []byte {
	for _, p := range parts {
		if p.Data != nil {
			return p.Data
		}
	}
	return nil
}

// find returns the delegate's Target, from its card on the relays the
// first time.
func (d *Delegate) find(ctx context.Context) (client.Target, error) {
	d.mu.Lock()
	t := d.target
	d.mu.Unlock()
	if t != nil {
		return *t, nil
	}
	found, _, err := snapnostr.DiscoverByIdentity(ctx, d.cfg.Relays, d.cfg.Address)
	if err != nil {
		return client.Target{}, fmt.Errorf("finding the delegate's card: %w", err)
	}
	t = &client.Target{Address: d.cfg.Address, PubKey: found.PubKey}
	d.mu.Lock()
	d.target = t
	d.mu.Unlock()
	return *t, nil
}

// failed is the error of a step the delegate did not answer: past the
// step time-out (step's deadline) or the caller's deadline (outer's) it is
// a violation, and the job waits for a human; a canceled step (the node
// stops) or a failed exchange is returned as it is, and the runtime
// retries the step.
func (d *Delegate) failed(outer, step context.Context, job string, seq int, err error) error {
	var limit string
	switch {
	case errors.Is(outer.Err(), context.DeadlineExceeded):
		limit = "the request time-out"
	case outer.Err() == nil && errors.Is(step.Err(), context.DeadlineExceeded):
		limit = "its step time-out of " + d.cfg.StepTimeout.String()
	default:
		if ctxErr := outer.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%w (%w)", err, ctxErr)
		}
		return fmt.Errorf("delegate: %w", err)
	}
	d.EndJob(job)
	return d.violation(job, "timeout", fmt.Sprintf("the delegate did not answer step %d within %s: %v", seq, limit, err))
}

// violation audits the delegate's violation and returns the error that
// makes the job wait for a human.
func (d *Delegate) violation(job, rule, reason string) error {
	return worker.Violation(d.log, d.cfg.Audit, job, rule, reason, map[string]any{"delegate": d.cfg.Address})
}

// EndJob implements agent.JobEnder: the job's remote task is forgotten; a
// later step of the job starts a new one with the job request.
func (d *Delegate) EndJob(job string) {
	d.mu.Lock()
	delete(d.remote, job)
	d.mu.Unlock()
}
