// Package node assembles a running snapnode from its parts: the identity,
// the embedded relay (when no relay is configured), the relay pool, the
// task service behind a snap.Server, the Nostr inbox, and the agent card.
// cmd/snapnode's `run` is this package plus flags and signals; tests start
// real nodes with it.
//
//	n, err := node.Start(ctx, cfg, logger)
//	if err != nil { … }
//	fmt.Println(n.Address(), n.RelayURLs())
//	<-ctx.Done()
//	err = n.Wait() // finishes in-flight requests, closes everything
package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/agent"
	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/config"
	"github.com/snapnode/snapnode/internal/ratelimit"
	"github.com/snapnode/snapnode/internal/sqldb"
	"github.com/snapnode/snapnode/proposals"
	"github.com/snapnode/snapnode/relay"
	"github.com/snapnode/snapnode/relay/embedded"
	"github.com/snapnode/snapnode/service"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/tasks"
	"github.com/snapnode/snapnode/tasks/sqlstore"
)

// Node is a running snapnode.
type Node struct {
	cfg        config.Config
	key        *identity.Key
	network    identity.Network
	logger     *slog.Logger
	relay      *embedded.Relay // nil when relays are configured
	relayDone  chan error
	urls       []string
	pool       *relay.Pool
	checkpoint checkpoint
	inbox      *relay.Inbox
	inboxDone  chan error
	http       *httpPart    // nil when HTTP is off
	metrics    *metricsPart // nil unless metrics_listen is set
	stopRelay  func()
	stopPool   func()
	closeStore func() error
	// stopProposals stops the reconcile passes, closes the admin socket,
	// the audit log and the sandbox.
	stopProposals func() error
	stopSweep     func()
	sweepDone     chan struct{}
	stopAgent     func()
	// exec carries proposals out, props owns their lifecycle (decisions,
	// reconcile); both nil on the memory database.
	exec  *executorPart
	props *proposals.Proposals
	// console, once the HTTP listener serves it, issues the login URLs
	// the admin socket hands out.
	console atomic.Pointer[consoleLogin]
	// agent works on free-text tasks; nil when none is configured.
	agent     *agent.Runtime
	agentDone <-chan struct{}
	// cardMu guards card and cfg's settings that change live; it
	// serializes UpdateCard and Reload.
	cardMu sync.Mutex
	card   *snap.Card
	// The settings that change live (see Reload) are applied to these.
	services       *service.Registry
	identityLimits *ratelimit.Limiter
	nostrKeyLimits *ratelimit.Limiter
	level          *slog.LevelVar // nil: log_level needs a restart
	Tasks          *tasks.Service
	// DB is the database of tasks, replay records and the audit log; nil
	// when the node runs on the memory store.
	DB *sqldb.DB
}

// Start starts a node and returns once it listens for requests and its
// card is published; opts add services (WithService). The node runs until ctx ends; then call Wait.
func Start(ctx context.Context, cfg config.Config, logger *slog.Logger, with ...Option) (_ *Node, err error) {
	var o options
	for _, opt := range with {
		opt(&o)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := privateFiles(cfg, logger); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, logger: logger, level: o.level,
		identityLimits: limiter(cfg.IdentityRate, cfg.IdentityBurst),
		nostrKeyLimits: limiter(cfg.NostrKeyRate, cfg.NostrKeyBurst)}
	if cfg.Testnet {
		n.network = identity.Testnet
	}
	if n.key, err = loadOrCreateKey(cfg, logger); err != nil {
		return nil, err
	}
	// Undo what was started when a later step fails.
	var cleanup []func()
	defer func() {
		if err != nil {
			for i := len(cleanup) - 1; i >= 0; i-- {
				cleanup[i]()
			}
		}
	}()

	// One verifier for the embedded relay, the pool and the inbox: each
	// event's signature is checked once in the process.
	verifier := relay.NewVerifier()
	n.urls = cfg.Relays
	if len(n.urls) == 0 {
		rctx, stop := context.WithCancel(context.WithoutCancel(ctx))
		n.relay, err = embedded.New(embedded.Config{DBPath: filepath.Join(cfg.DataDir, "relay.db"), Logger: logger.With("part", "relay"), Verifier: verifier})
		if err != nil {
			stop()
			return nil, fmt.Errorf("node: embedded relay: %w", err)
		}
		ln, err := net.Listen("tcp", cfg.RelayListen)
		if err != nil {
			stop()
			n.relay.Close()
			return nil, fmt.Errorf("node: embedded relay: %w", err)
		}
		n.relayDone = make(chan error, 1)
		go func() { n.relayDone <- n.relay.Serve(rctx, ln) }()
		cleanup = append(cleanup, func() { stop(); <-n.relayDone; n.relay.Close() })
		n.urls = []string{"ws://" + dialAddr(ln.Addr())}
		// The relay outlives ctx: it stops in Wait, after the inbox
		// has published its last answer.
		n.stopRelay = stop
	}

	poolCfg := relay.PoolConfig{URLs: n.urls, Logger: logger.With("part", "pool"), Verifier: verifier}
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
	poolCtx, stopPool := context.WithCancel(context.WithoutCancel(ctx))
	n.pool.Start(poolCtx)
	n.stopPool = stopPool
	cleanup = append(cleanup, func() { stopPool(); n.pool.Close() })

	// Tasks and replay records are durable (an accepted task survives a
	// crash or restart, a replayed message is caught after one), unless
	// the database is "memory", for throwaway nodes and measurements.
	var (
		taskStore tasks.Store
		replay    snap.ReplayStore
		results   snap.ResultStore // nil: in memory
		ex        *executorPart    // nil: proposals wait, like free text
	)
	var closers []func() error // what stopProposals closes, in reverse
	n.stopProposals = func() error {
		var errs []error
		for i := len(closers) - 1; i >= 0; i-- {
			errs = append(errs, closers[i]())
		}
		return errors.Join(errs...)
	}
	cleanup = append(cleanup, func() { n.stopProposals() })
	n.stopSweep, n.sweepDone = func() {}, make(chan struct{})
	if cfg.DatabaseDSN() == config.MemoryDatabase {
		taskStore, replay = tasks.NewMemoryStore(tasks.MemoryStoreOptions{}), snap.NewMemoryReplayStore(0)
		close(n.sweepDone)
		n.closeStore = func() error { return nil }
	} else {
		db, err := sqldb.Open(ctx, cfg.DatabaseDSN(), sqldb.Options{})
		if err != nil {
			return nil, fmt.Errorf("node: database: %w", err)
		}
		cleanup = append(cleanup, func() { db.Close() })
		store, err := sqlstore.New(ctx, db)
		if err != nil {
			return nil, fmt.Errorf("node: task database: %w", err)
		}
		n.DB = db
		taskStore, replay, results = store, store.ReplayStore(), store.ReplayStore()
		// The executor asks the task service's operators (set below,
		// before the first request; Reload changes them for both).
		isOperator := func(addr string) bool { return n.Tasks != nil && n.Tasks.IsOperator(addr) }
		stopExec := func() error { return nil }
		if ex, stopExec, err = startExecutor(ctx, cfg, db, n.key, n.network, isOperator, logger); err != nil {
			return nil, err
		}
		closers = append(closers, stopExec)
		n.closeStore = func() error { return errors.Join(store.Close(), db.Close()) }
		sweepCtx, stopSweep := context.WithCancel(context.WithoutCancel(ctx))
		done := n.sweepDone
		retention := tasks.Retention{Store: store, TTL: cfg.TaskRetention.Duration}
		go func() {
			defer close(done)
			var wg sync.WaitGroup
			defer wg.Wait()
			wg.Go(func() {
				retention.Run(sweepCtx, 10*time.Minute, func(deleted int, err error) {
					if err != nil {
						logger.Warn("task retention", "err", err)
					} else if deleted > 0 {
						logger.Info("task retention: deleted ended tasks", "count", deleted, "older_than", retention.TTL)
					}
				})
			})
			store.ReplayStore().RunSweeper(sweepCtx, time.Minute, func(deleted int64, err error) {
				if err != nil {
					logger.Warn("replay sweep", "err", err)
				}
			})
		}()
		n.stopSweep = stopSweep
		cleanup = append(cleanup, func() { stopSweep(); <-done })
	}
	addr := n.key.Address(n.network)
	validator := snap.NewValidator(snap.Config{
		Self: addr, MaxDrift: cfg.MaxDrift.Duration, Replay: replay,
		Limiter: n.identityLimits,
	})
	opts := tasks.ServiceOptions{Operators: cfg.Operators, Logger: logger.With("part", "tasks"), Agent: refuse(noAgentReason),
		MaxStreams: cfg.MaxStreams, MaxStreamsPerRequester: cfg.MaxStreamsPerIdentity, MaxStreamsPerKey: cfg.MaxStreamsPerKey,
		MaxNewcomerStreams: cfg.MaxNewcomerStreams, StreamWait: cfg.StreamWaitTimeout.Duration, MaxStreamWaiters: cfg.MaxStreamWaiters}
	if ex != nil {
		// The runner needs only the executor: the task service is built
		// on it, and the proposals' lifecycle on the task service.
		opts.Runner = proposals.NewRunner(ex.exec, logger.With("part", "proposals"), o.pause)
		// A new task and its request's result are written together.
		opts.KeepResults = validator.Retention()
	} else {
		logger.Warn("database is memory: proposals are not carried out (the executor keeps its records in the database)")
		opts.Agent = refuse(noDatabaseReason)
	}
	var (
		jobs  *agent.Store
		queue *agent.Queue
	)
	if ex != nil && cfg.AgentEnabled() {
		if jobs, queue, err = openAgentQueue(ctx, n.DB); err != nil {
			return nil, err
		}
		opts.Agent = queue
	}
	n.Tasks = tasks.NewService(taskStore, opts)
	n.exec = ex
	n.agentDone = closedChan()
	router := snap.NewRouter()
	if err := n.startServices(router, taskStore, o); err != nil {
		return nil, err
	}
	// The metrics count the methods of the router and the task
	// service's, which are registered below, once the proposals that
	// take decisions on message/send exist.
	mx := n.newMetrics(append(router.Methods(), taskMethods(n.Tasks)...), replay, taskStore)
	if queue != nil {
		actx, stopAgent := context.WithCancel(context.WithoutCancel(ctx))
		rt, done, err := startAgent(actx, cfg, jobs, queue, ex.exec, n.Tasks, mx, ex.audit, logger)
		if err != nil {
			stopAgent()
			return nil, err
		}
		n.agent, n.agentDone = rt, done
		n.stopAgent = stopAgent
		cleanup = append(cleanup, func() { stopAgent(); <-done })
		mx.SetAgentJobs(func(ctx context.Context) (map[string]int64, error) {
			counts, err := jobs.CountByStatus(ctx)
			out := make(map[string]int64, len(agent.Statuses()))
			for _, st := range agent.Statuses() { // every status, 0 included
				out[string(st)] = counts[st]
			}
			return out, err
		})
	}
	if ex != nil {
		pcfg := proposals.Config{Executor: ex.exec, Tasks: n.Tasks, Claims: proposals.DBClaims(n.DB),
			Pause: o.pause, Logger: logger.With("part", "proposals")}
		if n.agent != nil {
			pcfg.Jobs = n.agent // decisions on its jobs' actions go to it
		}
		if n.props, err = proposals.New(pcfg); err != nil {
			return nil, fmt.Errorf("node: %w", err)
		}
		// Before the first request: a retry finds its task ended. On a
		// shared database a younger task may be a replica's, running:
		// the periodic passes take it up once it is older.
		r, err := n.props.Reconcile(ctx, startCutoff(n.DB))
		if err != nil {
			return nil, fmt.Errorf("node: reconcile interrupted tasks: %w", err)
		}
		if r.Resumed+r.Settled+r.Withdrawn > 0 {
			logger.Warn("took up the tasks a stop interrupted", "resumed", r.Resumed, "settled", r.Settled, "ended", r.Ended, "withdrawn", r.Withdrawn)
		}
		stopReconciler := startReconciler(ctx, n.props, logger)
		closers = append(closers, func() error { stopReconciler(); return nil })
		stopAdmin, err := startAdmin(ctx, cfg.DataDir, adminHandler{props: n.props, console: &n.console, logger: logger}, logger.With("part", "admin"))
		if err != nil {
			return nil, err
		}
		closers = append(closers, stopAdmin)
		results = liveResults{ResultStore: results, tasks: n.Tasks}
	}
	registerMethods(router, n.Tasks, n.props, logger.With("part", "proposals"))
	server := snap.NewServer(snap.ServerConfig{
		Key: n.key, Network: n.network, Router: router, Logger: logger.With("part", "snap"),
		Results: results, Observer: mx, // each transport bounds its answers
		Validator: validator,
	})

	if n.checkpoint, err = openCheckpoint(ctx, n.DB, filepath.Join(cfg.DataDir, "node.db"), logger); err != nil {
		return nil, err
	}
	cleanup = append(cleanup, func() { n.checkpoint.Close() })

	n.inbox = relay.NewInbox(relay.InboxConfig{
		Key: n.key, Transport: n.pool, Handler: server, Checkpoint: n.checkpoint, Verifier: verifier,
		Logger: logger.With("part", "inbox"), Workers: cfg.Workers, ReplyTTL: cfg.ReplyTTL.Duration,
		KeyLimiter: n.nostrKeyLimits,
	})
	n.inboxDone = make(chan error, 1)
	go func() { n.inboxDone <- n.inbox.Run(ctx) }()
	select {
	case <-n.inbox.Ready():
	case err := <-n.inboxDone:
		return nil, fmt.Errorf("node: inbox: %w", err)
	case <-ctx.Done():
		return nil, ctx.Err()
	}

	if n.card, err = buildCard(cfg, addr, n.urls); err != nil {
		return nil, err
	}
	if err := n.publish(ctx, n.card); err != nil {
		return nil, err
	}
	stopMetrics, err := n.startMetrics(ctx, mx.Handler())
	if err != nil {
		return nil, err
	}
	cleanup = append(cleanup, stopMetrics)
	if err := n.startHTTP(ctx, server, mx); err != nil {
		return nil, err
	}
	return n, nil
}

// dialAddr is host:port to reach the listener at a from this machine: a
// listener on every interface (0.0.0.0 or ::, as in a container) is
// reached on loopback, which is also the only host a ws:// relay URL in
// the card may have.
func dialAddr(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok && t.IP.IsUnspecified() {
		return net.JoinHostPort("127.0.0.1", strconv.Itoa(t.Port))
	}
	return a.String()
}

// limiter returns token buckets of rate a second and bursts of burst per
// key; a rate of 0 limits nothing until Reload sets one.
func limiter(rate float64, burst int) *ratelimit.Limiter {
	return ratelimit.New(ratelimit.Config{Rate: rate, Burst: burst})
}

// ErrNoKeyFile: the key file the operator named does not exist. Only the
// default file in the data folder is created on first start; a named one
// that is missing is a mistake (a wrong path would otherwise silently give
// the node a new identity).
var ErrNoKeyFile = errors.New("the key file does not exist")

// ExistingKey returns the node's identity key as `snapnode run` finds it:
// the key in SNAPNODE_KEY, else in the key file; nil when there is no key
// file yet.
func ExistingKey(cfg config.Config) (*identity.Key, error) {
	if k, err := identity.FromEnv(); k != nil || err != nil {
		return k, err
	}
	k, err := identity.LoadKeyFile(cfg.KeyPath())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	return k, err
}

// loadOrCreateKey returns ExistingKey, creating the default key file
// (0600) with a new key on first start.
func loadOrCreateKey(cfg config.Config, logger *slog.Logger) (*identity.Key, error) {
	k, err := ExistingKey(cfg)
	if k != nil || err != nil {
		return k, err
	}
	path := cfg.KeyPath()
	if cfg.KeyFile != "" {
		return nil, fmt.Errorf("%w: %s (snapnode keygen --out %s makes one; without --key the node keeps its identity in its data folder)", ErrNoKeyFile, path, path)
	}
	if k, err = identity.Generate(); err != nil {
		return nil, err
	}
	if err := identity.SaveKeyFile(path, k); err != nil {
		return nil, err
	}
	logger.Info("created a new identity", "file", path, "address", k.Address(identity.Mainnet))
	return k, nil
}

// proposalSkill is what every node does: carry out a peer's proposals.
func proposalSkill() snap.Skill {
	return snap.Skill{ID: "file-actions", Name: "File actions",
		Description: "Carries out proposals (a data part with schema_version 1.x: READ_FILE, LIST_FILES, WRITE_FILE, RENAME_FILE, DELETE_FILE and composites) in the node's sandbox folder: each is validated, judged by policy and audited; risky ones wait for an operator.",
		Tags:        []string{"files", "sandbox", "proposals"},
		Examples:    []string{`{"schema_version":"1.0.0","id":"…","reasoning":"…","action":"WRITE_FILE","args":{"path":"/sandbox/notes.md","content":"…"}}`}}
}

// publicEndpoints are the HTTP transport's endpoints a peer can reach:
// under http_public_url when it is set, else under the listen address
// when other machines can reach it (not loopback, not a wildcard that
// names no host, not port 0). An https URL also serves WebSocket (wss).
func publicEndpoints(cfg config.Config) []snap.Endpoint {
	if cfg.HTTPListen == "" {
		return nil
	}
	base := cfg.HTTPPublicURL
	if base == "" {
		host, port, err := net.SplitHostPort(cfg.HTTPListen)
		ip := net.ParseIP(host)
		if err != nil || host == "" || port == "0" || strings.EqualFold(host, "localhost") || (ip != nil && (ip.IsLoopback() || ip.IsUnspecified())) {
			return nil
		}
		base = "http://" + cfg.HTTPListen
	}
	u, err := url.Parse(strings.TrimSuffix(base, "/"))
	if err != nil {
		return nil // Validate refused it
	}
	u = u.JoinPath("snap")
	out := []snap.Endpoint{{Protocol: "http", URL: u.String()}}
	if u.Scheme == "https" {
		ws := *u
		ws.Scheme = "wss"
		out = append(out, snap.Endpoint{Protocol: "wss", URL: ws.String()})
	}
	return out
}

// buildCard makes the agent card from the configuration.
func buildCard(cfg config.Config, addr string, relays []string) (*snap.Card, error) {
	c := &snap.Card{
		Name: cfg.Card.Name, Description: cfg.Card.Description, Version: cfg.Card.Version,
		Identity: addr, NostrRelays: relays,
		ProtocolVersion: snap.ProtocolVersion, SupportedVersions: snap.SupportedVersions,
		DefaultInputModes: cfg.Card.InputModes, DefaultOutputModes: cfg.Card.OutputModes,
	}
	for _, s := range cfg.Card.Skills {
		c.Skills = append(c.Skills, snap.Skill{ID: s.ID, Name: s.Name, Description: s.Description, Tags: s.Tags, Examples: s.Examples})
	}
	if cfg.AgentEnabled() && cfg.DatabaseDSN() != config.MemoryDatabase &&
		!slices.ContainsFunc(c.Skills, func(s snap.Skill) bool { return s.ID == "agent" }) {
		c.Skills = append(c.Skills, agentSkill(cfg))
	}
	if ps := proposalSkill(); !slices.ContainsFunc(c.Skills, func(s snap.Skill) bool { return s.ID == ps.ID }) {
		c.Skills = append(c.Skills, ps)
	}
	for _, e := range cfg.Card.Endpoints {
		c.Endpoints = append(c.Endpoints, snap.Endpoint{Protocol: e.Protocol, URL: e.URL})
	}
	for _, e := range publicEndpoints(cfg) {
		if !slices.ContainsFunc(c.Endpoints, func(x snap.Endpoint) bool { return x.URL == e.URL }) {
			c.Endpoints = append(c.Endpoints, e)
		}
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("node: the configured card is invalid: %w", err)
	}
	return c, nil
}

// publish publishes card to the node's relays, retrying while no relay
// is connected yet, for up to 15 s. The event is dated after the newest
// card of this identity already on the relays (a restart within the same
// second, or a clock that went back): relays keep only the newest.
func (n *Node) publish(ctx context.Context, card *snap.Card) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	at := time.Now().Truncate(time.Second)
	if prev, err := n.pool.Query(ctx, nostr.Filter{Kinds: []int{relay.KindCard},
		Authors: []string{n.key.NostrPublicKey()}, Tags: nostr.TagMap{"d": {card.Identity}}}); err == nil {
		for _, ev := range prev {
			if t := ev.CreatedAt.Time(); !at.After(t) {
				at = t.Add(time.Second)
			}
		}
	}
	ev, err := relay.CardEvent(card, n.key, at)
	if err != nil {
		return err
	}
	for delay := 100 * time.Millisecond; ; delay = min(2*delay, 2*time.Second) {
		_, err := n.pool.Publish(ctx, ev)
		if err == nil {
			n.logger.Info("card published", "event", ev.ID, "relays", n.urls)
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node: publish card: %w", err)
		case <-time.After(delay):
		}
	}
}

// UpdateCard rebuilds the card from c and, when it differs from the one
// published, publishes it (the relays keep the newest per identity). It
// reports whether it published.
func (n *Node) UpdateCard(ctx context.Context, c config.Card) (bool, error) {
	n.cardMu.Lock()
	defer n.cardMu.Unlock()
	cfg := n.cfg
	cfg.Card = c
	card, err := buildCard(cfg, n.Address(), n.urls)
	if err != nil {
		return false, err
	}
	return n.setCard(ctx, card)
}

// setCard publishes card when it differs from the one published and
// reports whether it did. The caller holds cardMu.
func (n *Node) setCard(ctx context.Context, card *snap.Card) (bool, error) {
	old, _ := json.Marshal(n.card)
	neu, _ := json.Marshal(card)
	if bytes.Equal(old, neu) {
		return false, nil
	}
	if err := n.publish(ctx, card); err != nil {
		return false, err
	}
	n.card = card
	return true, nil
}

// Address returns the node's P2TR address.
func (n *Node) Address() string { return n.key.Address(n.network) }

// NostrPublicKey returns the node's Nostr key (hex).
func (n *Node) NostrPublicKey() string { return n.key.NostrPublicKey() }

// RelayURLs returns the relays the node uses.
func (n *Node) RelayURLs() []string { return n.urls }

// Card returns the published card.
func (n *Node) Card() *snap.Card {
	n.cardMu.Lock()
	defer n.cardMu.Unlock()
	return n.card
}

// Wait waits for the node to stop after its context ended: the inbox and
// the HTTP transport finish the requests they accepted and send their
// answers, then the pool, the checkpoint and the embedded relay close.
func (n *Node) Wait() error {
	err := <-n.inboxDone
	err = errors.Join(err, n.waitHTTP(), n.waitMetrics()) // their requests use the stores
	if n.stopAgent != nil {
		n.stopAgent() // jobs stop at their next step boundary
	}
	<-n.agentDone
	n.stopPool()
	n.stopSweep()
	<-n.sweepDone
	errs := []error{err, n.pool.Close(), n.checkpoint.Close(), n.stopProposals(), n.closeStore()}
	if n.relay != nil {
		n.stopRelay()
		errs = append(errs, <-n.relayDone, n.relay.Close())
	}
	return errors.Join(errs...)
}
