package node

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/internal/backup"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/metrics"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
	"github.com/snapnode/snapnode/servicecall"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
	"github.com/snapnode/snapnode/snapnostr"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/sqlstore"
)

// Start starts a node and returns once it listens for requests and its
// card is published; opts add services (WithService). The node runs until
// ctx ends; then call Wait. When a part fails to start, the parts started
// before it are stopped, newest first, and Start returns the error.
func Start(ctx context.Context, cfg config.Config, logger *slog.Logger, with ...Option) (*Node, error) {
	var o options
	for _, opt := range with {
		opt(&o)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	uid := os.Geteuid()
	if o.uid != nil {
		uid = *o.uid
	}
	if err := privateDataDir(cfg, uid, logger); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, logger: logger, level: o.level, cardNew: make(chan struct{}, 1),
		identityLimits: limiter(cfg.IdentityRate, cfg.IdentityBurst),
		nostrKeyLimits: limiter(cfg.NostrKeyRate, cfg.NostrKeyBurst)}
	n.nostrKeyShare = newKeyLimitShare(n.nostrKeyLimits, cfg.NostrKeyRate, cfg.NostrKeyBurst)
	n.network = Network(cfg)
	// One node per data folder, taken before anything in it is opened.
	unlock, err := lockDataDir(cfg.DataDir, logger)
	if err != nil {
		return nil, err
	}
	n.parts.push("data folder lock", unlock)
	// The copies of the node's history a killed `snapnode backup --check`
	// left in the data folder (those a running check holds stay).
	removed, lerr := backup.RemoveCheckLeftovers(cfg.DataDir)
	for _, dir := range removed {
		logger.Info("removed the folder a killed backup check left", "dir", dir)
	}
	if lerr != nil {
		logger.Warn("a folder a killed backup check left in the data folder stays, with a copy of the task database: remove it as the user who ran the check (root, for one run with sudo)", "err", lerr)
	}
	// A restore stopped midway leaves its journal: some of the files may
	// be the backup's, others not.
	if err := unfinishedRestore(cfg.DataDir, "the node does not start on them"); err != nil {
		return nil, errors.Join(err, n.parts.closeAll())
	}
	if err := privateFiles(cfg, logger); err != nil {
		return nil, errors.Join(err, n.parts.closeAll())
	}
	if n.key, err = loadOrCreateKey(cfg, logger); err != nil {
		return nil, errors.Join(err, n.parts.closeAll())
	}
	// One verifier for the embedded relay, the pool and the inbox: each
	// event's signature is checked once in the process.
	w := &wiring{n: n, o: o, verifier: relay.NewVerifier()}
	// Every periodic loop's passes, bounded by background_timeout
	// (periodic.Pass), are counted on the way.
	ctx = n.withLoops(ctx)
	err = n.parts.start(ctx,
		w.startRelay,      // the embedded relay, unless relays are configured
		w.startPool,       // one connection to each relay
		w.openDatabase,    // tasks and replay records; another node's database refused
		w.startExecutor,   // sandbox, policy and audit log; the node's address recorded
		w.startSweeper,    // the tasks' retention and the replay records' sweeper
		w.startTasks,      // the task service
		w.startForgetting, // the executor's records of tasks the retention deleted
		w.startServices,   // the router with service/call, and the metrics
		w.startAgent,      // the agent runtime, when one is configured
		w.startProposals,  // decisions, reconcile passes, the admin socket
		w.registerRouter,  // the task methods
		w.startServer,     // the SNAP server behind every transport
		w.startInbox,      // SNAP over Nostr, and its checkpoint
		w.publishCard,     // the agent card, on the relays
		w.startHTTP,       // SNAP over HTTP, SSE and WebSocket
		w.startMetrics,    // /metrics on an address of its own
	)
	if err != nil {
		return nil, err
	}
	return n, nil
}

// Wait stops the node after its context ended, newest part first: the
// HTTP transport and the inbox finish the requests they accepted and send
// their answers, then the agent, the executor and the database stop, and
// last the pool and the embedded relay (which outlive the context so that
// the last answers are published). It returns every part's error.
func (n *Node) Wait() error { return n.parts.closeAll() }

// wiring is what the parts of a starting node hand on to the parts
// started after them. Each start method starts one part and pushes what
// stops it onto the node's lifecycle.
type wiring struct {
	n        *Node
	o        options
	verifier *relay.Verifier

	taskStore tasks.Store
	sqlStore  *sqlstore.Store // the task store on the database, nil in memory
	recorded  bool            // the database records the node's address
	replay    snap.ReplayStore
	results   snap.ResultStore // nil: in memory
	validator *snap.Validator
	jobs      *agent.Store // the agent's, nil when none is configured
	queue     *agent.Queue
	router    *snap.Router
	mx        *metrics.Metrics
	server    *snap.Server
	// props are the node's proposals once startProposals made them, for
	// the task service's Ended (the agent may end tasks before).
	props atomic.Pointer[proposals.Proposals]
}

// startRelay starts the embedded relay when no relay is configured. It
// outlives ctx: it stops in Wait, after the inbox has published its last
// answer.
func (w *wiring) startRelay(ctx context.Context) error {
	n, cfg := w.n, w.n.cfg
	n.urls = cfg.Relays
	if len(n.urls) > 0 {
		return nil
	}
	rel, err := embedded.New(embedded.Config{DBPath: filepath.Join(cfg.DataDir, "relay.db"), Logger: n.logger.With("part", "relay"), Verifier: w.verifier,
		MaxConnections: cfg.RelayMaxConns, MaxConnectionsPerIP: cfg.RelayMaxConnsPerPeer,
		StoreMaxEvents: cfg.RelayStoreMaxEvents, StoreMaxBytes: cfg.RelayStoreMaxBytes, StorePeerShare: cfg.RelayStorePeerShare, KeepAuthors: []string{n.key.NostrPublicKey()},
		EventsPerSecond: cfg.RelayEventRate, EventBurst: cfg.RelayEventBurst, AllowedOrigins: cfg.RelayAllowedOrigins})
	if err != nil {
		return fmt.Errorf("node: embedded relay: %w", err)
	}
	ln, err := net.Listen("tcp", cfg.RelayListen)
	if err != nil {
		rel.Close()
		return fmt.Errorf("node: embedded relay: relay_listen (--relay-listen): %w: give a free address, or relays to use instead (--relay)", err)
	}
	rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- rel.Serve(rctx, ln) }()
	n.relay, n.urls = rel, []string{"ws://" + dialAddr(ln.Addr())}
	n.parts.push("embedded relay", func() error { stop(); return errors.Join(<-done, rel.Close()) })
	return nil
}

// startPool connects to the relays, in process to the embedded one. The
// pool outlives ctx, as the relay does.
func (w *wiring) startPool(ctx context.Context) error {
	n := w.n
	poolCfg := w.poolConfig()
	if n.relay != nil {
		// The node reaches its own relay in-process: no socket, no JSON.
		// External clients use the WebSocket.
		local, rel := n.urls[0], n.relay
		poolCfg.Dial = func(ctx context.Context, url string) (relay.Conn, error) {
			if url == local {
				return rel.LocalConn()
			}
			return relay.DialWebsocket(ctx, url)
		}
	}
	n.pool = relay.NewPool(poolCfg)
	pctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	n.pool.Start(pctx)
	n.parts.push("pool", func() error { stop(); return n.pool.Close() })
	return nil
}

// poolConfig is the relay pool's configuration, but for its Dial. After
// a reconnect each relay is asked again from the last created_at it
// brought minus ResubscribeSkew: a peer whose clock is behind by up to
// the timestamp window (max_drift) dates its requests that far back, and
// they are accepted, so the skew reaches back the window and the pool's
// default skew on top.
func (w *wiring) poolConfig() relay.PoolConfig {
	n := w.n
	return relay.PoolConfig{URLs: n.urls, Logger: n.logger.With("part", "pool"), Verifier: w.verifier,
		ResubscribeSkew: cmp.Or(n.cfg.MaxDrift.Duration, snap.DefaultMaxDrift) + relay.DefaultResubscribeSkew}
}

// openDatabase opens the task and replay stores. They are durable (an
// accepted task survives a crash or restart, a replayed message is caught
// after one), unless the database is "memory", for throwaway nodes and
// measurements. A database that records another node's address is
// refused here, before the node writes to it (see checkIdentity).
func (w *wiring) openDatabase(ctx context.Context) error {
	n, cfg, logger := w.n, w.n.cfg, w.n.logger
	live := tasks.LiveLimits{PerOwner: cfg.MaxLiveTasksPerRequester, Total: cfg.MaxLiveTasks}
	if cfg.DatabaseDSN() == config.MemoryDatabase {
		w.taskStore, w.replay = tasks.NewMemoryStore(tasks.MemoryStoreOptions{MaxLivePerOwner: live.PerOwner, MaxLive: live.Total}), snap.NewMemoryReplayStore(0)
		return nil
	}
	db, err := sqldb.Open(ctx, cfg.DatabaseDSN(), sqldb.Options{Logger: logger})
	if err != nil {
		return fmt.Errorf("node: database: %w", err)
	}
	n.parts.push("database", db.Close)
	store, err := sqlstore.NewLimited(ctx, db, live)
	if err != nil {
		return fmt.Errorf("node: task database: %w", err)
	}
	n.parts.push("task store", store.Close)
	recorded, err := store.Identity(ctx)
	if err != nil {
		return fmt.Errorf("node: task database: %w", err)
	}
	if err := checkIdentity(cfg, recorded, n.key, n.network); err != nil {
		return err
	}
	w.sqlStore, w.recorded = store, recorded != ""
	n.DB = db
	// A request's replay record need not wait for the disk when everything
	// the request can do that must not happen twice is a write to this
	// database that does wait (its task, a cancel, a decision, the
	// executor's record before an action): that write carries the record
	// to the disk. The services of WithService may act elsewhere without
	// writing here, so with any of them every record waits.
	w.taskStore, w.replay, w.results = store, store.ReplayStoreNoSync(), store.ReplayStore()
	if len(w.o.services) > 0 {
		w.replay = store.ReplayStore()
	}
	return nil
}

// startSweeper starts, on a database, the sweeper that deletes ended
// tasks past their retention and expired replay records (and, on
// PostgreSQL, recounts the live tasks of every replica). It starts once
// the database is known to be the node's (startExecutor).
func (w *wiring) startSweeper(ctx context.Context) error {
	n, cfg, logger, store := w.n, w.n.cfg, w.n.logger, w.sqlStore
	if store == nil {
		return nil
	}
	// Each pass of these loops is given up after background_timeout
	// (periodic.Pass), and the loop goes on at its next tick.
	bound := cfg.BackgroundTimeout.Duration
	sweepCtx, stopSweep := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan struct{})
	retention := tasks.Retention{Store: store, TTL: cfg.TaskRetention.Duration}
	go func() {
		defer close(done)
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Go(func() {
			retention.Run(sweepCtx, w.o.loopInterval(10*time.Minute), bound, func(deleted int, err error) {
				if err != nil {
					logger.Warn("task retention", "err", err)
				} else if deleted > 0 {
					logger.Info("task retention: deleted ended tasks", "count", deleted, "older_than", retention.TTL)
				}
			})
		})
		if store.Dialect() == "postgres" {
			// Replicas share the database: each counts the live tasks
			// it created and ended, and every minute the tasks of all.
			wg.Go(func() {
				store.RunRecount(sweepCtx, w.o.loopInterval(time.Minute), bound, func(err error) { logger.Warn("live tasks recount", "err", err) })
			})
		}
		store.ReplayStore().RunSweeper(sweepCtx, w.o.loopInterval(time.Minute), bound, func(deleted int64, err error) {
			if err != nil {
				logger.Warn("replay sweep", "err", err)
			}
		})
	}()
	n.parts.push("sweeper", func() error { stopSweep(); <-done; return nil })
	return nil
}

// startExecutor opens the sandbox, the policy and the audit log, which
// carry proposals out. It needs the database: on the memory database
// proposals wait, like free text.
func (w *wiring) startExecutor(ctx context.Context) error {
	n := w.n
	if n.DB == nil {
		return nil
	}
	// A database without the record gets the node's address once the
	// audit log's check passed, before the executor writes.
	bind := func(ctx context.Context) error {
		if w.recorded {
			return nil
		}
		return recordIdentity(ctx, n.cfg, w.sqlStore, n.key, n.network, n.logger)
	}
	ex, stop, err := startExecutor(ctx, n.cfg, n.DB, n.key, n.network, bind, w.o, n.logger)
	if err != nil {
		return err
	}
	n.exec = ex
	n.parts.push("executor", stop)
	return nil
}

// startForgetting deletes, every hour, the executor's records of ended
// actions whose task the task retention deleted (see startForgetting).
func (w *wiring) startForgetting(ctx context.Context) error {
	n := w.n
	if n.exec == nil {
		return nil
	}
	var closers []func() error
	startForgetting(ctx, n.exec.exec, n.Tasks, n.cfg.TaskRetention.Duration, loopTiming{w.o.loopInterval(auditPruneInterval), n.cfg.BackgroundTimeout.Duration}, n.logger, &closers)
	for _, c := range closers {
		n.parts.push("executor's forgetting", c)
	}
	return nil
}

// startTasks makes the task service, behind the validator of every SNAP
// message, with the executor as the runner of proposals and the agent's
// queue (opened here) as the taker of free text.
func (w *wiring) startTasks(ctx context.Context) error {
	n, cfg, logger := w.n, w.n.cfg, w.n.logger
	vcfg := snap.Config{
		Self: n.Address(), MaxDrift: cfg.MaxDrift.Duration, Replay: w.replay,
		Limiter: n.identityLimits,
		// One bound of key tables for the Nostr events and the SNAP
		// messages: an agent's messages verify through its event
		// key's table.
		Tables: w.verifier.Tables(),
	}
	// The task service's requests write their replay records with their
	// first effect, so that one that fails for a passing cause (5001,
	// 5002, 5003) leaves its id unspent for the requester's retry: on
	// the database a message/send or message/stream creating a task, or
	// appending a message to one, writes it in the task's transaction, a
	// tasks/cancel in the cancel's, an operator's decision in the
	// executor's commit of it; a tasks/resubscribe before its first
	// event; a tasks/get, which changes nothing, once answered (the
	// server, as validation would have written it). In memory each is
	// written just before the task's write, after the agent's admission
	// and the stream limits (not the live-task limit, which that write
	// checks).
	vcfg.ClaimMethods = []string{"message/send", snap.MethodMessageStream, "tasks/get", "tasks/cancel", snap.MethodTasksResubscribe}
	w.validator = snap.NewValidator(vcfg)
	opts := tasks.ServiceOptions{Operators: cfg.Operators, Logger: logger.With("part", "tasks"), Agent: refuse(noAgentReason),
		MaxStreams: cfg.MaxStreams, MaxStreamsPerRequester: cfg.MaxStreamsPerIdentity, MaxStreamsPerKey: cfg.MaxStreamsPerKey,
		MaxNewcomerStreams: cfg.MaxNewcomerStreams, StreamWait: cfg.StreamWaitTimeout.Duration, MaxStreamWaiters: cfg.MaxStreamWaiters}
	if n.exec != nil {
		// One list of operators for the task service, the executor's
		// judgements and approvals, and the agent's queue: the policy
		// holder's, which Reload sets with the policy in one step.
		opts.IsOperator = func(addr string) bool { return n.exec.policy.InForce().IsOperator(addr) }
		// The runner needs only the executor: the task service is built
		// on it, and the proposals' lifecycle on the task service.
		opts.Runner = proposals.NewRunner(n.exec.exec, logger.With("part", "proposals"), w.o.pause)
		// A task this process ends (a follow-up message's run or
		// refusal, a cancel, the agent's outcome) gives up at once the
		// actions it still held, which no decision can reach any more:
		// no list offers them. Before the proposals are made, the
		// start's reconcile pass withdraws them.
		opts.Ended = func(ctx context.Context, t *tasks.Task) {
			if p := w.props.Load(); p != nil {
				p.Ended(context.WithoutCancel(ctx), t)
			}
		}
		// A new task and its request's result are written together.
		opts.KeepResults = w.validator.Retention()
	} else {
		logger.Warn("database is memory: proposals are not carried out (the executor keeps its records in the database)")
		opts.Agent = refuse(noDatabaseReason)
	}
	if !cfg.AgentEnabled() {
		logger.Info("no agent: free-text tasks fail at once, saying how to enable one (--llm-url and --llm-model, agent.command or agent.delegate); proposals are carried out")
	}
	if n.exec != nil && cfg.AgentEnabled() {
		var err error
		// The queue asks the task service's operators, the policy
		// holder's (the service is built on the queue).
		isOperator := func(addr string) bool { return n.Tasks != nil && n.Tasks.IsOperator(addr) }
		if w.jobs, w.queue, err = openAgentQueue(ctx, n.DB, w.taskStore, cfg.Agent, isOperator, logger); err != nil {
			return err
		}
		opts.Agent = w.queue
	}
	// The parts a message may carry are what the card lists.
	modes, err := inputModes(cfg)
	if err != nil {
		return err
	}
	opts.InputModes = modes
	// The steps after a request's commit (the agent's take, a run of
	// proposals) outlive the request and stop with the node: once the
	// node's context ended, they have the HTTP transport's grace to end,
	// as the requests in flight do (a WebSocket connection's requests are
	// waited for, and would wait for them), and they are stopped at the
	// latest after the transports, before the executor (parts stop in
	// reverse order).
	life, stopSteps := context.WithCancel(context.WithoutCancel(ctx))
	grace := cmp.Or(w.o.stepsGrace, snaphttp.DefaultShutdownTimeout)
	graceOver := context.AfterFunc(ctx, func() { time.AfterFunc(grace, stopSteps) })
	n.stepsLife, opts.Lifetime = life, life
	n.parts.push("requests' steps after their commit", func() error { graceOver(); stopSteps(); return nil })
	n.Tasks = tasks.NewService(w.taskStore, opts)
	if sh, ok := w.taskStore.(tasks.Shared); ok && n.DB != nil && n.DB.Dialect == sqldb.Postgres {
		// Replicas on one database: the events another one writes
		// reach the streams this one serves.
		wctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer close(done)
			_ = n.Tasks.WatchOthers(wctx, sh, w.o.loopInterval(0), n.cfg.BackgroundTimeout.Duration)
		}()
		n.parts.push("the other replicas' task events", func() error {
			cancel()
			<-done
			return nil
		})
	}
	return nil
}

// startServices makes the router with the node's services and the
// metrics. The metrics count the methods of the router and the task
// service's, which registerRouter adds once the proposals that take
// decisions on message/send exist.
func (w *wiring) startServices(context.Context) error {
	n := w.n
	w.router = snap.NewRouter()
	if err := n.startServices(w.router, w.taskStore, w.o); err != nil {
		return err
	}
	w.mx = n.newMetrics(append(w.router.Methods(), taskMethods(n.Tasks)...), w.replay, w.taskStore)
	return nil
}

// startAgent starts the agent runtime on the queue startTasks opened. It
// outlives ctx: Wait stops it, its jobs at their next step boundary.
func (w *wiring) startAgent(ctx context.Context) error {
	n := w.n
	if w.queue == nil {
		return nil
	}
	actx, stop := context.WithCancel(context.WithoutCancel(ctx))
	rt, done, err := startAgent(actx, n.cfg, w.jobs, w.queue, n.exec.exec, n.Tasks, w.mx, n.exec.audit, n.key, n.pool, w.verifier, w.o.loopInterval(0), n.logger)
	if err != nil {
		stop()
		return err
	}
	n.agent = rt
	n.parts.push("agent", func() error { stop(); <-done; return nil })
	if n.DB.Dialect == sqldb.Postgres {
		// Replicas share the database: each counts the jobs it queued
		// and moved, and every minute the queued jobs of all.
		rctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		recounted := make(chan struct{})
		go func() {
			defer close(recounted)
			_ = w.queue.RunRecount(rctx, w.o.loopInterval(time.Minute), n.cfg.BackgroundTimeout.Duration, func(err error) { n.logger.Warn("agent queue recount", "err", err) })
		}()
		n.parts.push("agent queue recount", func() error { cancel(); <-recounted; return nil })
	}
	jobs := w.jobs
	w.mx.SetAgentJobs(func(ctx context.Context) (map[string]int64, error) {
		counts, err := jobs.CountByStatus(ctx)
		out := make(map[string]int64, len(agent.Statuses()))
		for _, st := range agent.Statuses() { // every status, 0 included
			out[string(st)] = counts[st]
		}
		return out, err
	})
	return nil
}

// startProposals makes the proposals' lifecycle (decisions, rollbacks),
// takes up the tasks a stop interrupted, and starts the periodic
// reconcile passes and the admin socket.
func (w *wiring) startProposals(ctx context.Context) error {
	n, logger := w.n, w.n.logger
	if n.exec == nil {
		return nil
	}
	pcfg := proposals.Config{Executor: n.exec.exec, Tasks: n.Tasks, Claims: proposals.DBClaims(n.DB),
		Pause: w.o.pause, Logger: logger.With("part", "proposals")}
	if n.agent != nil {
		pcfg.Jobs = n.agent // decisions on its jobs' actions go to it
	}
	var err error
	if n.props, err = proposals.New(pcfg); err != nil {
		return fmt.Errorf("node: %w", err)
	}
	w.props.Store(n.props)
	// Before the first request: a retry finds its task ended. On a
	// shared database a younger task may be a replica's, running: the
	// periodic passes take it up once it is older.
	r, err := n.props.Reconcile(ctx, startCutoff(n.DB, n.cfg.ReconcileAfter.Duration))
	if err != nil {
		return fmt.Errorf("node: reconcile interrupted tasks: %w", err)
	}
	if r.Resumed+r.Settled+r.Withdrawn > 0 {
		logger.Warn("took up the tasks a stop interrupted", "resumed", r.Resumed, "settled", r.Settled, "ended", r.Ended, "withdrawn", r.Withdrawn)
	}
	stopReconciler := startReconciler(ctx, n.props, n.cfg.ReconcileAfter.Duration, loopTiming{w.o.loopInterval(reconcileInterval), n.cfg.BackgroundTimeout.Duration}, logger)
	n.parts.push("reconcile passes", func() error { stopReconciler(); return nil })
	stopAdmin, err := startAdmin(ctx, n.cfg.DataDir, adminHandler{props: n.props, agent: n.agent, console: &n.console, logger: logger}, logger.With("part", "admin"))
	if err != nil {
		return err
	}
	n.parts.push("admin socket", stopAdmin)
	w.results = liveResults{ResultStore: w.results, tasks: n.Tasks}
	return nil
}

// registerRouter registers the task methods, which hand proposals to the
// proposals' lifecycle.
func (w *wiring) registerRouter(context.Context) error {
	registerMethods(w.router, w.n.Tasks, w.n.props, w.n.logger.With("part", "proposals"))
	return nil
}

// startServer makes the SNAP server every transport hands its messages
// to; each transport bounds its answers.
func (w *wiring) startServer(context.Context) error {
	n := w.n
	w.server = snap.NewServer(snap.ServerConfig{
		Key: n.key, Network: n.network, Router: w.router, Logger: n.logger.With("part", "snap"),
		Results: w.results, Observer: w.mx, RequestTimeout: n.cfg.RequestTimeout.Duration,
		// Each service bounds its calls (service_timeout, or its own).
		SelfBounded: []string{servicecall.Method},
		Validator:   w.validator,
	})
	return nil
}

// startInbox opens the inbox's checkpoint and starts the inbox, and
// returns once its subscription is in place. It runs until ctx ends (or
// a later part fails to start), then finishes the requests it accepted.
func (w *wiring) startInbox(ctx context.Context) error {
	n := w.n
	cp, err := openCheckpoint(ctx, n.DB, filepath.Join(n.cfg.DataDir, "node.db"), n.logger)
	if err != nil {
		return err
	}
	n.parts.push("inbox checkpoint", cp.Close)
	var in *snapnostr.Inbox
	shares, err := openShares(ctx, n.DB, func() bool { return receiving(in, n.pool) }, n.nostrKeyShare.setAlive, n.logger.With("part", "replicas"))
	if err != nil {
		return err
	}
	icfg := snapnostr.InboxConfig{
		Key: n.key, Transport: n.pool, Handler: w.server, Checkpoint: cp, Verifier: w.verifier,
		Logger: n.logger.With("part", "inbox"), Workers: n.cfg.Workers, ReplyTTL: n.cfg.ReplyTTL.Duration, MaxDrift: n.cfg.MaxDrift.Duration,
		KeyLimiter: n.nostrKeyLimits,
		// The inbox's own steps on the database around a request (its
		// checkpoint, the claim of its answer) within the request's bound.
		StepTimeout: min(n.cfg.RequestTimeout.Duration, 10*time.Second),
		// The task service's stream slots decide who streams (per
		// identity and key, known peers before newcomers, a bounded
		// wait): the inbox only bounds its goroutines, past those slots
		// and their waiting line, so that it never refuses first.
		Streams: n.cfg.MaxStreams + n.cfg.MaxStreamWaiters,
	}
	if shares != nil { // not a nil *Replicas in the interface
		rec, ok := w.replay.(snapnostr.SharedReplay)
		if !ok {
			// Without it a request whose owner never took it would be
			// forgotten: the processes would not share the requests out.
			return fmt.Errorf("node: the replay store %T cannot tell which requests another process took", w.replay)
		}
		icfg.Shares, icfg.Replay = shares, rec
	}
	in = snapnostr.NewInbox(icfg)
	if w.mx != nil {
		w.mx.SetInboxExpired(in.Expired)
	}
	ictx, stop := context.WithCancel(ctx)
	var runErr error
	done := make(chan struct{})
	go func() { runErr = in.Run(ictx); close(done) }()
	n.parts.push("inbox", func() error { stop(); <-done; return runErr })
	if shares != nil {
		// Closed before the inbox: the replica leaves the others' view
		// first, so that they take its share while it still answers.
		n.parts.push("replicas", background(ctx, shares.Run))
		if w.mx != nil {
			w.mx.SetShares(func() metrics.Shares {
				st := in.Shared()
				return metrics.Shares{Alive: shares.Alive(), Kept: st.Kept, Taken: st.Taken, Left: st.Left}
			})
		}
	}
	select {
	case <-in.Ready():
		return nil
	case <-done:
		return fmt.Errorf("node: inbox: %w", runErr)
	case <-ctx.Done():
		return ctx.Err()
	}
}

// publishCard publishes the agent card built from the settings, then
// leaves the card to publishCards, which publishes each later one
// (Reload). When no relay takes it within cardStartWait (all of them
// down, or the network), the node starts all the same: it serves HTTP,
// answers on whichever relay connects, and publishCards goes on
// publishing the card in the background. Before, it gave up and exited,
// and a relay's outage at boot kept the node down.
func (w *wiring) publishCard(ctx context.Context) error {
	n := w.n
	card, err := buildCard(n.cfg, n.Address(), n.urls)
	if err != nil {
		return err
	}
	n.card.Store(card)
	wait := cmp.Or(w.o.cardWait, cardStartWait)
	err = n.publish(ctx, card, wait)
	if err != nil && ctx.Err() != nil {
		return err
	}
	n.cardMu.Lock()
	n.cardOut, n.cardDone = err == nil, make(chan struct{})
	if n.cardOut {
		close(n.cardDone)
	}
	n.cardMu.Unlock()
	delay := time.Duration(0)
	if err != nil {
		n.logger.Warn("card not published: no relay took it; starting anyway and trying again in the background",
			"relays", n.urls, "err", err)
		delay = cardRetry
	}
	n.parts.push("card", background(ctx, func(ctx context.Context) error { return n.publishCards(ctx, delay) }))
	return nil
}

// startHTTP serves SNAP over HTTP (see Node.startHTTP) until ctx ends.
func (w *wiring) startHTTP(ctx context.Context) error {
	stop, err := w.n.startHTTP(ctx, w.server, w.mx)
	if err != nil {
		return err
	}
	w.n.parts.push("HTTP", stop)
	return nil
}

// startMetrics serves /metrics on metrics_listen, when it is set, until
// ctx ends.
func (w *wiring) startMetrics(ctx context.Context) error {
	stop, err := w.n.startMetrics(ctx, w.mx.Handler())
	if err != nil {
		return err
	}
	w.n.parts.push("metrics", stop)
	return nil
}
