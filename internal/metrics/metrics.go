package metrics

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Options configure Metrics.
type Options struct {
	// Methods are the method names counted under their own label; any
	// other is "other".
	Methods []string
	// ScrapeTimeout bounds the reading of the gauges computed at scrape
	// time (default 5 s).
	ScrapeTimeout time.Duration
}

// Relay is one configured relay: its connection state for
// snapnode_relay_connections and what the pool counted of it since the
// node started, each read at scrape time.
type Relay struct {
	URL   string
	State string // e.g. "connected", "connecting", "backoff"
	// EventsReceived counts the events it sent, before any check; of
	// them, EventsFiltered were outside their subscription's filter,
	// EventsInvalid had a bad id or signature, EventsDuplicate were
	// delivered already (by it or another relay).
	EventsReceived, EventsFiltered, EventsInvalid, EventsDuplicate uint64
	// PublishFailed counts the publications it refused or did not answer.
	PublishFailed uint64
	// CatchUpPages counts the pages of stored events asked of it after a
	// subscription's REQ (it caps what a REQ returns); CatchUpsCut the
	// catch-ups that stopped short (at the bound of pages, it refused a
	// page, or it sent no EOSE in time), leaving its resume point where
	// it was.
	CatchUpPages, CatchUpsCut uint64
}

// Metrics holds the node's collectors and their registry. It is safe for
// concurrent use.
type Metrics struct {
	reg      *prometheus.Registry
	methods  []string
	messages *prometheus.CounterVec
	errors   *prometheus.CounterVec
	verify   prometheus.Histogram
	handle   *prometheus.HistogramVec
	// The agent's model calls.
	modelCalls   *prometheus.CounterVec
	modelSeconds prometheus.Histogram
	costCents    prometheus.Counter

	mu     sync.Mutex // guards the sources below
	relays func() []Relay
	tasks  func(context.Context) (map[string]int64, error)
	replay func(context.Context) (int64, error)
	jobs   func(context.Context) (map[string]int64, error)
	// checkpoints counts the database's WAL checkpoints.
	checkpoints func() (done, failed int64)
	shares      func() Shares
	// expired counts the Nostr requests dropped as expired (NIP-40).
	expired func() int64
	// staleLines counts the external workers' lines for past steps.
	staleLines func() int64
	timeout    time.Duration
}

// New returns Metrics with every series registered.
func New(opts Options) *Metrics {
	m := &Metrics{
		reg:     prometheus.NewRegistry(),
		methods: slices.Clone(opts.Methods),
		timeout: opts.ScrapeTimeout,
		messages: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "snapnode", Name: "messages_total",
			Help: "SNAP requests answered, by method and outcome (ok or error).",
		}, []string{"method", "outcome"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "snapnode", Name: "errors_total",
			Help: "SNAP error responses, by error code.",
		}, []string{"code"}),
		verify: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "snapnode", Name: "verify_seconds",
			Help:    "Time to validate an inbound message, its signature included.",
			Buckets: prometheus.ExponentialBuckets(10e-6, 2, 14), // 10 µs … 82 ms
		}),
		handle: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "snapnode", Name: "handle_seconds",
			Help:    "Time a handler took to answer a verified request, by method.",
			Buckets: prometheus.ExponentialBuckets(50e-6, 2, 18), // 50 µs … 6.5 s
		}, []string{"method"}),
		modelCalls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "snapnode", Name: "agent_model_calls_total",
			Help: "The agent's calls to its model server, by status (SUCCESS, ERROR, TIMEOUT).",
		}, []string{"status"}),
		modelSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Namespace: "snapnode", Name: "agent_model_call_seconds",
			Help:    "Time a model call took, answered or failed.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 15), // 10 ms … 164 s
		}),
		costCents: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "snapnode", Name: "agent_cost_cents_total",
			Help: "What the agent's model calls cost, in US cents, priced from their usage.",
		}),
	}
	if m.timeout <= 0 {
		m.timeout = 5 * time.Second
	}
	m.reg.MustRegister(m.messages, m.errors, m.verify, m.handle, m.modelCalls, m.modelSeconds, m.costCents, (*gauges)(m),
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Handler serves the metrics in the Prometheus text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// Registry is the registry the series are in, for tests and for adding
// collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Observe records one answered request: its method, the SNAP error code
// of the answer (0 for a result), the time spent validating it and the
// time its handler took (0 when it never reached one).
func (m *Metrics) Observe(method string, code int, verify, handle time.Duration) {
	method = m.method(method)
	outcome := "ok"
	if code != 0 {
		outcome = "error"
		m.errors.WithLabelValues(codeLabel(code)).Inc()
	}
	m.messages.WithLabelValues(method, outcome).Inc()
	if verify > 0 {
		m.verify.Observe(verify.Seconds())
	}
	if handle > 0 {
		m.handle.WithLabelValues(method).Observe(handle.Seconds())
	}
}

func (m *Metrics) method(s string) string {
	if slices.Contains(m.methods, s) {
		return s
	}
	return "other"
}

func codeLabel(code int) string {
	if code < 1000 || code > 5999 {
		return "other"
	}
	return strconv.Itoa(code)
}

// SetRelays sets where the relays' states are read at each scrape.
func (m *Metrics) SetRelays(f func() []Relay) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.relays = f
}

// SetTaskStates sets where the number of tasks by state is read at each
// scrape.
func (m *Metrics) SetTaskStates(f func(context.Context) (map[string]int64, error)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.tasks = f
}

// ObserveModelCall records one of the agent's model calls (it is the
// agent runtime's agent.Observer).
func (m *Metrics) ObserveModelCall(status string, took time.Duration, costCents float64) {
	m.modelCalls.WithLabelValues(status).Inc()
	m.modelSeconds.Observe(took.Seconds())
	if costCents > 0 {
		m.costCents.Add(costCents)
	}
}

// SetAgentJobs sets where the number of agent jobs by status is read at
// each scrape.
func (m *Metrics) SetAgentJobs(f func(context.Context) (map[string]int64, error)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.jobs = f
}

// SetReplaySize sets where the number of replay records is read at each
// scrape.
func (m *Metrics) SetReplaySize(f func(context.Context) (int64, error)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.replay = f
}

// SetCheckpoints sets where the counts of the database's WAL checkpoints,
// done and failed, are read at each scrape.
func (m *Metrics) SetCheckpoints(f func() (done, failed int64)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.checkpoints = f
}

// Shares is what a process sharing the Nostr requests with the other
// replicas of its identity did with those that were not its own.
type Shares struct {
	Alive             int   // processes counted alive and receiving, this one included
	Kept, Taken, Left int64 // passed over; taken up after all; left to their owner
}

// SetShares sets where the replicas' sharing of the requests is read at
// each scrape.
func (m *Metrics) SetShares(f func() Shares) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.shares = f
}

// SetInboxExpired sets where the count of the Nostr requests the inbox
// dropped unprocessed because their NIP-40 expiration had passed is read
// at each scrape.
func (m *Metrics) SetInboxExpired(f func() int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.expired = f
}

// SetWorkerStaleLines sets where the count of the lines for past steps
// the agent's external workers wrote (each skipped, never run) is read at
// each scrape.
func (m *Metrics) SetWorkerStaleLines(f func() int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.staleLines = f
}

// gauges is the collector of the values read at scrape time.
type gauges Metrics

var (
	relayDesc    = prometheus.NewDesc("snapnode_relay_connections", "1 for the current connection state of each relay.", []string{"url", "state"}, nil)
	receivedDesc = prometheus.NewDesc("snapnode_relay_events_received_total", "Events each relay sent the node, before any check.", []string{"url"}, nil)
	droppedDesc  = prometheus.NewDesc("snapnode_relay_events_dropped_total", "Events each relay sent that were not delivered, by reason: filter (outside the subscription's filter), invalid (bad id or signature), duplicate (delivered already).", []string{"url", "reason"}, nil)
	pubFailDesc  = prometheus.NewDesc("snapnode_relay_publish_failed_total", "Publications each relay refused (OK false) or did not answer in time.", []string{"url"}, nil)
	pagesDesc    = prometheus.NewDesc("snapnode_relay_catchup_pages_total", "Pages of stored events asked of each relay after a subscription's REQ, to read back what its cap on a REQ's stored events left out.", []string{"url"}, nil)
	cutDesc      = prometheus.NewDesc("snapnode_relay_catchups_cut_total", "Catch-ups of each relay's stored events that stopped short (at the bound of pages, the relay refused a page for good, or it sent no EOSE in time): its resume point stayed where it was.", []string{"url"}, nil)
	tasksDesc    = prometheus.NewDesc("snapnode_tasks", "Tasks in the store, by state.", []string{"state"}, nil)
	replayDesc   = prometheus.NewDesc("snapnode_replay_records", "Records in the replay store.", nil, nil)
	jobsDesc     = prometheus.NewDesc("snapnode_agent_jobs", "The agent's jobs in the store, by manifest status.", []string{"status"}, nil)
	cpDesc       = prometheus.NewDesc("snapnode_database_checkpoints_total", "WAL checkpoints of the SQLite database run beside its writer, by result (done, failed).", []string{"result"}, nil)
	aliveDesc    = prometheus.NewDesc("snapnode_replicas_alive", "Processes of this identity sharing the Nostr requests, as this one counts them (itself included while it receives).", nil, nil)
	sharedDesc   = prometheus.NewDesc("snapnode_inbox_shared_total", "Nostr requests that were another replica's share, by outcome: kept (passed over unopened), taken_up (their owner stopped, this process answered them), left (their owner had them).", []string{"outcome"}, nil)
	expiredDesc  = prometheus.NewDesc("snapnode_inbox_expired_total", "Nostr requests dropped unprocessed because their NIP-40 expiration had passed, as they were received or as their turn came.", nil, nil)
	staleDesc    = prometheus.NewDesc("snapnode_agent_worker_stale_lines_total", "Lines the agent's external workers wrote for a past step: each skipped, never run.", nil, nil)
)

// Describe implements prometheus.Collector.
func (g *gauges) Describe(ch chan<- *prometheus.Desc) {
	ch <- relayDesc
	ch <- receivedDesc
	ch <- droppedDesc
	ch <- pubFailDesc
	ch <- pagesDesc
	ch <- cutDesc
	ch <- tasksDesc
	ch <- replayDesc
	ch <- jobsDesc
	ch <- cpDesc
	ch <- aliveDesc
	ch <- sharedDesc
	ch <- expiredDesc
	ch <- staleDesc
}

// Collect implements prometheus.Collector. A source that fails is
// reported to the scraper as an invalid metric; the others still are.
func (g *gauges) Collect(ch chan<- prometheus.Metric) {
	g.mu.Lock()
	relays, tasks, replay, jobs, checkpoints, shares, expired, stale, timeout := g.relays, g.tasks, g.replay, g.jobs, g.checkpoints, g.shares, g.expired, g.staleLines, g.timeout
	g.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if relays != nil {
		for _, r := range relays() {
			ch <- prometheus.MustNewConstMetric(relayDesc, prometheus.GaugeValue, 1, r.URL, r.State)
			ch <- prometheus.MustNewConstMetric(receivedDesc, prometheus.CounterValue, float64(r.EventsReceived), r.URL)
			ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(r.EventsFiltered), r.URL, "filter")
			ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(r.EventsInvalid), r.URL, "invalid")
			ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(r.EventsDuplicate), r.URL, "duplicate")
			ch <- prometheus.MustNewConstMetric(pubFailDesc, prometheus.CounterValue, float64(r.PublishFailed), r.URL)
			ch <- prometheus.MustNewConstMetric(pagesDesc, prometheus.CounterValue, float64(r.CatchUpPages), r.URL)
			ch <- prometheus.MustNewConstMetric(cutDesc, prometheus.CounterValue, float64(r.CatchUpsCut), r.URL)
		}
	}
	collectCounts(ctx, ch, tasksDesc, tasks)
	collectCounts(ctx, ch, jobsDesc, jobs)
	if replay != nil {
		n, err := replay(ctx)
		if err != nil {
			ch <- prometheus.NewInvalidMetric(replayDesc, err)
		} else {
			ch <- prometheus.MustNewConstMetric(replayDesc, prometheus.GaugeValue, float64(n))
		}
	}
	if checkpoints != nil {
		done, failed := checkpoints()
		ch <- prometheus.MustNewConstMetric(cpDesc, prometheus.CounterValue, float64(done), "done")
		ch <- prometheus.MustNewConstMetric(cpDesc, prometheus.CounterValue, float64(failed), "failed")
	}
	if shares != nil {
		sh := shares()
		ch <- prometheus.MustNewConstMetric(aliveDesc, prometheus.GaugeValue, float64(sh.Alive))
		ch <- prometheus.MustNewConstMetric(sharedDesc, prometheus.CounterValue, float64(sh.Kept), "kept")
		ch <- prometheus.MustNewConstMetric(sharedDesc, prometheus.CounterValue, float64(sh.Taken), "taken_up")
		ch <- prometheus.MustNewConstMetric(sharedDesc, prometheus.CounterValue, float64(sh.Left), "left")
	}
	if expired != nil {
		ch <- prometheus.MustNewConstMetric(expiredDesc, prometheus.CounterValue, float64(expired()))
	}
	if stale != nil {
		ch <- prometheus.MustNewConstMetric(staleDesc, prometheus.CounterValue, float64(stale()))
	}
}

// collectCounts sends the gauges of desc, one per label value, that
// counts reads (nothing when it is nil; an invalid metric when it fails).
func collectCounts(ctx context.Context, ch chan<- prometheus.Metric, desc *prometheus.Desc, counts func(context.Context) (map[string]int64, error)) {
	if counts == nil {
		return
	}
	byLabel, err := counts(ctx)
	if err != nil {
		ch <- prometheus.NewInvalidMetric(desc, err)
	}
	for label, n := range byLabel {
		ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(n), label)
	}
}

var _ prometheus.Collector = (*gauges)(nil)
