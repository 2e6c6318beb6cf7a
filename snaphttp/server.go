package snaphttp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"golang.org/x/time/rate"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/bufpool"
	"github.com/snapnode/snapnode/internal/defaults"
	"github.com/snapnode/snapnode/internal/origins"
	"github.com/snapnode/snapnode/internal/peercap"
	"github.com/snapnode/snapnode/internal/ratelimit"
	"github.com/snapnode/snapnode/snap"
)

// Defaults of Config.
const (
	DefaultMaxBody             = 256 << 10
	DefaultMaxResponse         = 4 << 20
	DefaultRate                = rate.Limit(50) // requests per second per peer
	DefaultBurst               = 100
	DefaultMonitorRate         = rate.Limit(5) // /healthz and /metrics requests per second per peer
	DefaultMonitorBurst        = 20
	DefaultMaxPeers            = 10_000
	DefaultStreamBuffer        = 64
	DefaultStreamBufferBytes   = 1 << 20
	DefaultWriteTimeout        = 10 * time.Second
	DefaultReadTimeout         = 30 * time.Second
	DefaultHeaderTimeout       = 10 * time.Second
	DefaultBodyMemory          = 32 << 20
	DefaultAnswerMemory        = 64 << 20
	DefaultPingInterval        = 30 * time.Second
	DefaultIdleTimeout         = 60 * time.Second
	DefaultMaxConnsPerPeer     = 32
	DefaultMaxConns            = 1024
	DefaultMaxPending          = 8
	DefaultShutdownTimeout     = 10 * time.Second
	DefaultShutdownReadTimeout = time.Second
	DefaultCardResign          = 5 * time.Minute
)

// MaxHeaderBytes bounds the header block of a request (its request line
// and headers; net/http allows 4 KiB of slack past it): a larger one is
// answered 431 and its connection closed. A request's headers are held
// while it is answered, a WebSocket upgrade's until the upgrade is
// answered; net/http's own default, 1 MiB, would let each connection
// hold that much.
const MaxHeaderBytes = 32 << 10

// Config configures a Server. Only Handler is required; every zero limit
// takes its default.
type Config struct {
	// Handler answers the messages posted to /snap or sent over the
	// WebSocket (a *snap.Server).
	Handler snap.Handler
	// Key signs the well-known card; Card gives the card to serve (nil,
	// or returning nil: 404). The card is signed again when it changes
	// and at least every CardResign, with the time of signing.
	Key        *identity.Key
	Card       func() *snap.Card
	CardResign time.Duration
	// Address is the agent's address, shown by /healthz.
	Address string
	// Metrics is served at /metrics to clients on loopback only, unless
	// MetricsPublic: a client on another machine gets the 404 of a nil
	// Metrics, which does not tell it that metrics exist. Behind a reverse
	// proxy on the same machine every client is on loopback: such a proxy
	// must not forward /metrics. nil: 404 to every client.
	Metrics http.Handler
	// MetricsPublic serves Metrics to clients on any address.
	MetricsPublic bool
	// Console is served at /console and below (the operator's web
	// console, which does its own access control); nil: 404.
	Console http.Handler
	Logger  *slog.Logger
	// Now is the clock of rate limiting and card signing.
	Now func() time.Time

	// MaxBody bounds a posted message and a WebSocket message, in bytes;
	// a larger one gets the error 1004 {field: "message", constraint:
	// "maxSize", limit}: in an HTTP 413's body (unsigned, as every HTTP
	// refusal), or over WebSocket as a signed response, then close 1009.
	MaxBody int64
	// MaxResponse bounds one serialized response or stream event sent
	// over HTTP, SSE or WebSocket, in bytes (default DefaultMaxResponse).
	// A larger answer is shrunk (a task drops its oldest history), else
	// the peer gets 5001 {reason, size, limit, transport}. The answers
	// being written at once are bounded by AnswerMemory.
	MaxResponse int
	// Rate and Burst are each peer's token bucket (a peer is an IPv4
	// address or an IPv6 /64): every POST /snap, WebSocket upgrade and
	// WebSocket message takes a token. Without one, an HTTP request gets
	// 429 with Retry-After before its body is read, and a WebSocket
	// message waits for its token (the connection is served one request
	// at a time, so waiting slows only that peer). rate.Inf disables.
	Rate  rate.Limit
	Burst int
	// MonitorRate and MonitorBurst are each peer's token bucket for
	// GET /healthz and /metrics, apart from Rate's so that monitoring is
	// neither starved by a peer's SNAP traffic nor a way around its
	// limit; without a token a request gets 429 with Retry-After.
	// rate.Inf disables.
	MonitorRate  rate.Limit
	MonitorBurst int
	// MaxPeers bounds each map of token buckets.
	MaxPeers int
	// StreamBuffer bounds the messages queued for one SSE response or
	// WebSocket connection. While it is full a stream's handler waits in
	// emit for the peer to take a frame, as a write to a ResponseWriter
	// waits; a peer that takes nothing for WriteTimeout is too slow: its
	// stream is ended (ErrSlowReader) and its connection closed. A
	// stalled peer so holds up only its own stream's goroutine, for
	// WriteTimeout at most: whoever feeds several streams feeds each from
	// its own goroutine (see snap.StreamHandlerFunc).
	StreamBuffer int
	// StreamBufferBytes bounds the same queue in bytes (default
	// DefaultStreamBufferBytes), counting a frame until it is written; a
	// frame larger than it (up to MaxResponse) is queued alone. A peer
	// that reads slowly so holds this much of the node's memory, not
	// StreamBuffer frames of up to MaxResponse each.
	StreamBufferBytes int
	// BodyMemory bounds the bytes of the request bodies and WebSocket
	// messages held at once, in all peers' requests together, from the
	// moment they are read until they are answered (a body counts its
	// Content-Length, or MaxBody when it has none); one peer may hold a
	// sixteenth of it, or MaxBody when that is larger. A POST beyond
	// either gets 429 with Retry-After before its body is read; a
	// WebSocket connection is not read until its message fits. Default
	// DefaultBodyMemory, or MaxBody when that is larger; at least
	// MaxBody.
	BodyMemory int64
	// AnswerMemory bounds the bytes of the answers held at once while
	// they are written, in all peers' exchanges together: a response to
	// a POST, and each SSE event and WebSocket message, counts its
	// serialized size from when it is serialized until it is written, or
	// its write fails or times out (WriteTimeout). One peer may hold a
	// sixteenth of it, or MaxResponse when that is larger. Each request
	// reserves room for its answer before it is handled: its own length
	// and 4 KiB. A request that finds no room for that within a quarter
	// of a second is not handled: it is answered 5003 {retryAfter: 1,
	// limit: "answer_memory", scope: "node" or "peer"}, HTTP 503 with
	// Retry-After for a POST (with or without SSE), a signed SNAP error
	// response over WebSocket, whose connection goes on with its next
	// request; a retry is safe. An answer larger than its reservation
	// waits a quarter of a second at most for room for the rest; without
	// it the request, which was handled, is answered in brief, never
	// 5003: a response that carries a task (message/send, message/stream,
	// tasks/get, tasks/cancel) carries it abridged (its id, contextId and
	// status, beside "abridged": {omitted, note}, tasks/get returning it
	// whole), any other 5001 {limit: "answer_memory", handled: true}
	// (for a POSTed service/call, HTTP 500). An SSE or WebSocket event
	// without room is not sent, the final response telling the task.
	// Peers that read their answers slowly, or not at all, so hold at
	// most this much of the node's memory, however many connections they
	// open, where each held an answer of up to MaxResponse (twice over:
	// the response and its serialized form) until its write timed out.
	// An answer waiting for room holds its serialized form meanwhile
	// (the response itself let go), a quarter of a second at most, or,
	// behind the answers of its own exchange still being written
	// (a WebSocket's previous answer, a stream's events), as long as
	// its peer takes those; the answers waiting hold at most as much
	// again as AnswerMemory, a peer's at most its share, and one past
	// that does not wait (a reservation is refused, an answer abridged).
	// The answer is bounded once it is made, not before (a smaller MaxSize
	// for the Handler): a handler's answer is made in milliseconds, but
	// a message/send or a stream may run for minutes and would hold its
	// room all that while, and a MaxSize cut to the room left would
	// answer a task's history short for the load of others. Default
	// DefaultAnswerMemory, or MaxResponse when that is larger; at least
	// MaxResponse.
	AnswerMemory int64
	// WriteTimeout bounds writing one message or response, and a
	// stream's wait for room in its queue (StreamBuffer); ReadTimeout
	// bounds reading a posted body; HeaderTimeout bounds reading a
	// request's headers (a connection that takes longer is closed).
	WriteTimeout  time.Duration
	ReadTimeout   time.Duration
	HeaderTimeout time.Duration
	// PingInterval is the WebSocket ping period; a peer that sends
	// nothing, pongs included, for two periods is closed.
	PingInterval time.Duration
	// IdleTimeout closes a WebSocket connection with no request for that
	// long, and an idle HTTP keep-alive connection.
	IdleTimeout time.Duration
	// MaxConnsPerPeer and MaxConns cap WebSocket connections; beyond
	// them an upgrade gets 429 (per peer) or 503 (in all).
	MaxConnsPerPeer int
	MaxConns        int
	// MaxTCPConns and MaxTCPConnsPerPeer cap the TCP connections held, of
	// any kind, in all and per peer; zero takes DefaultTCPConns of the
	// process's open-file limit. A connection over a cap closes the
	// connection idle the longest (no request in progress) in its scope;
	// when none is idle it is answered 429 (per peer) or 503 (in all),
	// with Retry-After and a SNAP error naming the cap (data: retryAfter,
	// limit, scope "peer" or "node"), and closed.
	MaxTCPConns        int
	MaxTCPConnsPerPeer int
	// MaxPending bounds the requests read ahead on one WebSocket
	// connection while one is handled.
	MaxPending int
	// ShutdownTimeout is how long Serve waits, once its context ends, for
	// in-flight requests before it cancels them and closes every
	// connection.
	ShutdownTimeout time.Duration
	// ShutdownReadTimeout bounds, once shutdown began, the wait for the
	// rest of a WebSocket message the server had begun to read (default
	// DefaultShutdownReadTimeout), from the answer to the connection's
	// request in flight (until then its messages are read as usual): a
	// message that comes whole within it, and within MaxBody, is refused
	// (5003, the shutdown's) before the close 1001; one that does not gets
	// the close alone. Nothing sent after it is read. Shutdown waits no
	// longer than ShutdownTimeout in any case.
	ShutdownReadTimeout time.Duration
	// AllowedOrigins are the origins ("scheme://host[:port]", as
	// browsers send Origin; "*": every one) of the web pages that may
	// send messages: POST /snap (SSE too) and the WebSocket upgrade. A
	// request without Origin (no browser page: SDK peers, curl) and one
	// of the endpoint's own origin are served whatever it says; a page
	// of another origin gets 403, so that a page in the browser of a
	// user on the machine cannot send messages to a loopback endpoint
	// (a POST of Content-Type text/plain needs no CORS preflight).
	// SetAllowedOrigins changes them while the server runs.
	AllowedOrigins []string
	// AllowedHosts are the host names a request may be addressed to
	// (its Host) besides IP addresses and loopback names (localhost and
	// names under .localhost); "*": any. A request to another name gets
	// 421: a page whose own name was made to resolve to this machine
	// (DNS rebinding) would otherwise be of the same origin as the
	// endpoint, and read its answers.
	AllowedHosts []string
}

func (c *Config) fill() error {
	if c.Handler == nil {
		return errors.New("snaphttp: Config.Handler is nil")
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	defaults.Positive(&c.MaxBody, DefaultMaxBody)
	defaults.Positive(&c.Rate, DefaultRate)
	defaults.Positive(&c.Burst, DefaultBurst)
	defaults.Positive(&c.MonitorRate, DefaultMonitorRate)
	defaults.Positive(&c.MonitorBurst, DefaultMonitorBurst)
	defaults.Positive(&c.MaxPeers, DefaultMaxPeers)
	defaults.Positive(&c.StreamBuffer, DefaultStreamBuffer)
	defaults.Positive(&c.StreamBufferBytes, DefaultStreamBufferBytes)
	defaults.Positive(&c.MaxConnsPerPeer, DefaultMaxConnsPerPeer)
	defaults.Positive(&c.MaxConns, DefaultMaxConns)
	defaults.Positive(&c.MaxPending, DefaultMaxPending)
	if c.MaxTCPConns <= 0 {
		c.MaxTCPConns, _ = DefaultTCPConns(openFileLimit())
	}
	if c.MaxTCPConnsPerPeer <= 0 {
		c.MaxTCPConnsPerPeer = perPeerConns(c.MaxTCPConns)
	}
	c.MaxTCPConnsPerPeer = min(c.MaxTCPConnsPerPeer, c.MaxTCPConns)
	defaults.Positive(&c.MaxResponse, DefaultMaxResponse)
	switch {
	case c.AnswerMemory <= 0:
		c.AnswerMemory = max(DefaultAnswerMemory, int64(c.MaxResponse))
	case c.AnswerMemory < int64(c.MaxResponse):
		return fmt.Errorf("snaphttp: Config.AnswerMemory %d is below MaxResponse %d: an answer of MaxResponse could never be written", c.AnswerMemory, c.MaxResponse)
	}
	switch {
	case c.BodyMemory <= 0:
		c.BodyMemory = max(DefaultBodyMemory, c.MaxBody)
	case c.BodyMemory < c.MaxBody:
		return fmt.Errorf("snaphttp: Config.BodyMemory %d is below MaxBody %d: a body of MaxBody could never be read", c.BodyMemory, c.MaxBody)
	}
	defaults.Positive(&c.CardResign, DefaultCardResign)
	defaults.Positive(&c.WriteTimeout, DefaultWriteTimeout)
	defaults.Positive(&c.ReadTimeout, DefaultReadTimeout)
	defaults.Positive(&c.HeaderTimeout, DefaultHeaderTimeout)
	defaults.Positive(&c.PingInterval, DefaultPingInterval)
	defaults.Positive(&c.IdleTimeout, DefaultIdleTimeout)
	defaults.Positive(&c.ShutdownTimeout, DefaultShutdownTimeout)
	defaults.Positive(&c.ShutdownReadTimeout, DefaultShutdownReadTimeout)
	if _, err := origins.Parse(c.AllowedOrigins); err != nil {
		return fmt.Errorf("snaphttp: Config.AllowedOrigins: %w", err)
	}
	if _, err := origins.ParseHosts(c.AllowedHosts); err != nil {
		return fmt.Errorf("snaphttp: Config.AllowedHosts: %w", err)
	}
	return nil
}

// Server serves SNAP over HTTP, SSE and WebSocket, as the SNAP
// specification's transports and discovery define them
// (docs/conformance.md):
//
//	POST /snap                           a message in, its signed response out
//	POST /snap, Accept: text/event-stream  events then the response, as SSE
//	GET  /snap (WebSocket upgrade)        one text frame per message
//	GET  /.well-known/snap-agent.json     the signed agent card
//	GET  /healthz                         {"status":"ok",…}
//	     /metrics                         Config.Metrics
//	     /console, /console/…             Config.Console
//
// It is an http.Handler; Serve runs it on a listener and stops it
// gracefully.
type Server struct {
	cfg      Config
	mux      *http.ServeMux
	limits   *ratelimit.Limiter // per peer (peerKey)
	monitor  *ratelimit.Limiter // /healthz and /metrics, per peer
	conns    *peercap.Counter
	bodies   *bodyBudget   // BodyMemory
	answers  *answerBudget // AnswerMemory
	tcp      atomic.Pointer[peercap.Listener]
	card     *cardSigner
	upgrader websocket.Upgrader
	wsReads  bufpool.Buffers // the WebSocket readers' message buffers (wsMessageBuffer)
	started  time.Time
	// pages is AllowedOrigins (SetAllowedOrigins changes it), hosts
	// AllowedHosts (SetAllowedHosts): a request loads each once, and
	// sees the old list or the new one whole.
	pages atomic.Pointer[pagePolicy]
	hosts atomic.Pointer[origins.Hosts]
	// refusedOrigin and refusedHost are set once a page of a refused
	// origin, or a request to a refused host, was logged (at warn, once).
	refusedOrigin, refusedHost atomic.Bool
	// refusedMetrics is set once a client off loopback was refused
	// /metrics and that was logged (at info, once).
	refusedMetrics atomic.Bool

	// base is the context of every request; it ends when Serve gives up
	// waiting for in-flight requests.
	base     context.Context
	stopBase context.CancelFunc
	// streams ends when shutdown begins: streams end then.
	streams     context.Context
	stopStreams context.CancelFunc
	// draining is closed when shutdown begins.
	draining chan struct{}
	drain    sync.Once
	serving  atomic.Bool
	// drained, set by tests only, is called by Serve once shutdown
	// began, before it waits for anything.
	drained func()
	// socketRead, set by tests only, is called after each read from a
	// WebSocket's socket that brought bytes (n), once the WebSocket
	// counted it (see countingConn).
	socketRead func(n int)

	mu      sync.Mutex
	ws      map[*wsConn]struct{}
	wsGroup sync.WaitGroup
	active  atomic.Int64 // exchanges being answered
}

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	if err := cfg.fill(); err != nil {
		return nil, err
	}
	s := &Server{
		cfg:      cfg,
		mux:      http.NewServeMux(),
		limits:   newPeerLimits(cfg),
		monitor:  newLimits(cfg.MonitorRate, cfg.MonitorBurst, cfg.MaxPeers, cfg.Now),
		conns:    peercap.New(cfg.MaxConnsPerPeer, cfg.MaxConns, nil),
		bodies:   newBodyBudget(cfg.BodyMemory, cfg.MaxBody),
		answers:  newAnswerBudget(cfg.AnswerMemory, int64(cfg.MaxResponse)),
		card:     &cardSigner{key: cfg.Key, card: cfg.Card, now: cfg.Now, every: cfg.CardResign},
		started:  cfg.Now(),
		draining: make(chan struct{}),
		ws:       make(map[*wsConn]struct{}),
	}
	pages, err := newPagePolicy(cfg.AllowedOrigins)
	if err != nil {
		return nil, fmt.Errorf("snaphttp: Config.AllowedOrigins: %w", err)
	}
	s.pages.Store(pages)
	hosts, _ := origins.ParseHosts(cfg.AllowedHosts) // checked by fill
	s.hosts.Store(&hosts)
	s.base, s.stopBase = context.WithCancel(context.Background())
	s.streams, s.stopStreams = context.WithCancel(context.Background())
	s.upgrader = websocket.Upgrader{
		// A message is framed in a buffer borrowed for its write: an
		// idle WebSocket holds no write buffer.
		WriteBufferPool: new(sync.Pool),
		// Its own small read buffer, in place of the HTTP server's
		// 4 KiB one: it holds frame headers and control frames, and a
		// message's payload larger than it is read directly into a
		// buffer lent for the read (see readWebSocket).
		ReadBufferSize:   wsReadBuffer,
		HandshakeTimeout: cfg.WriteTimeout,
		CheckOrigin:      s.webSocketOrigin,
		Error: func(w http.ResponseWriter, r *http.Request, status int, reason error) {
			if hj, ok := w.(*countingHijacker); ok && hj.early {
				return // answered by the Hijack, the connection closed
			}
			if status == http.StatusForbidden {
				s.refuseOrigin(w, r)
				return
			}
			writeError(w, status, refusalCode(status), reason.Error(), nil)
		},
	}
	s.mux.HandleFunc("POST /snap", s.post)
	s.mux.HandleFunc("OPTIONS /snap", s.preflight)
	s.mux.HandleFunc("GET /snap", s.websocket)
	s.mux.HandleFunc("GET "+WellKnownPath, s.wellKnown)
	s.mux.HandleFunc("OPTIONS "+WellKnownPath, s.wellKnownOptions)
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("/metrics", s.metrics)
	if cfg.Console != nil {
		s.mux.Handle("/console", cfg.Console)
		s.mux.Handle("/console/", cfg.Console)
	}
	for path, allow := range map[string]string{"/snap": "GET, POST, OPTIONS", WellKnownPath: "GET, OPTIONS", "/healthz": "GET"} {
		s.mux.HandleFunc(path, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Allow", allow)
			writeError(w, http.StatusMethodNotAllowed, snap.CodeInvalidMessage, r.Method+" is not allowed on "+path, nil)
		})
	}
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, snap.CodeInvalidMessage, "not found: "+r.URL.Path, nil)
	})
	return s, nil
}

// ServeHTTP implements http.Handler. Every response carries SNAP-Version
// and must be written within WriteTimeout: /snap's refusals too (429, 426,
// 405), else a peer that pipelines requests and never reads the answers
// holds its connection for ever once the sockets' buffers are full. An
// exchange on /snap sets the deadline again before it writes (post, per
// frame of a stream, per WebSocket message). A request with a body must
// send it within ReadTimeout, on every route: what a handler leaves
// unread of it is read and dropped (discardBody) before the answer is
// written, within WriteTimeout of then; a body that never comes gets
// the answer once ReadTimeout passes, and its connection closed (POST
// /snap sets its own deadlines as it reads).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("SNAP-Version", snap.ProtocolVersion)
	if len(r.TransferEncoding) > 0 {
		// A request with both Content-Length and Transfer-Encoding, a
		// request smuggling shape, must have its connection closed once
		// answered (RFC 9112 §6.1); net/http keeps it, and drops the
		// Content-Length before the request gets here, so that every
		// chunked request closes its connection. SDK peers send a
		// Content-Length alone.
		w.Header().Set("Connection", "close")
	}
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	if r.ContentLength != 0 {
		_ = rc.SetReadDeadline(time.Now().Add(s.cfg.ReadTimeout))
		defer func() {
			if w.Header().Get("Connection") != "close" {
				s.discardBody(w, rc, r)
			}
		}()
	}
	if !s.hosts.Load().Allows(r.Host) {
		refuseHost(w, r, s.cfg.Logger, &s.refusedHost)
		return
	}
	if r.RequestURI == "*" {
		// net/http answers OPTIONS * itself; the mux would answer any
		// other "*" (HTTP/2's cleartext preface among them) 400 with no
		// body.
		w.Header().Set("Connection", "close")
		writeError(w, http.StatusBadRequest, snap.CodeInvalidMessage,
			fmt.Sprintf("%s %s: the request target * names no resource; HTTP/2 is not served in cleartext: send HTTP/1.1 requests to /snap", r.Method, r.Proto),
			map[string]any{"field": "target", "reason": "request target *"})
		return
	}
	s.mux.ServeHTTP(w, r)
}

// discardBody reads and drops what the handler left unread of the
// request's body, at most MaxBody, before the answer is written: net/http
// would read it then itself, to keep the connection, but under the write
// deadline set as the request came, which a body that never comes
// outlasts: the answer would be lost, and the peer told nothing. A body
// that is larger, or does not come within ReadTimeout, closes the
// connection once the answer is written. The answer is then written
// within WriteTimeout. A body declared larger than MaxBody is not read
// (the connection closes), nor one the peer waits to be asked for
// (Expect: 100-continue; net/http closes the connection when it was not
// read whole).
func (s *Server) discardBody(w http.ResponseWriter, rc *http.ResponseController, r *http.Request) {
	switch {
	case r.Header.Get("Expect") != "":
		return
	case r.ContentLength > s.cfg.MaxBody:
		w.Header().Set("Connection", "close")
		return
	}
	if _, err := io.CopyN(io.Discard, r.Body, s.cfg.MaxBody+1); !errors.Is(err, io.EOF) {
		w.Header().Set("Connection", "close")
	}
	_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
}

// onLoopback reports whether the remote address addr (host:port, as
// http.Request.RemoteAddr) is a loopback address, IPv4-mapped ones
// included.
func onLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

// refuseHost answers a request addressed to a host name that is not
// this server's (see Config.AllowedHosts): 421 Misdirected Request. The
// first refusal (logged set) is logged at warn.
func refuseHost(w http.ResponseWriter, r *http.Request, log *slog.Logger, logged *atomic.Bool) {
	if logged.CompareAndSwap(false, true) {
		log.Warn("snaphttp: a request to another host name refused (a web page's DNS rebinding, or a name of this node's that http_allowed_hosts does not list); logged once",
			"host", r.Host, "remote", r.RemoteAddr)
	}
	writeError(w, http.StatusMisdirectedRequest, snap.CodeInvalidMessage,
		fmt.Sprintf("this node does not answer to the host name %q: it answers to IP addresses, localhost, the hosts of its http_listen, http_public_url and card endpoints, and the names of http_allowed_hosts (which a SIGHUP reloads)", r.Host),
		map[string]any{"host": r.Host})
}

// pagePolicy is a list of allowed origins with the CrossOriginProtection
// that trusts them: made whole for each list, as a protection's trusted
// origins can be added but not removed.
type pagePolicy struct {
	list        origins.List
	crossOrigin *http.CrossOriginProtection
}

func newPagePolicy(list []string) (*pagePolicy, error) {
	l, err := origins.Parse(list)
	if err != nil {
		return nil, err
	}
	p := &pagePolicy{list: l, crossOrigin: http.NewCrossOriginProtection()}
	for _, o := range l.Origins() {
		if err := p.crossOrigin.AddTrustedOrigin(o); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// webSocketOrigin is the upgrader's CheckOrigin: no Origin (no browser
// page), the endpoint's own, or one of AllowedOrigins.
func (s *Server) webSocketOrigin(r *http.Request) bool {
	o := r.Header.Get("Origin")
	return o == "" || s.pages.Load().list.Has(o) || origins.SameHost(o, r.Host)
}

// pageAllowed reports whether a POST may be taken: it comes from no
// browser page of another origin than the endpoint's, or from one of
// AllowedOrigins (net/http's CrossOriginProtection reads Sec-Fetch-Site,
// else compares Origin with Host).
func (s *Server) pageAllowed(r *http.Request) bool {
	p := s.pages.Load()
	return p.list.Any() || p.crossOrigin.Check(r) == nil
}

// allowPage lets a browser page of an origin in AllowedOrigins read the
// answer to its request (CORS): a page of another origin than the
// endpoint's may read nothing else.
func (s *Server) allowPage(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Add("Vary", "Origin")
	if o := r.Header.Get("Origin"); o != "" && s.pages.Load().list.Has(o) {
		h.Set("Access-Control-Allow-Origin", o)
		h.Set("Access-Control-Expose-Headers", "SNAP-Version, Retry-After")
	}
}

// preflight answers OPTIONS /snap, the CORS preflight a browser sends
// before a page's POST of Content-Type application/json (as a browser
// SDK posts): a page of an origin in AllowedOrigins may POST with
// Content-Type and Accept (SSE), and need not ask again for 10 minutes;
// a page of another origin gets 403, as its POST would. A request
// without Origin is told what /snap allows.
func (s *Server) preflight(w http.ResponseWriter, r *http.Request) {
	o := r.Header.Get("Origin")
	if o != "" && !s.pages.Load().list.Has(o) && !origins.SameHost(o, r.Host) {
		s.refuseOrigin(w, r)
		return
	}
	s.allowPage(w, r)
	h := w.Header()
	h.Set("Allow", "GET, POST, OPTIONS")
	if h.Get("Access-Control-Allow-Origin") != "" {
		h.Set("Access-Control-Allow-Methods", "POST")
		h.Set("Access-Control-Allow-Headers", "Content-Type, Accept")
		h.Set("Access-Control-Max-Age", "600")
	}
	w.WriteHeader(http.StatusNoContent)
}

// refuseOrigin answers a request of a browser page whose origin may not
// send messages (see Config.AllowedOrigins): 403.
func (s *Server) refuseOrigin(w http.ResponseWriter, r *http.Request) {
	o := r.Header.Get("Origin")
	if s.refusedOrigin.CompareAndSwap(false, true) {
		s.cfg.Logger.Warn("snaphttp: a message from a web page of another origin refused; list the origins of pages that may send messages in http_allowed_origins; logged once",
			"origin", o, "sec_fetch_site", r.Header.Get("Sec-Fetch-Site"), "remote", r.RemoteAddr)
	}
	writeError(w, http.StatusForbidden, snap.CodeInvalidMessage,
		fmt.Sprintf("a web page of origin %q may not send messages to this endpoint: only pages of its own origin and of http_allowed_origins (which a SIGHUP reloads) may", o),
		map[string]any{"origin": o})
}

// ErrServing is returned by a second call of Serve.
var ErrServing = errors.New("snaphttp: Serve called twice")

// Serve serves on ln until ctx ends, then shuts down gracefully: it stops
// accepting, ends the streams in flight (each gets its final response),
// closes each WebSocket connection once its request in flight is
// answered and those it read ahead are refused (5003, see websocket;
// the message it was receiving too, if its rest comes within
// ShutdownReadTimeout), and waits up to ShutdownTimeout for
// the requests in flight to finish; then it cancels them and closes every
// connection. It returns once every request handler has returned. A
// Server serves once.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	if !s.serving.CompareAndSwap(false, true) {
		ln.Close()
		return ErrServing
	}
	limited := peercap.NewListener(ln, peercap.ListenerConfig{Total: s.cfg.MaxTCPConns, PerPeer: s.cfg.MaxTCPConnsPerPeer, Refuse: refuseConns(s.cfg.MaxTCPConns, s.cfg.MaxTCPConnsPerPeer)})
	s.tcp.Store(limited)
	fresh := newFreshConns()
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: s.cfg.HeaderTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		IdleTimeout:       s.cfg.IdleTimeout,
		ConnState: func(c net.Conn, st http.ConnState) {
			limited.ConnState(c, st)
			fresh.state(c, st)
		},
		BaseContext: func(net.Listener) context.Context { return s.base },
		ErrorLog:    slog.NewLogLogger(s.cfg.Logger.Handler(), slog.LevelDebug),
	}
	accepting := &onceListener{Listener: limited}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(accepting) }()
	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-served:
	}

	// Every answer closes its connection from now (idle ones close now),
	// before streams end and handlers see the drain: an answer written
	// once shutdown began must not leave its connection open for a next
	// request that Shutdown would cut, unanswered, once it is idle.
	srv.SetKeepAlivesEnabled(false)
	s.beginDrain()
	if s.drained != nil {
		s.drained()
	}
	grace, cancel := context.WithTimeout(context.Background(), s.cfg.ShutdownTimeout)
	defer cancel()
	// Shutdown drops, unanswered, a request it reads on a connection
	// that had sent none before it began. So first: accepting stops, and
	// the connections yet to send their first request are waited for as
	// long as Shutdown would wait for them: their request is answered, a
	// POST /snap refused (503, the shutdown's 5003).
	stopped := accepting.Close() == nil
	fresh.await(grace, newConnWait)
	shutErr := srv.Shutdown(grace)
	wsDone := make(chan struct{})
	go func() { s.wsGroup.Wait(); close(wsDone) }()
	select {
	case <-wsDone:
	case <-grace.Done():
	}
	if grace.Err() != nil {
		s.cfg.Logger.Warn("snaphttp: requests still in flight after the shutdown timeout; cancelling them", "timeout", s.cfg.ShutdownTimeout)
		// The connections go first: a handler that returns once its
		// context is cancelled must find no connection left to answer on.
		srv.Close()
		s.closeAllWS()
		s.stopBase()
	}
	<-wsDone
	s.stopBase()
	if serveErr == nil {
		serveErr = <-served
	}
	if errors.Is(serveErr, http.ErrServerClosed) || stopped && errors.Is(serveErr, net.ErrClosed) {
		serveErr = nil
	}
	if errors.Is(shutErr, context.DeadlineExceeded) {
		shutErr = nil // reported above; the connections were closed
	}
	return errors.Join(serveErr, shutErr)
}

// beginDrain ends streams and tells WebSocket connections to close once
// their request in flight is answered and those read ahead are refused.
func (s *Server) beginDrain() {
	s.drain.Do(func() {
		close(s.draining)
		s.stopStreams()
	})
}

// streamContext returns ctx, ended also when shutdown begins for a
// stream request (snap.IsStreamRequest).
func (s *Server) streamContext(ctx context.Context, stream bool) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	if !stream {
		return ctx, cancel
	}
	stop := context.AfterFunc(s.streams, cancel)
	return ctx, func() { stop(); cancel() }
}

// newPeerLimits is the token buckets of cfg, one per peer; rate.Inf
// limits nothing.
func newPeerLimits(cfg Config) *ratelimit.Limiter {
	return newLimits(cfg.Rate, cfg.Burst, cfg.MaxPeers, cfg.Now)
}

// newLimits returns token buckets of r a second and bursts of burst, one
// per peer, keeping at most maxPeers; rate.Inf limits nothing.
func newLimits(r rate.Limit, burst, maxPeers int, now func() time.Time) *ratelimit.Limiter {
	f := float64(r)
	if r == rate.Inf {
		f = 0
	}
	return ratelimit.New(ratelimit.Config{Rate: f, Burst: burst, MaxKeys: maxPeers, Now: now})
}

// SetRate changes each peer's allowance while the server runs, as
// Config.Rate and Burst would set it (rate.Inf disables the limit, a
// burst of 0 takes DefaultBurst); the buckets of peers already seen keep
// their tokens and refill at the new rate.
func (s *Server) SetRate(r rate.Limit, burst int) {
	if burst <= 0 {
		burst = DefaultBurst
	}
	if r == rate.Inf {
		r = 0
	}
	s.limits.SetRate(float64(r), burst)
}

// SetAllowedHosts changes the host names the server answers to while it
// runs, as Config.AllowedHosts would set them, from the next request on;
// on an error it changes nothing.
func (s *Server) SetAllowedHosts(list []string) error {
	hosts, err := origins.ParseHosts(list)
	if err != nil {
		return fmt.Errorf("snaphttp: allowed hosts: %w", err)
	}
	s.hosts.Store(&hosts)
	return nil
}

// SetAllowedOrigins changes the origins of the web pages that may send
// messages while the server runs, as Config.AllowedOrigins would set
// them, from the next request on; on an error it changes nothing. It
// returns the origins added and removed (see origins.Changes).
func (s *Server) SetAllowedOrigins(list []string) (added, removed []string, err error) {
	p, err := newPagePolicy(list)
	if err != nil {
		return nil, nil, fmt.Errorf("snaphttp: allowed origins: %w", err)
	}
	old := s.pages.Swap(p)
	added, removed = origins.Changes(old.list, p.list)
	return added, removed, nil
}

// admit takes a rate-limit token for the request's peer, or answers 429
// with Retry-After and returns false.
func (s *Server) admit(w http.ResponseWriter, r *http.Request) bool {
	return admitPeer(s.limits, w, r)
}

// admitPeer takes a token from l for the request's peer, or answers 429
// with Retry-After and returns false.
func admitPeer(l *ratelimit.Limiter, w http.ResponseWriter, r *http.Request) bool {
	ok, wait := l.Allow(peerKey(r).String())
	if ok {
		return true
	}
	secs := ratelimit.RetryAfterSeconds(wait)
	w.Header().Set("Retry-After", fmt.Sprint(secs))
	limit, window := l.Window()
	writeError(w, http.StatusTooManyRequests, snap.CodeRateLimitExceeded, "rate limit exceeded; retry later",
		map[string]any{"retryAfter": secs, "limit": limit, "window": window})
	return false
}

// writeError answers a request that is not a SNAP exchange (the body
// could not be read, the route does not exist, the peer is limited) with
// status and a body of SNAP's error shape, {"error":{"code","message",
// "data"}}, which allows no other member: the status and whatever else
// the refusal says (retryAfter, limit, scope) are members of data.
func writeError(w http.ResponseWriter, status int, code snap.Code, msg string, data map[string]any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(errorBody(status, code, msg, data))
}

// errorBody is the body writeError writes.
func errorBody(status int, code snap.Code, msg string, data map[string]any) []byte {
	d := make(map[string]any, len(data)+1)
	for k, v := range data {
		d[k] = v
	}
	d["status"] = status
	b, _ := json.Marshal(map[string]any{"error": snap.Error{Code: code, Message: msg, Data: d}})
	return b
}

// refusalCode is the SNAP code of a refusal with no code of its own: a
// request that is no SNAP message (4xx) is 1003, a failure of the server
// (5xx) 5001.
func refusalCode(status int) snap.Code {
	if status >= 500 {
		return snap.CodeInternal
	}
	return snap.CodeInvalidMessage
}

// wellKnown serves the signed card with the headers SDK peers expect:
// public, cacheable for 5 minutes, readable from any origin.
func (s *Server) wellKnown(w http.ResponseWriter, r *http.Request) {
	if !s.admit(w, r) {
		return
	}
	setCORS(w)
	doc, err := s.card.document()
	if err != nil {
		s.cfg.Logger.Error("snaphttp: well-known card not signed", "err", err)
		writeError(w, http.StatusInternalServerError, snap.CodeInternal, "the agent card could not be signed", nil)
		return
	}
	if doc == nil {
		writeError(w, http.StatusNotFound, snap.CodeAgentNotFound, "this agent serves no card", nil)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "public, max-age=300")
	w.Write(doc)
}

func (s *Server) wellKnownOptions(w http.ResponseWriter, r *http.Request) {
	setCORS(w)
	w.WriteHeader(http.StatusNoContent)
}

func setCORS(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Methods", "GET, OPTIONS")
	h.Set("Access-Control-Allow-Headers", "Content-Type")
}

// Health is the body of /healthz.
type Health struct {
	Status          string `json:"status"`
	Address         string `json:"address,omitempty"`
	ProtocolVersion string `json:"protocolVersion"`
	UptimeSeconds   int64  `json:"uptimeSeconds"`
	WebSockets      int    `json:"websockets"`
	Connections     int    `json:"connections"` // TCP connections held
	// ConnectionsEvicted and ConnectionsRefused count, since start, the
	// idle connections closed to make room and the connections refused
	// over the caps (MaxTCPConns, MaxTCPConnsPerPeer).
	ConnectionsEvicted int64 `json:"connectionsEvicted"`
	ConnectionsRefused int64 `json:"connectionsRefused"`
	InFlight           int64 `json:"inFlight"` // SNAP exchanges being answered
	Draining           bool  `json:"draining,omitempty"`
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	if !admitPeer(s.monitor, w, r) {
		return
	}
	h := Health{
		Status: "ok", Address: s.cfg.Address, ProtocolVersion: snap.ProtocolVersion,
		UptimeSeconds: int64(s.cfg.Now().Sub(s.started) / time.Second),
		WebSockets:    s.conns.Count(), InFlight: s.active.Load(),
	}
	if l := s.tcp.Load(); l != nil {
		h.Connections = l.Count()
		h.ConnectionsEvicted, h.ConnectionsRefused = l.Evicted(), l.Refused()
	}
	select {
	case <-s.draining:
		h.Status, h.Draining = "draining", true
	default:
	}
	b, _ := json.Marshal(h)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b)
}

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) {
	public := s.cfg.MetricsPublic || onLoopback(r.RemoteAddr)
	if s.cfg.Metrics != nil && !public && s.refusedMetrics.CompareAndSwap(false, true) {
		s.cfg.Logger.Info("snaphttp: /metrics answered 404 to a client off loopback: it is served to clients on this machine's loopback only (set metrics_listen, or metrics_public, to serve Prometheus on another machine); logged once",
			"remote", r.RemoteAddr)
	}
	if s.cfg.Metrics == nil || !public {
		writeError(w, http.StatusNotFound, snap.CodeInvalidMessage, "no metrics are served", nil)
		return
	}
	if !admitPeer(s.monitor, w, r) {
		return
	}
	s.cfg.Metrics.ServeHTTP(w, r)
}
