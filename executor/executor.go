package executor

import (
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	stdjson "encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/snap"
)

// Host is the approver name of the node's own administrator, who reaches
// Approve and Deny through the local admin socket. It is also the audit
// actor of what the host does by itself (rollbacks).
const Host = "host"

// DefaultRollbackCooldown is Config.RollbackCooldown when it is zero.
const DefaultRollbackCooldown = time.Hour

// DefaultSnapshotMaxAge and DefaultSnapshotMaxBytes are
// Config.SnapshotMaxAge and Config.SnapshotMaxBytes when they are zero: a
// week, and 128 MiB of snapshots per requester (the pre-images of more
// than one whole default workspace).
const (
	DefaultSnapshotMaxAge   = 7 * 24 * time.Hour
	DefaultSnapshotMaxBytes = 128 << 20
)

// Config is what an Executor is made of. DB, Sandbox, Policy and Audit
// are required; the Executor shares them and closes none.
type Config struct {
	// DB is the node's database, shared with the task store and the audit
	// log; the executor keeps its records in executor_actions.
	DB *sqldb.DB
	// Sandbox is the workspace every action reads and changes.
	Sandbox *sandbox.Sandbox
	// Policy judges each action (host rules, then the operator's policy),
	// and says who has the operator role (policy.InForce.Operator): who
	// may approve and deny, and whom the policy sees in
	// Role::"operator". With no operator, only Host approves. A
	// reload puts a new policy and new operators in force together
	// (policy.Holder.Set).
	Policy *policy.Holder
	// Audit receives one entry per step of every action. It must keep its
	// log in DB: the entries of a step commit with the action's record.
	Audit *audit.Log
	// Defaults are the operator's values of derived descriptors (resources,
	// confirmation threshold, audit level). Zero fields take
	// proposal.NewDefaults'. Its NewID, when set, also makes action ids.
	Defaults proposal.Defaults
	// AuditLevels is the audit level of each risk level: what the audit
	// entries of an action hold. Risks it does not name take
	// DefaultAuditLevels'.
	AuditLevels AuditLevels
	// Facts are what the operator says of the host, for the
	// preconditions user_idle and network_available a peer's descriptor
	// may ask for. The zero value reports neither: such a precondition
	// fails.
	Facts Facts
	// RollbackCooldown is how long after a rollback an action that
	// changes one of the paths it restored needs confirmation, whoever
	// proposes it (a second identity cannot send the undone change back
	// in). Zero is DefaultRollbackCooldown; negative disables the
	// cooldown.
	RollbackCooldown time.Duration
	// SnapshotMaxAge is how long the rollback snapshot of a promoted
	// action is kept: an action promoted longer ago can no longer be
	// rolled back (ErrSnapshotPruned). Zero is DefaultSnapshotMaxAge;
	// negative keeps snapshots whatever their age.
	SnapshotMaxAge time.Duration
	// SnapshotMaxBytes bounds the bytes of the snapshots kept for one
	// requester's actions: past it, the oldest are pruned first, at each
	// promotion (one snapshot larger than the bound is pruned at once).
	// Zero is DefaultSnapshotMaxBytes; negative is no bound.
	SnapshotMaxBytes int64
	// MaxClockSkew is how far from Now a peer descriptor's created_at (and
	// each child's) may be; one further off is refused naming the field.
	// Zero or negative is snap.DefaultMaxDrift, the SNAP timestamp window;
	// the node passes its max_drift setting, so that a descriptor and the
	// message carrying it are judged by one window.
	MaxClockSkew time.Duration
	// Quotas cap what each requester may add to the workspace (see
	// Quotas); zero fields are DefaultQuotas'.
	Quotas Quotas
	// Now is the executor's clock (default time.Now).
	Now func() time.Time
	// Logger receives what the executor cannot report to a caller (default:
	// discarded).
	Logger *slog.Logger
}

// Executor carries proposals through validation, policy, the sandbox,
// confirmation, promotion and rollback, and audits every step. It is safe
// for concurrent use; several Executors (in one process or several) may
// share one database.
type Executor struct {
	store     store
	sb        *sandbox.Sandbox
	policy    *policy.Holder
	audit     *audit.Log
	levels    AuditLevels
	defaults  proposal.Defaults
	facts     Facts
	cpu       cpuClock // nil where the host cannot measure CPU time
	cooldown  time.Duration
	snapAge   time.Duration // < 0: no bound
	snapBytes int64         // < 0: no bound
	skew      time.Duration // created_at window; 0 (Check) skips the check
	now       func() time.Time
	logger    *slog.Logger
	newID     func() string
	quotas    Quotas
	// beforeStep, set by tests only, runs before each read or listing of
	// an action and before its staging (a clock moves there).
	beforeStep func()
	// promoteFault and rollbackFault, set by tests only, run in place of
	// the sandbox's promotion and rollback, given the sandbox that would
	// have run them: one left half-way (sandbox.ErrIncomplete) takes a
	// disk that fails twice in a row, which nothing outside package
	// sandbox can cause.
	promoteFault  func(ctx context.Context, sb *sandbox.Sandbox, st *sandbox.Staged) error
	rollbackFault func(ctx context.Context, sb *sandbox.Sandbox, snap *sandbox.Snapshot) error
	// keptLeft says that the sandbox may hold a record of the edits a
	// recovery kept that no recovery reads again (see forgetKeptLeft):
	// set at the start, and where a recovery's commit or the removal of
	// its record failed.
	keptLeft atomic.Bool
	// recovering, set by tests only, runs in RecoverInterruptedWith once
	// an action's record is read (again, under o.Claim) and before
	// anything is done with it: the recovery stands still there.
	recovering func(actionID string)
}

// New returns an Executor on cfg, after bringing its tables up to date.
func New(ctx context.Context, cfg Config) (*Executor, error) {
	switch {
	case cfg.DB == nil:
		return nil, errors.New("executor: Config.DB is required")
	case cfg.Sandbox == nil:
		return nil, errors.New("executor: Config.Sandbox is required")
	case cfg.Policy == nil:
		return nil, errors.New("executor: Config.Policy is required")
	case cfg.Audit == nil:
		return nil, errors.New("executor: Config.Audit is required")
	case cfg.Audit.DB() != cfg.DB:
		return nil, errors.New("executor: Config.Audit must keep its log in Config.DB")
	}
	levels, err := cfg.AuditLevels.filled()
	if err != nil {
		return nil, err
	}
	quotas, err := cfg.Quotas.filled()
	if err != nil {
		return nil, err
	}
	if err := cfg.DB.Migrate(ctx, migrations()); err != nil {
		return nil, fmt.Errorf("executor: %w", err)
	}
	e := &Executor{
		levels:    levels,
		store:     store{db: cfg.DB, d: cfg.DB.Dialect},
		sb:        cfg.Sandbox,
		policy:    cfg.Policy,
		audit:     cfg.Audit,
		defaults:  cfg.Defaults,
		facts:     cfg.Facts,
		cpu:       threadCPU,
		cooldown:  cfg.RollbackCooldown,
		snapAge:   cfg.SnapshotMaxAge,
		snapBytes: cfg.SnapshotMaxBytes,
		skew:      cfg.MaxClockSkew,
		now:       cfg.Now,
		logger:    cfg.Logger,
		newID:     cfg.Defaults.NewID,
		quotas:    quotas,
	}
	e.cooldown = cmp.Or(e.cooldown, DefaultRollbackCooldown)
	e.snapAge = cmp.Or(e.snapAge, DefaultSnapshotMaxAge)
	e.snapBytes = cmp.Or(e.snapBytes, DefaultSnapshotMaxBytes)
	if e.skew <= 0 {
		e.skew = snap.DefaultMaxDrift
	}
	if e.now == nil {
		e.now = time.Now
	}
	if e.logger == nil {
		e.logger = slog.New(slog.DiscardHandler)
	}
	if e.newID == nil {
		e.newID = uuid.NewString
	}
	// An action held longer than the audit log's retention keeps its
	// story there until it is decided.
	cfg.Audit.KeepOpen(e.store.firstOpenEntry)
	e.keptLeft.Store(true) // a crash may have left one
	return e, nil
}

// Outcome is how a Run, Approve or Deny ended, for the task: completed,
// failed or input_required.
type Outcome string

// The outcomes.
const (
	Completed         Outcome = "completed"
	Failed            Outcome = "failed"
	NeedsConfirmation Outcome = "needs_confirmation"
)

// Request is one proposal to carry out.
type Request struct {
	// TaskID is the task the proposal came with ("" for none).
	TaskID string
	// Requester is the proposer's identity, a P2TR address.
	Requester string
	// Data is one proposal or one action descriptor, as received and as
	// proposal.Classify tells them apart.
	Data []byte
	// Also, when set, runs in the transaction of Run's first commit (the
	// one that makes the proposal's reception durable, before anything
	// has an effect): what the caller records about the proposal is
	// durable exactly when the executor's first record of it is. Its
	// error (the caller no longer holds the work, say) fails that commit
	// and Run returns it: nothing of the proposal has an effect. It must
	// write only the caller's own tables.
	Also func(ctx context.Context, tx *sql.Tx) error
	// Then, when set, runs in the transaction of Run's last commit (see
	// Then).
	Then Then
	// PromotedNoWait lets the commit that records a promotion (the record
	// promoted, its audit entry, Then) return before it reaches the disk:
	// it is committed, visible, and safe from a killed process, and the
	// database's next commit that waits makes it durable (see
	// sqldb.DB.WriteNoSync). Set it only for a caller whose next commit
	// on this database comes before anything outside the node relies on
	// the outcome — the agent runtime's next step, say, not a peer's
	// proposal answered at once. What a power cut may then lose is that
	// commit alone: the record stays "promoting" with its snapshot, and
	// RecoverInterrupted restores the files at the next start and records
	// the action as not applied — the state a process killed between the
	// rename and that commit leaves, whatever this field says. The commit
	// before the promotion (the record and its snapshot) always waits.
	PromotedNoWait bool
	// ListFirst, when above 0, makes a LIST_FILES return only the first
	// ListFirst entries by name, and in ListResult.More how many others
	// the folder holds, whatever its size (MaxEntries then does not
	// refuse it). It is the host's own option, for a listing it shows in
	// part (the agent's view of the workspace): nothing a proposer sends
	// sets it.
	ListFirst int
}

// Then is a caller's write that joins the transaction of the last commit
// of a proposal (Run) or of a decision on a held one (ApproveThen,
// DenyThen): the commit that records what became of the action — its
// record promoted, completed, failed, denied or held, and the audit
// entries that say so. It gets the Result as the call returns it, so that
// the caller's record of the outcome (a task's state and artifacts) is
// durable exactly when the executor's is: a crash leaves both or neither.
//
// The contract: Then runs at most once per call, after the executor's own
// statements and inside their transaction; it must write only the
// caller's own tables and must not keep tx or res. Its error fails that
// commit, and the call returns it. A call that ends without a commit of
// its own (an error of the database, ctx done, a promotion left
// incomplete that could not be undone) never runs Then: the caller
// records the outcome afterwards, if there is one. A promotion left
// incomplete and undone at once ends Failed like any other action: Then
// joins the commit that records it. On a promotion, Then's error is
// reported after the files changed (or, for one left incomplete, after
// they were restored): the action's record then stays promoting and is
// finished by RecoverInterrupted, so a Then that can refuse should refuse
// by returning nil and leaving its record for later.
type Then func(ctx context.Context, tx *sql.Tx, res *Result) error

// Result is what became of a proposal.
type Result struct {
	Outcome Outcome
	// ActionID is the host's id of the action: the key of Approve, Deny,
	// Rollback and of the audit entries. ProposalID is the proposer's
	// (the proposal's id, or a descriptor's action_id), kept for
	// traceability; empty when the data was not valid.
	ActionID   string
	ProposalID string
	// Action is the action as the proposer spelled it (read_file,
	// WRITE_FILE), or MULTI_STEP_COMPOSITE.
	Action string
	// Output is the runtime output (docs/conformance.md, Results):
	// {"status":"success",…} when completed, the structured error when failed
	// (a *proposal.Error's JSON, or a Failure's), nil while confirmation is
	// needed.
	Output stdjson.RawMessage
	// Diff is the text of the changes, promoted or to be confirmed: the
	// unified diff of each text file and one line for any other change;
	// "" when there is none.
	Diff string
	// Reason says why confirmation is needed, or why the action failed.
	Reason string
	// Response is FINISH's response, the task's answer.
	Response string
	// DecidedBy is who approved or denied a held action (Approve, Deny):
	// "operator:" and the operator's identity, or Host, as the audit
	// log's actor; "" for any other result.
	DecidedBy string
}

// Errors of Run, Approve, Deny and Rollback.
var (
	// ErrNoPending: no action with this id waits for confirmation (unknown,
	// or already approved, denied or failed).
	ErrNoPending = errors.New("executor: no pending action with this id")
	// ErrNoAction: no action has this id (PendingPage's after).
	ErrNoAction = errors.New("executor: no action with this id")
	// ErrSelfApproval: the proposer may never approve its own proposal.
	ErrSelfApproval = errors.New("executor: the proposer cannot approve its own proposal")
	// ErrNotOperator: only an operator or the host approves or denies.
	ErrNotOperator = errors.New("executor: approver is neither an operator nor the host")
	// ErrNotPromoted: no promoted action with this id can be rolled back
	// (unknown, not promoted, or rolled back already).
	ErrNotPromoted = errors.New("executor: no promoted action with this id")
	// ErrAlreadyRolledBack: the action was rolled back before; it matches
	// ErrNotPromoted too.
	ErrAlreadyRolledBack error = rolledBackError{}
	// ErrSnapshotPruned: the action is promoted, but its rollback
	// snapshot is past the bounds the host keeps (Config.SnapshotMaxAge,
	// Config.SnapshotMaxBytes) and was pruned: it can no longer be rolled
	// back.
	ErrSnapshotPruned = errors.New("executor: the action's rollback snapshot was pruned")
	// ErrBusy: an approval found another action of the same task being
	// promoted (approved a moment before and not yet recorded as done,
	// or left half-way, by a crash or by a disk that failed its undo
	// too, until the next start recovers it):
	// nothing ran, the action waits for a decision again, which is then
	// taken knowing what the other one did.
	ErrBusy = errors.New("executor: another action of the task is being carried out")
	// ErrTakenUp: the call no longer holds the action: it stood still
	// past the cutoff of another process's recovery (reconcile_after),
	// which took it up as interrupted (an approval handed back to the
	// operators, a promotion undone and failed, a rollback completed),
	// whether or not another call has claimed it again since (a claim
	// is the call's own token, not the state alone). Nothing of the
	// call's last commit stays; a promotion or a rollback taken up before
	// it changed the workspace changes nothing of it either.
	ErrTakenUp = errors.New("executor: another process took the action up as interrupted")
	// ErrInvalidIdentity: a requester, approver or task id that cannot be
	// recorded (empty, too long, control characters, not UTF-8).
	ErrInvalidIdentity = errors.New("executor: invalid identity")
)

// maxIdentity bounds requesters, approvers and task ids: with the
// "operator:" prefix they stay within the audit log's limit.
const maxIdentity = 200

func checkIdentity(what, v string, required bool) error {
	bad := (v == "" && required) || len(v) > maxIdentity || !utf8.ValidString(v)
	for _, r := range v {
		if r < 0x20 || r == 0x7f {
			bad = true
		}
	}
	if bad {
		return fmt.Errorf("%w: %s %q", ErrInvalidIdentity, what, v)
	}
	return nil
}

// Run carries out one proposal: audit "received"; validation (a refusal is
// the Result: Failed, Output the structured error, audited "rejected");
// the descriptor; the policy (audited "judged"). A Deny fails with the
// policy error. THINK, FINISH, READ_FILE and LIST_FILES then run at once
// (audited "completed"). Changes are staged in the sandbox (audited
// "sandboxed" with the pre- and post-image hashes) and must stay within
// the declared effects, else they are blocked for good; a Permit promotes
// them (the rollback snapshot stored first; audited "promoted"), a
// Confirm holds them (a durable pending record; audited "held") and
// returns NeedsConfirmation with the reason, the diff and the action id.
//
// Errors are for what is not the proposal's doing: an invalid Requester
// or TaskID, the database, the audit log, ctx.
func (e *Executor) Run(ctx context.Context, req Request) (*Result, error) {
	if err := checkIdentity("requester", req.Requester, true); err != nil {
		return nil, err
	}
	if err := checkIdentity("task", req.TaskID, false); err != nil {
		return nil, err
	}
	actionID := e.newID()
	actor := req.Requester
	j := e.journal(req.TaskID, actionID)
	j.first, j.then, j.promotedNoWait = req.Also, req.Then, req.PromotedNoWait
	format := formatOf(req.Data)
	sum := sha256.Sum256(req.Data)
	j.add(audit.Entry{Actor: actor, Step: audit.StepReceived,
		Detail: detail(receivedDetail{Format: format, Size: len(req.Data), SHA256: hex.EncodeToString(sum[:])})})

	it, err := e.parse(req.Data, actionID)
	if err == nil {
		err = e.arrived(it)
	}
	if err != nil {
		var pe *proposal.Error
		if !errors.As(err, &pe) {
			return nil, fmt.Errorf("executor: validate: %w", err)
		}
		out := mustJSON(pe)
		j.add(audit.Entry{Actor: actor, Step: audit.StepRejected, Decision: string(pe.Code), Reason: pe.Message,
			Detail: detail(errorDetail{Error: out})})
		res := &Result{Outcome: Failed, ActionID: actionID, Output: out, Reason: pe.Message}
		if err := j.last(res).flush(ctx); err != nil {
			return nil, err
		}
		return res, nil
	}
	it.listFirst = req.ListFirst
	res := &Result{ActionID: actionID, ProposalID: it.proposalID, Action: it.action}
	j.setRisk(e.levels, it.risk)
	j.add(audit.Entry{Actor: actor, Step: audit.StepValidated, Decision: "valid", Detail: detail(e.validated(it).fitted())})

	recently, err := e.recentlyRolledBack(ctx, it.changedPaths())
	if err != nil {
		return nil, err
	}
	dec, operator := e.judge(ctx, it, req.Requester, recently)
	j.add(judgedEntry(actor, dec, operator, recently))
	if dec.Effect == policy.Deny {
		f := policyFailure(dec)
		res.Outcome, res.Output, res.Reason = Failed, mustJSON(f), reasonText(dec)
		if err := j.last(res).flush(ctx); err != nil {
			return nil, err
		}
		return res, nil
	}

	now := e.now()
	rec := &record{
		ActionID: actionID, Task: req.TaskID, Requester: req.Requester, ProposalID: it.proposalID,
		Action: it.action, Data: req.Data, Created: now, Updated: now,
	}
	f, err := e.checkPreconditions(ctx, it, req.Requester)
	if err != nil {
		return nil, err
	}
	if f != nil {
		// Recorded as failed, so that a caller resuming after a crash
		// finds it ran (Actions) and does not send it again by itself.
		rec.State, rec.Reason = stateFailed, f.Message
		return e.fail(ctx, j, res, actor, f, func(ctx context.Context, tx *sql.Tx) error {
			return e.store.insertTx(ctx, tx, rec)
		})
	}
	if !it.hasEffects() {
		if dec.Effect == policy.Confirm {
			return e.hold(ctx, j, rec, res, actor, it.confirmReason(dec, nil), nil, true)
		}
		return e.runNoEffects(ctx, j, it, res, actor, nil)
	}
	sg, f, err := e.stage(ctx, it, req.Requester)
	if err != nil {
		return nil, err
	}
	if f != nil {
		return e.fail(ctx, j, res, actor, f, nil)
	}
	j.add(sandboxedEntry(actor, sg.st.Diffs()))
	if dec.Effect == policy.Confirm {
		return e.hold(ctx, j, rec, res, actor, it.confirmReason(dec, sg.st.Diffs()), sg.st.Diffs(), true)
	}
	res, _, err = e.promote(ctx, j, it, rec, res, sg, actor, true)
	return res, err
}

func (e *Executor) validated(it *item) validatedDetail {
	d := validatedDetail{Format: it.format, ProposalID: it.proposalID, Action: it.action, Risk: string(it.risk),
		Paths: it.paths(), Reasoning: clean(it.reasoning, 2048, true), Intent: it.desc.IntentSummary,
		AuditLevel: e.levels.of(it.risk), RequestedLogLevel: clean(it.requestedAudit.LogLevel, 32, false),
		RequestedRetainDays: it.requestedAudit.RetainDays}
	if it.composite {
		d.Steps = len(it.steps)
	}
	return d
}

// judge asks the policy about every request of the item and combines the
// answers: the strictest wins. Every request is judged by the one policy
// and the one list of operators in force when judge began, whatever a
// reload swaps in meanwhile: two policies, each permitting one step of a
// composite, never permit it together, and new operators are never
// judged by the old policy. A Permit becomes a Confirm when a descriptor
// requires confirmation (the host's threshold, or a peer's descriptor
// asking for it). operator is whether requester was judged an operator.
func (e *Executor) judge(ctx context.Context, it *item, requester string, recently bool) (d policy.Decision, operator bool) {
	in := e.policy.InForce()
	operator = in.IsOperator(requester)
	reqs := it.requests(requester, operator, recently)
	ds := make([]policy.Decision, len(reqs))
	for i, r := range reqs {
		ds[i] = in.Engine.Decide(ctx, r)
	}
	d = ds[0]
	if len(ds) > 1 {
		d = policy.Combine(ds...)
	}
	if d.Effect == policy.Permit && len(it.confirm) > 0 {
		d.Effect = policy.Confirm
		d.Reasons = append(append([]string(nil), it.confirm...), d.Reasons...)
	}
	return d, operator
}

func judgedEntry(actor string, d policy.Decision, operator, recently bool) audit.Entry {
	return audit.Entry{Actor: actor, Step: audit.StepJudged, Decision: decisionWord(d.Effect),
		Reason: reasonText(d), PolicyVersion: d.PolicyVersion,
		Detail: detail(judgedDetail{Reasons: nonNil(d.Reasons), DecidedBy: nonNil(d.DecidedBy), Sandbox: d.Sandbox,
			Operator: operator, RecentlyRolledBack: recently})}
}

func sandboxedEntry(actor string, diffs []sandbox.Diff) audit.Entry {
	pre, post := fileHashes(diffs)
	return audit.Entry{Actor: actor, Step: audit.StepSandboxed, Decision: "staged",
		PreHash: pre, PostHash: post, Detail: detail(touched(diffs))}
}

// recentlyRolledBack reports whether a rollback restored one of paths
// within the cooldown, whoever's action it undid and whoever proposes now.
func (e *Executor) recentlyRolledBack(ctx context.Context, paths []string) (bool, error) {
	if e.cooldown < 0 || len(paths) == 0 {
		return false, nil
	}
	t, err := e.store.lastRollback(ctx, paths)
	if err != nil || t.IsZero() {
		return false, err
	}
	return e.now().Sub(t) < e.cooldown, nil
}

// fail ends the action as failed with f, audited "failed" in one
// transaction with op: the write that fails its record (nil when it has
// none).
func (e *Executor) fail(ctx context.Context, j *journal, res *Result, actor string, f *Failure, op txOp) (*Result, error) {
	out := mustJSON(f)
	j.add(audit.Entry{Actor: actor, Step: audit.StepFailed, Decision: f.Code, Reason: f.Message,
		Detail: detail(errorDetail{Error: out})})
	res.Outcome, res.Output, res.Reason = Failed, out, f.Message
	if err := j.last(res).commit(ctx, op); err != nil {
		return nil, err
	}
	return res, nil
}

// runNoEffects runs THINK, FINISH, READ_FILE and LIST_FILES (and a
// composite of THINKs, reads and listings), audited "completed". rec is the record of an
// approved action (approving), nil for one that ran at once: it ends
// completed, or failed, in the transaction of the audit.
func (e *Executor) runNoEffects(ctx context.Context, j *journal, it *item, res *Result, actor string, rec *record) (*Result, error) {
	end := func(state string) txOp {
		if rec == nil {
			return nil
		}
		rec.State, rec.Updated = state, e.now()
		return e.settle(rec, stateApproving)
	}
	failWith := func(f *Failure) (*Result, error) {
		return e.fail(ctx, j, res, actor, f, end(stateFailed))
	}
	var reads map[int]read
	var err error
	wctx, cancel := it.whole(ctx)
	defer cancel()
	start := e.now()
	used, cerr := e.onThread(func() { reads, err = e.readSteps(wctx, e.narrow(it), it) })
	took := e.now().Sub(start)
	if cerr != nil {
		return nil, fmt.Errorf("executor: measure CPU time: %w", cerr)
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return failWith(e.limitFailure(it, err))
	}
	if f := it.durationFailure(took); f != nil {
		return failWith(f)
	}
	if f := it.cpuFailure(used); f != nil {
		return failWith(f)
	}
	var results []*proposal.Output
	for i, s := range it.steps {
		var out *proposal.Output
		switch p := s.p; p.Action.Kind {
		case proposal.KindThink:
			out = proposal.Success(p, nil)
		case proposal.KindFinish:
			out = proposal.Success(p, FinishResult{Response: p.Args.Response})
			res.Response = p.Args.Response
		case proposal.KindReadFile, proposal.KindListFiles:
			out = reads[i].out
		default:
			return nil, fmt.Errorf("executor: %s has effects", p.Action.Kind)
		}
		results = append(results, out)
	}
	var out *proposal.Output
	if it.composite {
		out = proposal.Success(&proposal.Proposal{Action: proposal.Action{Spelling: it.action}}, CompositeResult{Steps: results})
	} else {
		out = results[0]
	}
	j.add(audit.Entry{Actor: actor, Step: audit.StepCompleted, Decision: "done"})
	res.Outcome, res.Output = Completed, mustJSON(out)
	if err := j.last(res).commit(ctx, end(stateCompleted)); err != nil {
		return nil, err
	}
	return res, nil
}

// read is what a READ_FILE or LIST_FILES step found.
type read struct {
	out  *proposal.Output
	path string // the file read, "" for a listing
	hash string // the SHA-256 of the content read
}

// readSteps runs the item's READ_FILE and LIST_FILES steps on sb, each
// on the workspace as it is (nothing staged is seen); the map has them by
// step. An error is the sandbox's, or ctx's.
func (e *Executor) readSteps(ctx context.Context, sb *sandbox.Sandbox, it *item) (map[int]read, error) {
	reads := map[int]read{}
	for i, s := range it.steps {
		if e.beforeStep != nil {
			e.beforeStep()
		}
		switch p := s.p; p.Action.Kind {
		case proposal.KindReadFile:
			b, err := sb.Read(ctx, p.Args.Path)
			if err != nil {
				return nil, err
			}
			sum := sha256.Sum256(b)
			reads[i] = read{out: proposal.Success(p, readResult(b)), path: p.Args.Path, hash: hex.EncodeToString(sum[:])}
		case proposal.KindListFiles:
			var (
				entries []sandbox.Entry
				more    int
				err     error
			)
			if it.listFirst > 0 {
				entries, more, err = sb.ListFirst(ctx, p.Args.Path, it.listFirst)
			} else {
				entries, err = sb.List(ctx, p.Args.Path)
			}
			if err != nil {
				return nil, err
			}
			reads[i] = read{out: proposal.Success(p, ListResult{Entries: markWildcards(nonNil(entries)), More: more})}
		}
	}
	return reads, nil
}

// narrow is the sandbox with the item's caps on duration.
func (e *Executor) narrow(it *item) *sandbox.Sandbox {
	return e.sb.Narrow(it.limits())
}

// staging is an item's changes staged, with the sandbox that staged them
// and what the item's read and list steps found, by step.
type staging struct {
	st    *sandbox.Staged
	sb    *sandbox.Sandbox
	reads map[int]read
}

// stage runs the item's reads and lists (a composite's), stages its
// changes and checks them against its declared effects. A file read that
// a later step changes must still hold, at staging, what was read
// (ErrChanged otherwise): what the read returned is what the change
// replaces. The changes must keep requester within its quotas. A refusal
// of the sandbox or of the checks is the Failure; the error is for ctx
// and the database.
func (e *Executor) stage(ctx context.Context, it *item, requester string) (*staging, *Failure, error) {
	refused := func(err error) (*staging, *Failure, error) {
		if ctx.Err() != nil {
			return nil, nil, ctx.Err()
		}
		return nil, e.limitFailure(it, err), nil
	}
	changes, written := it.changes()
	if max := it.resources.MaxDiskMB << 20; max > 0 && written > max {
		return nil, sandboxFailure(&sandbox.LimitError{Limit: "disk", Max: max, Got: written}), nil
	}
	if written > it.memory()/2 {
		return nil, it.memoryFailure(written), nil
	}
	sb := e.narrow(it)
	var reads map[int]read
	var st *sandbox.Staged
	var err error
	wctx, cancel := it.whole(ctx)
	defer cancel()
	start := e.now()
	used, cerr := e.onThread(func() {
		if reads, err = e.readSteps(wctx, sb, it); err != nil {
			return
		}
		if e.beforeStep != nil {
			e.beforeStep()
		}
		if st, err = sb.Stage(wctx, changes); err != nil {
			return
		}
		err = st.WithinEffects(it.effects())
	})
	took := e.now().Sub(start)
	if cerr != nil {
		return nil, nil, fmt.Errorf("executor: measure CPU time: %w", cerr)
	}
	if err != nil {
		return refused(err)
	}
	if f := it.durationFailure(took); f != nil {
		return nil, f, nil
	}
	if f := it.cpuFailure(used); f != nil {
		return nil, f, nil
	}
	if err := readsHold(reads, st.Diffs()); err != nil {
		return refused(err)
	}
	if err := e.overQuota(ctx, requester, st.Delta()); err != nil {
		if !errors.Is(err, sandbox.ErrLimit) {
			return nil, nil, err
		}
		return refused(err)
	}
	return &staging{st: st, sb: sb, reads: reads}, nil, nil
}

// readsHold checks that each file read is, in the staged diffs, replaced
// from the content the read returned: a file changed between the read and
// the staging is ErrChanged.
func readsHold(reads map[int]read, diffs []sandbox.Diff) error {
	for _, d := range diffs {
		for _, r := range reads {
			if r.path == d.Path && r.hash != d.Before.SHA256 {
				return &sandbox.OpError{Op: "read", Path: d.Path, Err: sandbox.ErrChanged}
			}
		}
	}
	return nil
}

// hold keeps the action for confirmation: audited "held", with a pending
// record (inserted when fresh, else updated from approving).
func (e *Executor) hold(ctx context.Context, j *journal, rec *record, res *Result, actor, reason string, diffs []sandbox.Diff, fresh bool) (*Result, error) {
	rec.State, rec.Reason, rec.Diff, rec.PreImages = statePending, reason, formatDiff(diffs), preImages(diffs)
	rec.Snapshot, rec.Updated = nil, e.now()
	j.add(audit.Entry{Actor: actor, Step: audit.StepHeld, Decision: "confirm", Reason: reason})
	res.Outcome, res.Output, res.Diff, res.Reason = NeedsConfirmation, nil, rec.Diff, reason
	if err := e.save(ctx, j.last(res), rec, stateApproving, fresh, "while held"); err != nil {
		return nil, err
	}
	// Someone is waiting: the operator must be able to see it in the log.
	e.logger.Info("action held for an operator", "task", rec.Task, "action", rec.ActionID, "kind", rec.Action,
		"risk", string(j.risk), "requester", rec.Requester, "reason", reason,
		"decide", fmt.Sprintf("snapnode approve %s --action %s (or deny)", rec.Task, rec.ActionID))
	return res, nil
}

// promote stores the snapshot, promotes st and records it: one commit
// before the sandbox changes (the audit entries so far, the record with
// its snapshot), one after (the record promoted, its audit entry). A
// promotion refused because a touched path changed since staging applies
// nothing: a fresh action fails (the proposer may simply send it again, a
// moment later); an approved one reports changed, its record back in the
// state it was found in, to be staged again.
func (e *Executor) promote(ctx context.Context, j *journal, it *item, rec *record, res *Result, sg *staging, actor string, fresh bool) (_ *Result, changed bool, _ error) {
	st, sb := sg.st, sg.sb
	diffs := st.Diffs()
	snap, err := stdjson.Marshal(st.Snapshot())
	if err != nil {
		return nil, false, fmt.Errorf("executor: snapshot: %w", err)
	}
	delta := st.Delta()
	from, held := rec.State, *rec
	if fresh {
		// Inserted promoting: held under a token of this call's, as
		// an approval's claim holds its record.
		rec.Claim = newClaim()
	}
	rec.State, rec.Snapshot, rec.Diff, rec.PreImages, rec.Updated = statePromoting, snap, formatDiff(diffs), preImages(diffs), e.now()
	rec.SnapshotAt, rec.Growth = rec.Updated, growth(delta)
	// The audit entries so far and the record with its snapshot and its
	// growth, in one commit: both are durable before anything changes.
	// The requester's quotas are checked again in it (quotaTx): another
	// action of the same requester, in this process or another, may have
	// been promoted since this one was staged, or be promoting now. The
	// new file contents are written and synced beside their targets
	// meanwhile (no order between the two; the renames wait for both).
	prepared := e.prepare(ctx, sb, st)
	err = e.saveChecked(ctx, j, rec, from, fresh, "before promotion", e.quotaTx(rec.Requester, rec.ActionID, delta))
	p := <-prepared
	if p != nil {
		defer p.Discard()
	}
	if refused := (*refusal)(nil); errors.As(err, &refused) {
		// Past a quota: nothing of the commit stays, and the action
		// fails as it would have had the quota been passed before.
		*rec = held
		f := sandboxFailure(refused.err)
		if fresh {
			r, err := e.fail(ctx, j, res, actor, f, nil)
			return r, false, err
		}
		r, err := e.failRecord(ctx, j, rec, res, actor, f)
		return r, false, err
	}
	if err != nil {
		return nil, false, err
	}

	// The sandbox checks, holding its locks, that the record is still
	// this call's before it changes anything: see stillHeld.
	sb = sb.Checked(e.stillHeld(rec.ActionID, statePromoting, rec.Claim))
	var perr error
	switch {
	case e.promoteFault != nil:
		perr = e.promoteFault(ctx, sb, st)
	case p != nil:
		_, perr = sb.PromotePrepared(ctx, p)
	default:
		_, perr = sb.Promote(ctx, st)
	}
	// From here on the outcome must be recorded whatever becomes of ctx.
	bg := context.WithoutCancel(ctx)
	if errors.Is(perr, ErrTakenUp) {
		// Taken up by another process's recovery before anything
		// changed: nothing was written, and the record is the
		// recovery's to settle.
		return nil, false, perr
	}
	if perr != nil {
		if errors.Is(perr, sandbox.ErrIncomplete) {
			r, err := e.undoIncomplete(bg, j, rec, res, perr)
			return r, false, err
		}
		// Nothing was applied. A changed file sends an approval back to
		// the operator (the record returns to the state it came from);
		// anything else fails the action, in one commit with its record.
		again := errors.Is(perr, sandbox.ErrChanged)
		rec.Snapshot, rec.Updated = nil, e.now()
		if again && !fresh {
			rec.State = from
			ok, err := e.store.update(bg, rec, statePromoting)
			if err != nil {
				return nil, false, err
			}
			if !ok {
				return nil, false, fmt.Errorf("%w: action %s is no longer %s", ErrTakenUp, rec.ActionID, statePromoting)
			}
			return res, true, nil
		}
		e.noWorkspace(perr)
		f := sandboxFailure(perr)
		if again {
			f = sandboxFailure(sandbox.ErrChanged)
		}
		rec.State = stateFailed
		r, err := e.fail(bg, j, res, actor, f, e.settle(rec, statePromoting))
		return r, false, err
	}
	rec.State, rec.Updated = statePromoted, e.now()
	pre, post := fileHashes(diffs)
	j.add(audit.Entry{Actor: actor, Step: audit.StepPromoted, Decision: "promoted", PreHash: pre, PostHash: post,
		Detail: detail(touched(diffs))})
	// The record promoted, its audit entry, the requester's usage and, as
	// the requester's snapshots grow here, those past the bounds pruned, in
	// one commit.
	settle, pruned := e.settle(rec, statePromoting), 0
	res.Outcome, res.Output, res.Diff, res.Reason = Completed, mustJSON(successOutput(it, sg.reads)), rec.Diff, ""
	j.noWait = j.promotedNoWait
	err = j.last(res).commit(bg, func(ctx context.Context, tx *sql.Tx) error {
		if err := settle(ctx, tx); err != nil {
			return err
		}
		if err := e.store.countTx(ctx, tx, rec.Requester, delta); err != nil {
			return err
		}
		var err error
		pruned, err = e.store.pruneSnapshotsTx(ctx, tx, rec.Requester, e.now(), e.snapshotCutoff(), e.snapBytes)
		return err
	})
	if err != nil {
		return nil, false, fmt.Errorf("executor: promoted %s but could not record it: %w", rec.ActionID, err)
	}
	if pruned > 0 {
		e.logger.Info("executor: pruned rollback snapshots past the bounds", "count", pruned, "requester", rec.Requester)
	}
	return res, false, nil
}

// stillHeld is the check (see sandbox.Checked) that the record of
// actionID is still in the held state state under the claim token token,
// ErrTakenUp otherwise, that a call runs in the sandbox before it changes
// the workspace for the record. The sandbox runs it holding the locks
// that a recovery's sandbox.Recover takes too, and a recovery takes the
// record over (a new token) before its Recover: a call that stood still
// before its change, while a recovery took the action up, changes
// nothing, rather than writing over what the recovery settled (or what
// another action promoted since) and then finding its commit refused.
func (e *Executor) stillHeld(actionID, state, token string) func(context.Context) error {
	return func(ctx context.Context) error {
		ok, err := e.store.holds(ctx, actionID, state, token)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: action %s is no longer %s under this call's claim, before its sandbox changed", ErrTakenUp, actionID, state)
		}
		return nil
	}
}

// undoIncomplete undoes at once a promotion the sandbox left half-way
// (perr, a sandbox.ErrIncomplete: some paths changed, others not, and
// putting the first back failed too), as RecoverInterrupted would at the
// next start (see undo): each path back to its pre-image from the stored
// snapshot, and the action failed ("interrupted during promotion; its
// effects were undone", audited "failed", decision "recovered") in one
// commit with the caller's Then; the Result says so. Left as it was, the
// workspace would stay half-promoted and the approvals of the task's
// other actions refused (ErrBusy) until the next start. Should the undo
// fail too (the disk still failing), the record stays promoting with its
// snapshot, for RecoverInterrupted, and the error says both.
func (e *Executor) undoIncomplete(ctx context.Context, j *journal, rec *record, res *Result, perr error) (*Result, error) {
	f := sandboxFailure(perr)
	f.Message = ReasonInterrupted
	res.Outcome, res.Output, res.Reason = Failed, mustJSON(f), f.Message
	if err := e.settleHalfWay(ctx, j.last(res), rec, "promote", "undoing", perr); err != nil {
		return nil, err
	}
	return res, nil
}

// settleHalfWay settles rec, a promotion or a rollback (op) that the
// sandbox left half-way (cause, a sandbox.ErrIncomplete), with undo, the
// entries j holds in its commit. Should that fail too, rec stays as it
// is, for RecoverInterrupted, and the error names both failures; doing
// says what undo was doing, in it. One that another process's recovery
// took up meanwhile is that recovery's to settle: the error names the
// cause and ErrTakenUp.
func (e *Executor) settleHalfWay(ctx context.Context, j *journal, rec *record, op, doing string, cause error) error {
	e.logger.Error("executor: "+op+" left half-way; "+doing+" it", "action", rec.ActionID, "err", cause)
	state := rec.State // undo moves rec on before its commit
	err := e.undo(ctx, j, rec)
	if errors.Is(err, ErrTakenUp) {
		// Another process's recovery took it up meanwhile, and settles it.
		return fmt.Errorf("executor: %s %s: %w; %s it: %w", op, rec.ActionID, cause, doing, err)
	}
	if err != nil {
		e.logger.Error("executor: "+op+" left half-way not settled (its undo or its record failed); RecoverInterrupted settles it at the next start",
			"action", rec.ActionID, "err", err)
		return fmt.Errorf("executor: %s %s: %w; %s it failed too, or recording it did (the action stays %s until RecoverInterrupted): %w",
			op, rec.ActionID, cause, doing, state, err)
	}
	return nil
}

// prepare writes st's new file contents ahead of its promotion
// (sandbox.Prepare), on a goroutine of its own, and sends what it prepared
// on the channel returned, which the caller must receive from: nil if it
// could not, and the promotion writes them itself (and meets the same
// error, if it lasts, as the failure of the promotion).
func (e *Executor) prepare(ctx context.Context, sb *sandbox.Sandbox, st *sandbox.Staged) <-chan *sandbox.Prepared {
	out := make(chan *sandbox.Prepared, 1)
	go func() {
		p, err := sb.Prepare(ctx, st)
		if err != nil {
			e.logger.Debug("executor: could not write ahead; the promotion writes", "err", err)
			p = nil
		}
		out <- p
	}()
	return out
}

// snapshotCutoff is when a snapshot must have been stored after to be
// kept (zero: no age bound).
func (e *Executor) snapshotCutoff() time.Time {
	if e.snapAge < 0 {
		return time.Time{}
	}
	return e.now().Add(-e.snapAge)
}

// save stores rec, inserted when fresh, else updated from state from, in
// one commit with the entries j holds: before what follows (the sandbox's
// promotion, the wait for an operator) both are durable. A record that
// another call moved on, or that is no longer held under rec's claim
// token, is an error (ErrTakenUp: only another process's recovery moves a
// record on from approving, and a later claim of it takes a new token):
// the entries are committed
// all the same, unless the commit is the journal's last, carrying the
// caller's Then, which then fails whole; a record that could not be
// written at all leaves them to be appended on their own. when says when,
// in errors.
func (e *Executor) save(ctx context.Context, j *journal, rec *record, from string, fresh bool, when string) error {
	return e.saveChecked(ctx, j, rec, from, fresh, when, nil)
}

// saveChecked is save with check (nil: none) first in its transaction:
// its error fails the commit, and a refusal (see refusal) leaves the
// journal as it was.
func (e *Executor) saveChecked(ctx context.Context, j *journal, rec *record, from string, fresh bool, when string, check txOp) error {
	ok, last := true, j.final != nil
	moved := fmt.Errorf("%w: action %s changed state %s", ErrTakenUp, rec.ActionID, when)
	err := j.commitSteps(ctx, func(ctx context.Context, tx *sql.Tx) error {
		if check != nil {
			if err := check(ctx, tx); err != nil {
				return err
			}
		}
		if fresh {
			return e.store.insertTx(ctx, tx, rec)
		}
		var err error
		ok, err = e.store.updateTx(ctx, tx, rec, from)
		if err == nil && !ok && last {
			// The caller's Then must not record an outcome the record
			// does not have: nothing of this commit stays.
			return moved
		}
		return err
	})
	if err != nil {
		return err
	}
	if !ok {
		return moved
	}
	return nil
}

// settle is the write that moves r on from state from to what r says now,
// for the transaction of a journal's commit, under r's claim token. A
// record another call moved on, or holds under another token, is left
// alone, and the commit fails (ErrTakenUp): nothing of it stays (the
// caller's Then, the usage counted), for this call no longer holds the
// action. Only another process's recovery moves a record on from the
// states settle starts from (an approval, a promotion or a rollback that
// stood still past its cutoff, taken for a crashed one); a claim after it
// (the action approved again) holds it under a token of its own.
func (e *Executor) settle(r *record, from string) txOp {
	return func(ctx context.Context, tx *sql.Tx) error {
		ok, err := e.store.updateTx(ctx, tx, r, from)
		if err == nil && !ok {
			return fmt.Errorf("%w: action %s is no longer %s", ErrTakenUp, r.ActionID, from)
		}
		return err
	}
}

// successOutput is the output of an item whose changes were promoted,
// with what its reads found.
func successOutput(it *item, reads map[int]read) *proposal.Output {
	var outs []*proposal.Output
	for i, s := range it.steps {
		if r, ok := reads[i]; ok {
			outs = append(outs, r.out)
			continue
		}
		a := s.p.Args
		var r any
		switch s.p.Action.Kind {
		case proposal.KindWriteFile:
			sum := sha256.Sum256([]byte(a.Content))
			r = WriteResult{Path: a.Path, Size: int64(len(a.Content)), SHA256: hex.EncodeToString(sum[:])}
		case proposal.KindCreateDirectory, proposal.KindDeleteFile:
			r = PathResult{Path: a.Path}
		case proposal.KindRenameFile:
			r = RenameResult{Source: a.Source, Destination: a.Destination}
		}
		outs = append(outs, proposal.Success(s.p, r))
	}
	if !it.composite {
		return outs[0]
	}
	return proposal.Success(&proposal.Proposal{Action: proposal.Action{Spelling: it.action}}, CompositeResult{Steps: outs})
}

// rolledBackError is ErrAlreadyRolledBack: its own words, and an
// ErrNotPromoted for callers that only ask whether a rollback can run.
type rolledBackError struct{}

func (rolledBackError) Error() string        { return "rolled back already" }
func (rolledBackError) Is(target error) bool { return target == ErrNotPromoted }
