package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/snapnode/snapnode/executor"
	"github.com/snapnode/snapnode/executor/audit"
	"github.com/snapnode/snapnode/executor/policy"
	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/executor/sandbox"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/periodic"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
)

// noBoundIfZero maps a bound of the settings, where 0 is none, to the
// executor's, where a negative value is none (and 0 the default).
func noBoundIfZero[T time.Duration | int64](v T) T {
	if v == 0 {
		return -1
	}
	return v
}

// PolicyEngine loads the operator's policy from path (--policy) for a
// node on network (Network), or returns the built-in default policy when
// path is empty.
func PolicyEngine(path string, network identity.Network) (*policy.Engine, error) {
	if path == "" {
		return policy.Default(), nil
	}
	e, err := policy.Load(path, policy.WithNetwork(network))
	if err != nil {
		return nil, fmt.Errorf("node: %w", err)
	}
	return e, nil
}

// auditPruneInterval is how often the audit log is pruned to its
// retention (audit.retain_days).
const auditPruneInterval = time.Hour

// executorPart is the executor the node carries proposals out with, and
// what it was built on that other parts use: the policy holder (the
// policy and the operators, swapped together on reload) and the audit log (read by the console).
type executorPart struct {
	exec   *executor.Executor
	policy *policy.Holder
	audit  *audit.Log
}

// startExecutor builds the executor on db — the sandbox folder, the
// operator's policy (or the built-in one), the audit log, pruned to its
// retention now and every hour behind checkpoints signed by key, its head
// sealed by key every hour and at a clean stop — and
// finishes the promotions a crash interrupted (on PostgreSQL, those
// older than reconcile_after). bind is called once the audit log passed
// its check at start, before anything is written to it (the record of
// the node's address, see recordIdentity). The executor's policy holder
// holds the policy with the operators of cfg, who may decide on held
// actions and whom the policy sees in Role::"operator": Reload puts new
// ones in force together. stop stops the pruning and closes what was
// opened.
func startExecutor(ctx context.Context, cfg config.Config, db *sqldb.DB, key *identity.Key, network identity.Network, bind func(context.Context) error, o options, logger *slog.Logger) (_ *executorPart, stop func() error, err error) {
	var closers []func() error
	// closeAll, not the result stop, which an error's return sets to nil.
	closeAll := func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		return errors.Join(errs...)
	}
	defer func() {
		if err != nil {
			closeAll()
		}
	}()
	dir := cfg.SandboxPath()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("node: sandbox: %w", err)
	}
	if err := sandboxApart(cfg, dir); err != nil {
		return nil, nil, err
	}
	sb, err := sandbox.Open(dir, sandbox.Limits{MaxTotalBytes: cfg.Executor.WorkspaceMaxBytes, MaxTotalEntries: cfg.Executor.WorkspaceMaxEntries,
		MaxDuration: o.sandboxDuration})
	if err != nil {
		return nil, nil, fmt.Errorf("node: sandbox: %w", err)
	}
	closers = append(closers, sb.Close)
	// A workspace too large to walk within the sandbox's time limit does
	// not stop the start: the temporary files left are never counted nor
	// read, and the next start removes them.
	if n, err := sb.Sweep(ctx); errors.Is(err, sandbox.ErrLimit) && ctx.Err() == nil {
		logger.Warn("sandbox: temporary files left by an interrupted run not all removed: the walk of the workspace was cut short; the next start tries again",
			"removed", n, "err", err)
	} else if err != nil {
		return nil, nil, fmt.Errorf("node: sandbox: %w", err)
	} else if n > 0 {
		logger.Info("sandbox: removed temporary files left by an interrupted run", "count", n)
	}
	startWorkspaceRecount(ctx, sb, loopTiming{o.loopInterval(workspaceRecountInterval), cfg.BackgroundTimeout.Duration}, logger, &closers)
	engine, err := PolicyEngine(cfg.Policy, network)
	if err != nil {
		return nil, nil, err
	}
	log, err := audit.New(ctx, db, AuditOptions(cfg, key, network))
	if err != nil {
		return nil, nil, fmt.Errorf("node: audit log: %w", err)
	}
	closers = append(closers, log.Close)
	if err := checkSealRecord(ctx, log, cfg.SealRecordPath(), logger); err != nil {
		return nil, nil, err
	}
	if err := bind(ctx); err != nil {
		return nil, nil, err
	}
	startAuditSealer(ctx, log, loopTiming{o.loopInterval(auditSealInterval), cfg.BackgroundTimeout.Duration}, logger, &closers)
	holder := &policy.Holder{}
	holder.Set(policy.InForce{Engine: engine, Operator: policy.Operators(cfg.Operators)})
	exec, err := executor.New(ctx, executor.Config{
		DB: db, Sandbox: sb, Policy: holder, Audit: log,
		AuditLevels: auditLevels(cfg.Audit),
		// What derived descriptors state of retention: the host's.
		Defaults:     proposal.Defaults{RetainDays: cfg.Audit.RetainDays},
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
	// Once the executor is on the log: its pruning stops before the
	// first entry of an action still open (audit.Log.KeepOpen).
	startAuditPruner(ctx, log, loopTiming{o.loopInterval(auditPruneInterval), cfg.BackgroundTimeout.Duration}, logger, &closers)
	// Before anything may run an action: a promotion a crash interrupted
	// is undone. On a shared database only the old ones: a younger one
	// may be a replica's, in progress (the reconcile passes take it up
	// once it is old enough).
	if n, err := proposals.RecoverInterrupted(ctx, exec, proposals.DBClaims(db), startCutoff(db, cfg.ReconcileAfter.Duration)); err != nil {
		return nil, nil, fmt.Errorf("node: executor: %w", err)
	} else if n > 0 {
		logger.Warn("executor: restored actions a crash interrupted mid-promotion", "count", n)
	}
	logger.Info("proposals: sandbox and policy ready", "sandbox", dir, "policy", engine.Name(), "policy_version", engine.Version())
	return &executorPart{exec: exec, policy: holder, audit: log}, closeAll, nil
}

// workspaceRecountInterval is how often the workspace is counted again
// (sandbox.Recount): how long a file copied into it or removed from
// outside goes uncounted by its caps.
const workspaceRecountInterval = time.Minute

// startWorkspaceRecount counts the workspace now, on its own goroutine
// (a large folder must not hold the node's start), then every interval
// (see every): the running count the sandbox checks its caps with stays
// exact for the changes of actions, and the recount picks up what an
// operator copied in or removed, away from the actions, each of which
// would otherwise have to walk the folder within its own time limit.
func startWorkspaceRecount(ctx context.Context, sb *sandbox.Sandbox, at loopTiming, logger *slog.Logger, closers *[]func() error) {
	every(ctx, "workspace recount", at, false, func(ctx context.Context, _ time.Time) (sandbox.Counts, error) {
		return sb.Recount(ctx)
	}, func(c sandbox.Counts, err error) {
		if errors.Is(err, sandbox.ErrPartialCount) {
			logger.Warn("sandbox: the workspace counted in part, its walk cut short by background_timeout: workspace_max_bytes and workspace_max_entries are enforced from this partial count (a lower bound) until a count completes",
				"bytes", c.Bytes, "files", c.Files, "dirs", c.Dirs, "err", err)
			return
		}
		if err != nil {
			logger.Warn("sandbox: count the workspace", "err", err)
			return
		}
		logger.Debug("sandbox: workspace counted", "bytes", c.Bytes, "files", c.Files, "dirs", c.Dirs)
	}, closers)
}

// startForgetting deletes the executor's records of ended actions last
// changed more than retention ago (the node's task retention; 0 keeps
// them) whose task is gone (see Executor.Forget), now and every
// auditPruneInterval (see every): a task's file contents and diffs go with
// the task.
func startForgetting(ctx context.Context, exec *executor.Executor, svc *tasks.Service, retention time.Duration, at loopTiming, logger *slog.Logger, closers *[]func() error) {
	if retention <= 0 {
		return
	}
	gone := func(ctx context.Context, taskID string) (bool, error) {
		_, err := svc.Task(ctx, taskID)
		if snap.CodeOf(err) == snap.CodeTaskNotFound {
			return true, nil
		}
		return false, err
	}
	every(ctx, "forgetting of ended actions", at, false, func(ctx context.Context, now time.Time) (int, error) {
		return exec.Forget(ctx, now.Add(-retention), gone)
	},
		func(n int, err error) {
			if err != nil {
				logger.Warn("executor: forgetting ended actions", "err", err)
			} else if n > 0 {
				logger.Info("executor: forgot the records of ended actions whose task the retention deleted", "count", n, "older_than", retention)
			}
		}, closers)
}

// AuditOptions are the audit log's options of a node with settings cfg
// and identity key: retention of audit.retain_days, checkpoints and seals
// signed by key, a seal every auditSealEvery entries, the last seal
// recorded in the data folder (cfg.SealRecordPath). `snapnode audit verify` opens the log with them
// too, so that it accepts only checkpoints the node signed.
func AuditOptions(cfg config.Config, key *identity.Key, network identity.Network) audit.Options {
	return audit.Options{
		Retain:     time.Duration(cfg.Audit.RetainDays) * 24 * time.Hour,
		Signer:     audit.IdentitySigner(key, network),
		SealRecord: cfg.SealRecordPath(),
		SealEvery:  auditSealEvery,
	}
}

// checkSealRecord is the start's check of the audit log against the
// node's record of its last seal (record) and of the chain's last seal
// (audit.Log.CheckSealRecord): a chain that does not hold the recorded
// seal (cut after the seal before it, or rewritten, while the node was
// stopped), whose last seal does not hold (the chain rewritten below
// it), or that does not end where its head record says (the entries after
// the last seal deleted), with or without a record, stops the start: the node does not
// append to, seal or prune a log it has evidence was tampered with, and
// none can seal after a seal that does not hold. A record that cannot be
// read stops it too (the node cannot check the log against it), told
// apart: it is no evidence of tampering (audit.ErrSealRecord). The error
// says how to go on once the operator knows why (a database restored
// from an older copy than the data folder); a record whose seal the
// chain holds, signed by another key than the node's (its key file
// changed), or without a record a chain whose last seal is so signed, is
// told as such (audit.ErrOtherKey). An empty log, or one never sealed,
// passes: the first start on a new database (an empty log without a
// record is said at debug level only: nothing to tell the operator).
func checkSealRecord(ctx context.Context, log *audit.Log, record string, logger *slog.Logger) error {
	err := log.CheckSealRecord(ctx)
	_, rerr := os.Stat(record)
	noRecord := errors.Is(rerr, os.ErrNotExist)
	var ve *audit.VerifyError
	switch {
	case err == nil:
		if !noRecord {
			return nil
		}
		// A new log needs no record yet: a first start is no news.
		if h, err := log.Head(ctx); err == nil && h.Seq == 0 {
			logger.Debug("audit log: no record of a last seal yet, as at a first start; the next seal writes one", "record", record)
			return nil
		}
		logger.Info("audit log: no record of a last seal yet; the next seal writes one", "record", record)
		return nil
	case errors.As(err, &ve) && errors.Is(err, audit.ErrOtherKey):
		// The chain holds the recorded seal (or, without a record, its
		// last seal), signed by another key: not a cut chain, and moving
		// the record aside would not help (the node's key cannot seal or
		// prune a log another key sealed).
		keep, aside := "this one with "+record, "even with the record moved aside"
		if noRecord {
			keep, aside = "this one", "with or without a record"
		}
		return fmt.Errorf("node: audit log: %w; the node does not start on it: the log was sealed with another key (the node's key changed since, or this data is another node's). "+
			"Start it again with the key of %s (the key file it had: key_file, --key or SNAPNODE_KEY); "+
			"or, if %s is meant to replace that key, knowing that this log stays %s's history, start it on a new database (another data folder, or another PostgreSQL database) "+
			"and keep %s (`snapnode audit verify --address %s` checks it): %s cannot seal or prune a log %s sealed, %s",
			err, ve.Signer, ve.Want, ve.Signer, keep, ve.Signer, ve.Want, ve.Signer, aside)
	case errors.As(err, &ve) && ve.Kind == audit.KindRecord:
		return fmt.Errorf("node: audit log: %w; the node does not start on it. Run `snapnode audit verify` and find out why; "+
			"if the database was restored from a copy older than %s (pg_restore of an older dump), or you started a new database in this data folder on purpose, move that file aside, keeping it, and start again: the node then takes the chain as it is and records its next seal", err, record)
	case errors.As(err, &ve) && (ve.Kind == audit.KindTruncated || ve.Kind == audit.KindExtra || ve.Kind == audit.KindHead):
		// The chain does not end where its head record says: entries
		// after the last seal were deleted (or added) behind the node's
		// back; appending would chain across the gap for good.
		return fmt.Errorf("node: audit log: %w; the node does not start on it: the chain does not end where its head record says, so entries were deleted or added after its last seal while the node was stopped, and an entry appended now would leave a gap no seal could cover. "+
			"Run `snapnode audit verify` to see the first entry that does not hold; keep this database as evidence, and restore it from a backup you trust (see `snapnode backup`) or start the node on a new database (another data folder, or another PostgreSQL database)", err)
	case errors.Is(err, audit.ErrTampered):
		// The chain's last seal does not hold: no record moved aside
		// changes that, and no seal can follow it.
		return fmt.Errorf("node: audit log: %w; the node does not start on it: the log was changed after the chain's last seal was written, and no seal can follow one that does not hold. "+
			"Run `snapnode audit verify` to see the first entry that does not hold; keep this database as evidence, and restore it from a backup you trust (see `snapnode backup`) or start the node on a new database (another data folder, or another PostgreSQL database). "+
			"Moving %s aside does not help: the node checks the chain's last seal with or without it", err, record)
	case errors.Is(err, audit.ErrSealRecord):
		return fmt.Errorf("node: audit log: %w; the node does not start: its record of the last seal it wrote cannot be read, and it checks its audit log against it. "+
			"This is not evidence that the log was changed. Check %s: its owner and permissions (the node's user must read it; the node writes it 0600), that it is a regular file and that the disk reads; "+
			"or restore it from a backup (`snapnode backup` copies it as audit-seal.json, beside the database). If it is lost, move it aside, keeping it, and start: the node then checks the chain's last seal alone and records its next seal. "+
			"`snapnode audit verify` verifies the chain meanwhile", err, record)
	default:
		return fmt.Errorf("node: audit log: %w", err)
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
// serves, then every auditPruneInterval (see every). A prune that fails
// (the entries due do not verify: the log was tampered with, and pruning
// never erases that) is logged and the node runs on, its log untouched,
// for `snapnode audit verify` to name.
func startAuditPruner(ctx context.Context, log *audit.Log, at loopTiming, logger *slog.Logger, closers *[]func() error) {
	every(ctx, "audit prune", at, true, func(ctx context.Context, _ time.Time) (int64, error) { return log.Prune(ctx) },
		func(removed int64, err error) {
			if err != nil {
				logger.Error("audit log: prune", "err", err)
			} else if removed > 0 {
				logger.Info("audit log: pruned entries past retention", "count", removed)
			}
		}, closers)
}

// auditSealInterval is how often the audit log's head is sealed (when it
// moved), and auditSealEvery after how many entries the node appended it
// is sealed without waiting: the entries of at most that long, and at
// most about that many, are unsealed (a cut of them, made while the node
// is stopped, goes unseen).
const (
	auditSealInterval = time.Hour
	auditSealEvery    = 256
)

// finalSealTimeout bounds the seal made at a clean stop.
const finalSealTimeout = 5 * time.Second

// startAuditSealer seals log's head every auditSealInterval from now, and
// once more when the closer it appends runs (a clean stop); a head
// already sealed is left alone. A seal refused (the chain since the last seal
// does not verify) is logged and the node runs on, for `snapnode audit
// verify` to name the entry.
func startAuditSealer(ctx context.Context, log *audit.Log, at loopTiming, logger *slog.Logger, closers *[]func() error) {
	report := func(s audit.Seal, err error) {
		if err != nil {
			logger.Error("audit log: seal", "err", err)
		} else if s.Seq > 0 {
			logger.Debug("audit log: sealed", "seq", s.Head.Seq, "hash", s.Head.Hash)
		}
	}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	tick := time.NewTicker(at.interval)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = log.RunSealer(sctx, tick.C, at.bound, report)
	}()
	*closers = append(*closers, func() error {
		cancel()
		<-done
		tick.Stop()
		// The last seal, bounded: a database that does not answer
		// must not hold the stop.
		fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), finalSealTimeout)
		defer cancel()
		report(log.Seal(fctx))
		return nil
	})
}

// every runs job once (before it returns when first, else on the
// goroutine, so that a backlog does not hold the node's start), then
// every interval in a goroutine that the closer it appends stops, telling
// report of each round.
//
// Each round is a periodic.Pass of loop bounded by at.bound: one whose
// database calls do not return (a server that hung) is abandoned, and
// the next tick runs it again.
func every[N any](ctx context.Context, loop string, at loopTiming, first bool, job func(context.Context, time.Time) (N, error), report func(N, error), closers *[]func() error) {
	once := func(ctx context.Context) (N, error) {
		return periodic.Pass(ctx, loop, at.bound, func(ctx context.Context) (N, error) { return job(ctx, time.Now()) })
	}
	if first {
		report(once(ctx))
	}
	jctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	tick := time.NewTicker(at.interval)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if !first {
			report(once(jctx))
		}
		_ = periodic.Run(jctx, loop, tick.C, at.bound, job, report)
	}()
	*closers = append(*closers, func() error { cancel(); <-done; tick.Stop(); return nil })
}

// startCutoff is what a starting node takes up as interrupted: on SQLite,
// whose node is the database's only process, everything before now; on
// PostgreSQL only what stood still for after (reconcile_after), since a
// replica may be working on something younger.
func startCutoff(db *sqldb.DB, after time.Duration) time.Time {
	if db.Dialect == sqldb.SQLite {
		return time.Now()
	}
	return time.Now().Add(-after)
}
