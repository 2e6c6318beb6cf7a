package node

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/admin"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// proposals connects the executor, which knows nothing of SNAP or tasks, to
// the task service (as its tasks.Runner) and to the admin socket (as its
// admin.Handler): it turns the executor's results into artifacts and task
// states, and operator commands into executor calls.
type proposals struct {
	exec  *executor.Executor
	tasks *tasks.Service
	// agent, when on, takes the decisions on its jobs' actions: the job
	// resumes with the outcome as its observation.
	agent  *agent.Runtime
	policy *policy.Holder // the executor's: swapped on reload
	audit  *audit.Log
	// console, once the HTTP listener serves it, issues the login URLs
	// the admin socket hands out.
	console atomic.Pointer[consoleLogin]
	logger  *slog.Logger
	// pause, nil but in crash tests, is called before each proposal runs
	// (pointRun), once the executor returned its result (pointRan), and
	// once it carried out an operator's decision (pointDecided).
	pause func(point string)
}

// The points of a run at which crash tests stop the node.
const (
	pointRun     = "run"
	pointRan     = "ran"
	pointDecided = "decided"
)

var (
	_ tasks.Runner  = (*proposals)(nil)
	_ admin.Handler = (*proposals)(nil)
)

// registerMethods registers the protocol methods on router: the task
// service's, with message/send and message/stream first offered to props
// (when proposals run) for an operator's decision on a held action.
func registerMethods(router *snap.Router, svc *tasks.Service, props *proposals) {
	var decide tasks.Interceptor
	if props != nil {
		decide = props.tryDecision
	}
	svc.Register(router, decide)
}

// Run implements tasks.Runner. A message's proposals run in order; the
// first that fails or needs confirmation stops the run, and the proposals
// after it are not carried out (the note says so).
//
// A resumed job (the node stopped while it ran) never carries a proposal
// out twice: one the executor recorded for the task since the job began
// (the same data) is reported from that record (see executor.Action.Result);
// one it did not record either never ran or had no effects (a read, a
// refusal), and runs now.
func (p *proposals) Run(ctx context.Context, job tasks.Job) (tasks.Outcome, error) {
	out := tasks.Outcome{State: tasks.StateCompleted}
	var notes []string
	var ran []executor.Action // a resumed job's recorded actions
	if job.Resumed {
		acts, err := p.exec.Actions(ctx, job.TaskID)
		if err != nil {
			return tasks.Outcome{}, err
		}
		for _, a := range acts {
			// Timestamps of the task and of the executor may differ in
			// precision: a second's slack.
			if !a.Created.Before(job.Since.Add(-time.Second)) {
				ran = append(ran, a)
			}
		}
	}
	for i, data := range job.Proposals {
		res, err := p.runOnce(ctx, job, data, &ran)
		if err != nil {
			return tasks.Outcome{}, err
		}
		out.Artifacts = append(out.Artifacts, agent.Artifacts(res)...)
		skipped := ""
		if rest := len(job.Proposals) - i - 1; rest > 0 && res.Outcome != executor.Completed {
			skipped = fmt.Sprintf(" (%d later proposal(s) not run)", rest)
		}
		switch res.Outcome {
		case executor.Failed:
			out.State, out.Note = tasks.StateFailed, res.Reason+skipped
			return out, nil
		case executor.NeedsConfirmation:
			out.State, out.Note = tasks.StateInputRequired, agent.ConfirmationNote(res)+skipped
			return out, nil
		}
		if res.Response != "" {
			notes = append(notes, res.Response)
		}
	}
	if len(notes) > 0 {
		out.Note = notes[len(notes)-1]
	}
	return out, nil
}

// runOnce runs one proposal of job, unless it is among ran (the actions a
// resumed job's proposals were recorded as), which it then reports and
// takes out of ran.
func (p *proposals) runOnce(ctx context.Context, job tasks.Job, data []byte, ran *[]executor.Action) (*executor.Result, error) {
	for i, a := range *ran {
		if bytes.Equal(a.Data, data) {
			*ran = slices.Delete(*ran, i, i+1)
			p.logger.Info("proposals: a proposal the node's stop interrupted had run; its record completes it",
				"task", job.TaskID, "action", a.ActionID, "state", a.State)
			return a.Result(), nil
		}
	}
	if p.pause != nil {
		p.pause(pointRun)
	}
	res, err := p.exec.Run(ctx, executor.Request{TaskID: job.TaskID, Requester: job.Requester, Data: data})
	if err == nil && p.pause != nil {
		p.pause(pointRan)
	}
	return res, err
}

// Errors of pending.
var (
	errNoHeld        = errors.New("waits on no action")
	errHeldAmbiguous = errors.New("holds more than one action")
	errNotHeld       = errors.New("holds no such action")
)

// pending returns the held action of taskID to decide on: actionID, or
// when it is "" the one action the task holds. A task holding several
// needs the action named: a decision never lands on an action the
// operator did not mean.
func (p *proposals) pending(ctx context.Context, taskID, actionID string) (*executor.Pending, error) {
	list, err := p.exec.Pending(ctx, taskID)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(list))
	for i, pa := range list {
		if pa.ActionID == actionID {
			return &list[i], nil
		}
		ids[i] = pa.ActionID + " (" + pa.Action + ")"
	}
	switch {
	case len(list) == 0:
		return nil, fmt.Errorf("task %s %w", taskID, errNoHeld)
	case actionID != "":
		return nil, fmt.Errorf("task %s %w %s; it holds %s", taskID, errNotHeld, actionID, strings.Join(ids, ", "))
	case len(list) > 1:
		return nil, fmt.Errorf("task %s %w: %s; name the one to decide (--action ID)", taskID, errHeldAmbiguous, strings.Join(ids, ", "))
	}
	return &list[0], nil
}

// settle applies a confirmation's result to its task: an agent's job
// resumes with it, a peer's proposal ends the task.
func (p *proposals) settle(ctx context.Context, taskID string, res *executor.Result, approved bool) (*tasks.Task, error) {
	t, err := p.settleTask(ctx, taskID, res, approved)
	if err == nil && t.Status.State.Terminal() {
		p.withdrawHeld(ctx, taskID, t.Status.State)
	}
	return t, err
}

func (p *proposals) settleTask(ctx context.Context, taskID string, res *executor.Result, approved bool) (*tasks.Task, error) {
	if p.agent != nil {
		if mine, err := p.agent.Owns(ctx, taskID); err != nil {
			return nil, err
		} else if mine {
			return p.agent.Decided(ctx, taskID, res, approved)
		}
	}
	out := tasks.Outcome{Artifacts: agent.Artifacts(res)}
	switch res.Outcome {
	case executor.Completed:
		out.State, out.Note = tasks.StateCompleted, res.Response
	case executor.Failed:
		out.State, out.Note = tasks.StateFailed, res.Reason
	default:
		out.State, out.Note = tasks.StateInputRequired, agent.ConfirmationNote(res)
	}
	return p.tasks.Resolve(ctx, taskID, out)
}

// withdrawHeld denies, as the host, the actions a task that has ended
// still holds (a task held two, and the decision on one ended it): none
// of them can run any more, and none should wait in an operator's list.
// A failure is logged; the records stay for `snapnode deny`.
func (p *proposals) withdrawHeld(ctx context.Context, taskID string, state tasks.State) {
	held, err := p.exec.Pending(ctx, taskID)
	if err != nil {
		p.logger.Warn("held actions of an ended task not withdrawn", "task", taskID, "err", err)
		return
	}
	for _, pa := range held {
		if _, err := p.exec.Deny(ctx, pa.ActionID, executor.Host, "the task ended ("+string(state)+") before this action was decided"); err != nil {
			p.logger.Warn("held action of an ended task not withdrawn", "task", taskID, "action", pa.ActionID, "err", err)
		}
	}
}

// Approve implements admin.Handler: the host approves the action the task
// holds (actionID, when it holds several).
func (p *proposals) Approve(ctx context.Context, taskID, actionID string) (any, error) {
	return p.decide(ctx, taskID, actionID, executor.Host, true, "")
}

// Deny implements admin.Handler.
func (p *proposals) Deny(ctx context.Context, taskID, actionID, reason string) (any, error) {
	return p.decide(ctx, taskID, actionID, executor.Host, false, reason)
}

// decide approves or denies, for approver, the action taskID holds
// (actionID, or the one it holds when "").
func (p *proposals) decide(ctx context.Context, taskID, actionID, approver string, approve bool, reason string) (*tasks.Task, error) {
	// The held action is bound to its task as it is now: a task that no
	// longer waits (canceled, ended) has nothing to approve, and its
	// action never runs. A deny still clears the held record.
	t, err := p.tasks.Task(ctx, taskID)
	if err != nil {
		return nil, err
	}
	if approve && t.Status.State != tasks.StateInputRequired {
		return nil, fmt.Errorf("task %s is %s: the action it held can no longer be approved (deny it to clear it)", taskID, t.Status.State)
	}
	pa, err := p.pending(ctx, taskID, actionID)
	if err != nil {
		return nil, err
	}
	var res *executor.Result
	if approve {
		res, err = p.exec.Approve(ctx, pa.ActionID, approver)
	} else {
		if reason == "" {
			reason = "denied by the operator"
		}
		res, err = p.exec.Deny(ctx, pa.ActionID, approver, reason)
		if err == nil {
			// The task fails with the operator's words.
			res.Reason = fmt.Sprintf("%s Reason: %s", res.Reason, reason)
		}
	}
	if err != nil {
		return nil, err
	}
	if p.pause != nil {
		p.pause(pointDecided)
	}
	if t.Status.State.Terminal() {
		return t, nil // the denial cleared the record; the task stays as it ended
	}
	return p.settle(ctx, taskID, res, approve)
}

// Rollback implements admin.Handler.
func (p *proposals) Rollback(ctx context.Context, actionID string) (any, error) {
	if err := p.exec.Rollback(ctx, actionID); err != nil {
		if errors.Is(err, executor.ErrNotPromoted) && !errors.Is(err, executor.ErrAlreadyRolledBack) {
			return nil, fmt.Errorf("action %s: %w", actionID, err)
		}
		return nil, err
	}
	return map[string]any{"action": actionID, "rolledBack": true}, nil
}

// noBoundIfZero maps a bound of the settings, where 0 is none, to the
// executor's, where a negative value is none (and 0 the default).
func noBoundIfZero[T time.Duration | int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// PolicyEngine loads the operator's policy from path (--policy), or
// returns the built-in default policy when path is empty.
func PolicyEngine(path string) (*policy.Engine, error) {
	if path == "" {
		return policy.Default(), nil
	}
	e, err := policy.Load(path)
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	return e, nil
}

// auditPruneInterval is how often the audit log is pruned to its
// retention (audit.retain_days).
const auditPruneInterval = time.Hour

// startProposals builds the executor on db — the sandbox folder, the
// operator's policy (or the built-in one), the audit log, pruned to its
// retention now and every hour behind checkpoints signed by key — finishes
// what a crash interrupted, and opens the admin socket. Call setTasks
// before the first request; stop closes the socket (waiting for commands
// in progress), stops the pruning and closes what was opened.
func startProposals(ctx context.Context, cfg config.Config, db *sqldb.DB, key *identity.Key, network identity.Network, logger *slog.Logger) (_ *proposals, stop func() error, err error) {
	var closers []func() error
	stop = func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	dir := cfg.SandboxPath()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("node: sandbox: %w", err)
	}
	sb, err := sandbox.Open(dir, sandbox.Limits{})
	if err != nil {
		return nil, nil, fmt.Errorf("node: sandbox: %w", err)
	}
	closers = append(closers, sb.Close)
	if n, err := sb.Sweep(ctx); err != nil {
		return nil, nil, fmt.Errorf("node: sandbox: %w", err)
	} else if n > 0 {
		logger.Info("sandbox: removed temporary files left by an interrupted run", "count", n)
	}
	engine, err := PolicyEngine(cfg.Policy)
	if err != nil {
		return nil, nil, err
	}
	log, err := audit.New(ctx, db, AuditOptions(cfg, key, network))
	if err != nil {
		return nil, nil, fmt.Errorf("node: audit log: %w", err)
	}
	closers = append(closers, log.Close)
	startAuditPruner(ctx, log, logger, &closers)
	holder := policy.NewHolder(engine)
	p := &proposals{policy: holder, logger: logger}
	exec, err := executor.New(ctx, executor.Config{
		DB: db, Sandbox: sb, Policy: holder, Audit: log,
		AuditLevels: auditLevels(cfg.Audit),
		// What derived descriptors state of retention: the host's.
		Defaults: proposal.Defaults{RetainDays: cfg.Audit.RetainDays},
		// The operators are the task service's (set before the first
		// request), so that Reload changes them for both.
		IsOperator:   func(addr string) bool { return p.tasks != nil && p.tasks.IsOperator(addr) },
		MaxClockSkew: cfg.MaxDrift.Duration,
		Facts:        executor.Facts{UserIdle: cfg.Executor.UserIdle, NetworkAvailable: cfg.Executor.NetworkAvailable},
		Quotas:       executor.Quotas{Bytes: cfg.Executor.QuotaBytes, Files: cfg.Executor.QuotaFiles, Dirs: cfg.Executor.QuotaDirs},
		// 0 in the settings is no bound; the executor's is negative.
		SnapshotMaxAge:   noBoundIfZero(cfg.Executor.SnapshotMaxAge.Duration),
		SnapshotMaxBytes: noBoundIfZero(cfg.Executor.SnapshotMaxBytes),
		Logger:           logger.With("part", "executor"),
	})
	if err != nil {
		return nil, nil, fmt.Errorf("node: %w", err)
	}
	if n, err := exec.RecoverInterrupted(ctx); err != nil {
		return nil, nil, fmt.Errorf("node: executor: %w", err)
	} else if n > 0 {
		logger.Warn("executor: restored actions a crash interrupted mid-promotion", "count", n)
	}
	p.exec, p.audit = exec, log
	srv, err := admin.Listen(admin.Path(cfg.DataDir), p, logger.With("part", "admin"))
	if err != nil {
		return nil, nil, fmt.Errorf("node: %w", err)
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(sctx) }()
	closers = append(closers, func() error { cancel(); return <-done })
	logger.Info("proposals: sandbox and policy ready", "sandbox", dir, "policy", engine.Name(), "policy_version", engine.Version())
	return p, stop, nil
}

// AuditOptions are the audit log's options of a node with settings cfg
// and identity key: retention of audit.retain_days, checkpoints signed by
// key. `snapnode audit verify` opens the log with them too, so that it
// accepts only checkpoints the node signed.
func AuditOptions(cfg config.Config, key *identity.Key, network identity.Network) audit.Options {
	return audit.Options{
		Retain: time.Duration(cfg.Audit.RetainDays) * 24 * time.Hour,
		Signer: audit.IdentitySigner(key, network),
	}
}

// auditLevels is the executor's audit level of each risk level, from the
// [audit] settings.
func auditLevels(a config.Audit) executor.AuditLevels {
	return executor.AuditLevels{
		proposal.RiskLow: a.LevelLow, proposal.RiskMedium: a.LevelMedium,
		proposal.RiskHigh: a.LevelHigh, proposal.RiskCritical: a.LevelCritical,
	}
}

// startAuditPruner prunes log to its retention once, before the node
// serves, then every auditPruneInterval in a goroutine that the closer it
// appends stops. A prune that fails (the entries due do not verify: the
// log was tampered with, and pruning never erases that) is logged and the
// node runs on, its log untouched, for `snapnode audit verify` to name.
func startAuditPruner(ctx context.Context, log *audit.Log, logger *slog.Logger, closers *[]func() error) {
	report := func(removed int64, err error) {
		if err != nil {
			logger.Error("audit log: prune", "err", err)
		} else if removed > 0 {
			logger.Info("audit log: pruned entries past retention", "count", removed)
		}
	}
	report(log.Prune(ctx))
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	tick := time.NewTicker(auditPruneInterval)
	done := make(chan struct{})
	go func() {
		defer close(done)
		log.RunPruner(pctx, tick.C, report)
	}()
	*closers = append(*closers, func() error { cancel(); <-done; tick.Stop(); return nil })
}
