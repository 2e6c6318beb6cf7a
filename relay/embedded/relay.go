package embedded

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/snapnode/snapnode/internal/bufpool"
	"github.com/snapnode/snapnode/internal/jsonenc"
	"github.com/snapnode/snapnode/internal/logcap"
	"github.com/snapnode/snapnode/internal/origins"
	"github.com/snapnode/snapnode/internal/peercap"
	"github.com/snapnode/snapnode/internal/periodic"
	"github.com/snapnode/snapnode/internal/ratelimit"
	"github.com/snapnode/snapnode/relay"
)

// Config configures a Relay. The zero value is a usable relay with an
// in-memory database; zero fields take the defaults shown.
type Config struct {
	// DBPath is the SQLite database file; "" or ":memory:" keeps events
	// in memory only. The node uses <data-dir>/relay.db.
	DBPath string

	// Name, Description and Version go into the NIP-11 document.
	// Defaults: "snapnode relay", a one-line description, "dev".
	Name, Description, Version string

	// Logger receives the relay's logs; nil discards them.
	Logger *slog.Logger

	// Verifier checks each event's id and signature. A node shares one
	// with its pool and inbox, so that each event is verified once in the
	// process; nil makes the relay its own.
	Verifier *relay.Verifier

	// Now is the clock used for NIP-40 expiration, created_at checks and
	// rate limits; nil is time.Now. Tests inject a fake clock here.
	Now func() time.Time

	// Limits, announced in the NIP-11 document.
	MaxMessageLength int // bytes of one client message; default 512 KiB
	MaxSubscriptions int // open subscriptions per connection; default 64
	MaxFilters       int // filters per REQ; default 16
	MaxFilterValues  int // values in the lists of one filter; default 1000
	// MaxOpenFilterValues bounds the values in the filters of one
	// connection's open subscriptions together (each costs a few hundred
	// bytes while the subscription is open); default 4000, at least
	// MaxFilterValues. The node's own in-process connection is not
	// bounded.
	MaxOpenFilterValues int
	// MaxSubscriptionBytesPerIP bounds what the open subscriptions of
	// one peer (an address as for MaxConnectionsPerIP), all its
	// connections together, hold in memory: their ids, filters, values
	// and the hub's index of them, about 400 bytes a value and 320 a
	// filter beside their text (see subscription.size). A value may be
	// a string of hundreds of kilobytes, so the values bounds alone let
	// one connection hold 32 MiB. Default 128 KiB for each of
	// MaxConnectionsPerIP (8 MiB), at least what one REQ may hold.
	// Clients on loopback addresses and the in-process connection are
	// not bounded.
	MaxSubscriptionBytesPerIP int64
	// MaxSubscriptionBytes bounds what the open subscriptions of every
	// peer together hold (as MaxSubscriptionBytesPerIP counts it), so
	// that many addresses (the /64s of one IPv6 network are many) cannot
	// take the process's memory between them; default 256 MiB, at least
	// MaxSubscriptionBytesPerIP. A REQ past it is CLOSED as one past its
	// peer's bound is. Loopback clients and the in-process connection
	// are not counted.
	MaxSubscriptionBytes int64
	MaxLimit             int // cap on a filter's limit, and on a REQ's stored events; default 5000
	DefaultLimit         int // stored events per filter without limit; default 500
	MaxSubIDLength       int // subscription id length in characters (code points, as NIP-01 counts); default 64
	MaxEventTags         int // tags of one event; default 2500
	MaxContentLength     int // bytes of an event's content; default 256 KiB
	// MaxQueriesPerIP bounds the REQs of one peer (an address as for
	// MaxConnectionsPerIP), all its connections together, that query the
	// database at once. The relay has 4 database readers for every
	// client: past the bound, a REQ waits for its peer's turn, at most
	// QueryTimeout, then is CLOSED with "rate-limited:". Default 1, or
	// the readers' part that MaxConnectionsPerIP is of MaxConnections,
	// rounded up: 4 for a peer allowed every connection (behind a proxy
	// that connects from one address for every client). Clients on
	// loopback addresses and the in-process connection are not bounded.
	MaxQueriesPerIP int
	// ReqsPerSecond and ReqBurst rate-limit the REQ messages of each
	// connection (token bucket): a REQ past them is CLOSED with
	// "rate-limited:", and a subscription of its id with it, so that a
	// client cannot make the relay open, query and close subscriptions
	// as fast as it sends. Defaults 20 a second and bursts of 100 (a
	// client opening its subscriptions at once). Clients on loopback
	// addresses and the in-process connection are not limited.
	ReqsPerSecond float64
	ReqBurst      int
	// QueryTimeout bounds the time one REQ's queries take in the
	// database, all its filters together; default 2 s. A REQ past it is
	// CLOSED with "error:", its query stopped, so that no filter holds a
	// database reader for longer.
	QueryTimeout time.Duration
	// MaxStoredBytes bounds the stored events one REQ loads, all its
	// filters together (their JSON); default 8 MiB, at least
	// MaxMessageLength. A REQ's stored events are loaded before they are
	// sent (to merge its filters' results in order), so this and MaxLimit
	// are the memory one REQ may take; a REQ that reaches either gets,
	// filter after filter in its order, each filter's newest events up to
	// what is left, then EOSE, as NIP-01 lets a relay do. The node's own
	// in-process connection is bounded by MaxLimit only.
	MaxStoredBytes int
	// MaxUnsentBytesPerIP bounds the stored events that the REQs of one
	// peer (an address as for MaxConnectionsPerIP), all its connections
	// together, have loaded and not yet written to their clients (their
	// JSON): loaded results wait in memory, queued, while a client reads
	// them, or reads nothing until its write time-out, so that one
	// address's connections could hold MaxStoredBytes each. A REQ that
	// would take its peer past the bound waits for room, at most
	// WriteTimeout; then it loads what room is left (maybe none) and a
	// NOTICE saying so comes before its EOSE. Default twice
	// MaxStoredBytes (16 MiB), at least MaxStoredBytes: one REQ alone is
	// never cut by it. Clients on loopback addresses and the in-process
	// connection are not bounded.
	MaxUnsentBytesPerIP int64
	// MaxUnsentBytes bounds what the REQs of every peer together have
	// loaded and not yet written (as MaxUnsentBytesPerIP counts it);
	// default 256 MiB, at least MaxUnsentBytesPerIP. A REQ past it waits
	// and then loads what room is left, as one past its peer's bound does.
	MaxUnsentBytes int64
	// MaxReadingBytesPerIP bounds what the messages that the connections
	// of one peer (an address as for MaxConnectionsPerIP) are sending
	// hold in memory while they are read, beyond a small buffer each
	// (4 KiB): a message is kept as it comes, up to MaxMessageLength, so
	// that each connection of a peer could hold that much. A message
	// that would take its peer past the bound is read to its end and
	// let go, and refused with "rate-limited:" (OK false when its id can
	// be read, a NOTICE otherwise). Default four times MaxMessageLength
	// (2 MiB), at least MaxMessageLength: one message alone is never
	// refused by it. Clients on loopback addresses and the in-process
	// connection are not bounded.
	MaxReadingBytesPerIP int64
	// MaxReadingBytes bounds what the messages of every peer together
	// hold while they are read (as MaxReadingBytesPerIP counts it), so
	// that many addresses (the /64s of one IPv6 network are many) cannot
	// take MaxMessageLength for each of MaxConnections (2 GiB by
	// default) between them; default 256 MiB, at least
	// MaxReadingBytesPerIP. A message past it is refused as one past its
	// peer's bound is.
	MaxReadingBytes int64

	// StoreMaxEvents and StoreMaxBytes bound the database: the relay keeps
	// at most StoreMaxEvents stored events and StoreMaxBytes of their JSON
	// and indexed tags (each tag twice, for its row and its index entry:
	// about what they take on disk). Storing one past either deletes the
	// oldest in the same transaction, regular events first (in the order
	// they were stored), then replaceable and addressable ones, so that a
	// flood of events pushes old ones out rather than fill the disk, and
	// agent cards go last; a database past the bound when the relay opens
	// it is trimmed then. Defaults 1,000,000 and 1 GiB; StoreMaxBytes is at
	// least four times MaxMessageLength. Expired events leave as before,
	// at the sweep.
	StoreMaxEvents int
	StoreMaxBytes  int64
	// StorePeerShare is the part of each of those bounds that the events
	// of one peer may take, between 0 and 1 (0: no share, the bounds
	// alone): a peer is an address as for MaxConnectionsPerIP. Storing
	// past its share deletes that peer's own oldest events, regular ones
	// first, in the same transaction, so that one address cannot make
	// the relay forget what others stored; the share's byte bound is at
	// least four times MaxMessageLength, as StoreMaxBytes is (what one
	// event may count). Clients on loopback addresses and the
	// in-process connection have no share (as for EventsPerSecond), and
	// neither do the events stored by a build without it.
	StorePeerShare float64
	// KeepAuthors are hex public keys whose replaceable and addressable
	// events are never deleted to make room: the node's own, so that its
	// agent card stays whatever others publish.
	KeepAuthors []string

	// CreatedAtUpperLimit refuses events dated further in the future than
	// this; default 15 minutes, negative: no limit.
	CreatedAtUpperLimit time.Duration

	// MaxConnections bounds the clients' connections held at once;
	// MaxConnectionsPerIP those of one peer: an IPv4 address, or an IPv6
	// /64 (loopback addresses aside: a process on the machine is trusted
	// as much as its user). Serve counts every TCP connection it accepts,
	// WebSocket or not (a NIP-11 request, a refused upgrade, headers that
	// have not all come), from its accept to its close: a connection over
	// either bound closes the longest-idle connection (no request in
	// progress: a WebSocket client never is) in that bound's scope to
	// make room, and when none is idle it is answered 429 or 503, with
	// Retry-After, before its request is read, and closed: a WebSocket
	// client is refused before the upgrade. Served by another server (as
	// an http.Handler), the relay counts its WebSocket clients alone, and
	// refuses an upgrade over a bound with 503 or 429. Defaults 4096 and
	// 64; the node's own in-process connection counts in neither. Behind
	// a proxy that connects from one address for every client (Docker's
	// userland proxy), set MaxConnectionsPerIP to MaxConnections.
	MaxConnections      int
	MaxConnectionsPerIP int

	// SendQueue is the number of live messages queued per connection
	// (and buffered per subscription while its stored events are sent);
	// a client that lets it fill up is disconnected. Default 256.
	SendQueue int
	// WriteTimeout bounds one write to a client, and how long the relay
	// waits for room to queue an answer; default 10 s. It also bounds a
	// plain HTTP request's exchange (its body and its answer: the NIP-11
	// document, a refused upgrade).
	WriteTimeout time.Duration
	// PingInterval is how often clients are pinged; a client silent for
	// twice as long is disconnected, and so is one whose message has not
	// come whole twice as long after its first frame (1008), however
	// many pongs it sends meanwhile. Default 30 s.
	PingInterval time.Duration
	// SweepInterval is how often Serve deletes expired events; default
	// 1 minute.
	SweepInterval time.Duration

	// EventsPerSecond and EventBurst rate-limit EVENT messages per peer
	// (token bucket): a peer is an address as for MaxConnectionsPerIP,
	// and all its connections draw on one bucket, so that opening more
	// connections buys no more events. Clients on loopback addresses and
	// the in-process connection (the node itself) are not limited: a
	// process on the machine is trusted as much as its user, as for
	// MaxConnectionsPerIP (behind a proxy on the machine, limit writes at
	// the proxy). 0 means no limit. EventBurst 0 is one second's worth
	// (rounded up), at least 1. The buckets of the peers not heard
	// from for the longest time are dropped first past 4×MaxConnections.
	EventsPerSecond float64
	EventBurst      int

	// AllowedOrigins are the origins of the web pages ("scheme://host
	// [:port]", as browsers send Origin) that may open a WebSocket; "*":
	// every one. A relay listening on a loopback address, or given a
	// list, takes clients that send no Origin (no browser page: the
	// node, SDKs, other programs), pages of loopback origins (localhost,
	// names under .localhost, loopback addresses; any port) and those
	// listed; any other page gets 403, so that a page in the browser of
	// a user on the machine cannot publish requests to the node. A relay
	// listening elsewhere with no list takes every origin, as a public
	// relay does: Nostr web clients run in browsers. SetAllowedOrigins
	// changes them while the relay runs.
	AllowedOrigins []string

	// AcceptEvent, when set, is asked about every valid event before it
	// is stored or forwarded; an error refuses it with "blocked: <err>".
	AcceptEvent func(*nostr.Event) error
}

// Defaults.
const (
	DefaultMaxMessageLength     = 512 << 10
	DefaultMaxSubscriptions     = 64
	DefaultMaxFilters           = 16
	DefaultMaxFilterValues      = 1000
	DefaultMaxOpenFilterValues  = 4000
	DefaultMaxLimit             = 5000
	DefaultDefaultLimit         = 500
	DefaultMaxSubIDLength       = 64
	DefaultMaxEventTags         = 2500
	DefaultMaxContentLength     = 256 << 10
	DefaultMaxStoredBytes       = 8 << 20
	DefaultStoreMaxEvents       = 1_000_000
	DefaultStoreMaxBytes        = 1 << 30
	DefaultCreatedAtUpperLimit  = 15 * time.Minute
	DefaultSendQueue            = 256
	DefaultMaxConnections       = 4096
	DefaultMaxConnectionsPerIP  = 64
	DefaultMaxSubscriptionBytes = 256 << 20
	DefaultMaxUnsentBytes       = 256 << 20
	DefaultMaxReadingBytes      = 256 << 20
	DefaultWriteTimeout         = 10 * time.Second
	DefaultQueryTimeout         = 2 * time.Second
	DefaultReqsPerSecond        = 20
	DefaultReqBurst             = 100
	DefaultPingInterval         = 30 * time.Second
	DefaultSweepInterval        = time.Minute
)

// subscriptionBytesPerConn is the default MaxSubscriptionBytesPerIP for
// each of MaxConnectionsPerIP: a peer allowed more connections (behind a
// proxy that connects from one address for every client) holds more.
const subscriptionBytesPerConn = 128 << 10

// withDefaults fills zero fields and checks the rest.
func (c Config) withDefaults() (Config, error) {
	if c.Verifier == nil {
		c.Verifier = relay.NewVerifier()
	}
	def := func(p *int, v int, name string) error {
		switch {
		case *p == 0:
			*p = v
		case *p < 0:
			return fmt.Errorf("embedded relay config: %s must not be negative", name)
		}
		return nil
	}
	defDur := func(p *time.Duration, v time.Duration, name string) error {
		switch {
		case *p == 0:
			*p = v
		case *p < 0:
			return fmt.Errorf("embedded relay config: %s must not be negative", name)
		}
		return nil
	}
	err := errors.Join(
		def(&c.MaxMessageLength, DefaultMaxMessageLength, "MaxMessageLength"),
		def(&c.MaxSubscriptions, DefaultMaxSubscriptions, "MaxSubscriptions"),
		def(&c.MaxFilters, DefaultMaxFilters, "MaxFilters"),
		def(&c.MaxFilterValues, DefaultMaxFilterValues, "MaxFilterValues"),
		def(&c.MaxOpenFilterValues, DefaultMaxOpenFilterValues, "MaxOpenFilterValues"),
		def(&c.MaxLimit, DefaultMaxLimit, "MaxLimit"),
		def(&c.DefaultLimit, DefaultDefaultLimit, "DefaultLimit"),
		def(&c.MaxSubIDLength, DefaultMaxSubIDLength, "MaxSubIDLength"),
		def(&c.MaxEventTags, DefaultMaxEventTags, "MaxEventTags"),
		def(&c.MaxContentLength, DefaultMaxContentLength, "MaxContentLength"),
		def(&c.MaxStoredBytes, DefaultMaxStoredBytes, "MaxStoredBytes"),
		def(&c.StoreMaxEvents, DefaultStoreMaxEvents, "StoreMaxEvents"),
		def(&c.SendQueue, DefaultSendQueue, "SendQueue"),
		def(&c.MaxConnections, DefaultMaxConnections, "MaxConnections"),
		def(&c.MaxConnectionsPerIP, DefaultMaxConnectionsPerIP, "MaxConnectionsPerIP"),
		defDur(&c.WriteTimeout, DefaultWriteTimeout, "WriteTimeout"),
		defDur(&c.QueryTimeout, DefaultQueryTimeout, "QueryTimeout"),
		def(&c.ReqBurst, DefaultReqBurst, "ReqBurst"),
		defDur(&c.PingInterval, DefaultPingInterval, "PingInterval"),
		defDur(&c.SweepInterval, DefaultSweepInterval, "SweepInterval"),
	)
	if err != nil {
		return c, err
	}
	if err := checkEventRate(c.EventsPerSecond, c.EventBurst); err != nil {
		return c, fmt.Errorf("embedded relay config: %w", err)
	}
	switch {
	case c.ReqsPerSecond == 0:
		c.ReqsPerSecond = DefaultReqsPerSecond
	case !(c.ReqsPerSecond > 0) || math.IsInf(c.ReqsPerSecond, 1):
		return c, fmt.Errorf("embedded relay config: ReqsPerSecond %g: want a positive rate", c.ReqsPerSecond)
	}
	switch {
	case c.MaxQueriesPerIP == 0:
		per := min(c.MaxConnectionsPerIP, c.MaxConnections)
		c.MaxQueriesPerIP = max(1, (storeReaders*per+c.MaxConnections-1)/c.MaxConnections)
	case c.MaxQueriesPerIP < 0:
		return c, errors.New("embedded relay config: MaxQueriesPerIP must not be negative")
	}
	switch {
	case c.StoreMaxBytes == 0:
		c.StoreMaxBytes = DefaultStoreMaxBytes
	case c.StoreMaxBytes < 0:
		return c, errors.New("embedded relay config: StoreMaxBytes must not be negative")
	}
	// One event counts at most about four times its message: its JSON
	// (escapes may double it) and its tags twice.
	c.StoreMaxBytes = max(c.StoreMaxBytes, 4*int64(c.MaxMessageLength))
	if !(c.StorePeerShare >= 0 && c.StorePeerShare <= 1) { // NaN too
		return c, fmt.Errorf("embedded relay config: StorePeerShare %g: want a part between 0 and 1", c.StorePeerShare)
	}
	if c.CreatedAtUpperLimit == 0 {
		c.CreatedAtUpperLimit = DefaultCreatedAtUpperLimit
	}
	c.DefaultLimit = min(c.DefaultLimit, c.MaxLimit)
	c.MaxOpenFilterValues = max(c.MaxOpenFilterValues, c.MaxFilterValues)
	switch {
	case c.MaxSubscriptionBytesPerIP == 0:
		c.MaxSubscriptionBytesPerIP = int64(c.MaxConnectionsPerIP) * subscriptionBytesPerConn
	case c.MaxSubscriptionBytesPerIP < 0:
		return c, errors.New("embedded relay config: MaxSubscriptionBytesPerIP must not be negative")
	}
	// One REQ the other bounds allow fits in an empty budget.
	c.MaxSubscriptionBytesPerIP = max(c.MaxSubscriptionBytesPerIP, int64(c.MaxMessageLength+
		c.MaxFilters*filterBytes+min(c.MaxFilters*c.MaxFilterValues, c.MaxOpenFilterValues)*valueBytes))
	c.MaxStoredBytes = max(c.MaxStoredBytes, c.MaxMessageLength)
	switch {
	case c.MaxUnsentBytesPerIP == 0:
		c.MaxUnsentBytesPerIP = 2 * int64(c.MaxStoredBytes)
	case c.MaxUnsentBytesPerIP < 0:
		return c, errors.New("embedded relay config: MaxUnsentBytesPerIP must not be negative")
	}
	c.MaxUnsentBytesPerIP = max(c.MaxUnsentBytesPerIP, int64(c.MaxStoredBytes))
	switch {
	case c.MaxReadingBytesPerIP == 0:
		c.MaxReadingBytesPerIP = 4 * int64(c.MaxMessageLength)
	case c.MaxReadingBytesPerIP < 0:
		return c, errors.New("embedded relay config: MaxReadingBytesPerIP must not be negative")
	}
	// What one message keeps: the limit and a byte (see readLimited).
	c.MaxReadingBytesPerIP = max(c.MaxReadingBytesPerIP, int64(c.MaxMessageLength)+1)
	for _, b := range []struct {
		total *int64
		peer  int64
		name  string
		dflt  int64
	}{{&c.MaxSubscriptionBytes, c.MaxSubscriptionBytesPerIP, "MaxSubscriptionBytes", DefaultMaxSubscriptionBytes},
		{&c.MaxUnsentBytes, c.MaxUnsentBytesPerIP, "MaxUnsentBytes", DefaultMaxUnsentBytes},
		{&c.MaxReadingBytes, c.MaxReadingBytesPerIP, "MaxReadingBytes", DefaultMaxReadingBytes}} {
		switch {
		case *b.total == 0:
			*b.total = b.dflt
		case *b.total < 0:
			return c, fmt.Errorf("embedded relay config: %s must not be negative", b.name)
		}
		*b.total = max(*b.total, b.peer)
	}
	if c.Name == "" {
		c.Name = "snapnode relay"
	}
	if c.Description == "" {
		c.Description = "Embedded Nostr relay of a snapnode SNAP agent node."
	}
	if c.Version == "" {
		c.Version = "dev"
	}
	if _, err := origins.Parse(c.AllowedOrigins); err != nil {
		return c, fmt.Errorf("embedded relay config: AllowedOrigins: %w", err)
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c, nil
}

// limits are the parser's bounds from c, after defaults.
func (c *Config) limits() limits {
	return limits{
		maxMessageLength: c.MaxMessageLength,
		maxSubscriptions: c.MaxSubscriptions,
		maxFilters:       c.MaxFilters,
		maxFilterValues:  c.MaxFilterValues,
		maxLimit:         c.MaxLimit,
		defaultLimit:     c.DefaultLimit,
		maxSubIDLength:   c.MaxSubIDLength,
		maxEventTags:     c.MaxEventTags,
		maxContentLength: c.MaxContentLength,
	}
}

// storeBound is what the store keeps, from c after defaults.
func (c *Config) storeBound() storeBound {
	b := storeBound{events: int64(c.StoreMaxEvents), bytes: c.StoreMaxBytes, keep: c.KeepAuthors}
	if c.StorePeerShare > 0 {
		b.peerEvents = max(1, int64(c.StorePeerShare*float64(c.StoreMaxEvents)))
		b.peerBytes = max(4*int64(c.MaxMessageLength), int64(c.StorePeerShare*float64(c.StoreMaxBytes)))
	}
	return b
}

// Relay is an embedded Nostr relay. It is an http.Handler (WebSocket and
// NIP-11 on the same URL); Serve or ListenAndServe run it on a listener.
type Relay struct {
	cfg      Config
	lim      limits
	log      *slog.Logger
	now      func() time.Time
	store    *store
	hub      *hub
	upgrader websocket.Upgrader
	bursts   sync.Pool       // *[]byte: the WebSocket writers' burst buffers
	frames   sync.Pool       // *[]byte: the WebSocket writers' EVENT frames
	reads    bufpool.Buffers // the WebSocket readers' message buffers (readBufferSize)
	info     []byte          // the NIP-11 document
	// pages is AllowedOrigins (SetAllowedOrigins changes it): an
	// upgrade loads it once, and sees the old list or the new one whole.
	pages atomic.Pointer[pagePolicy]
	// refusedOrigin is set once a page of a refused origin was logged.
	refusedOrigin atomic.Bool

	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc

	mu     sync.Mutex
	conns  map[*conn]struct{}
	closed bool
	addr   net.Addr
	// exempt says which peers count in MaxConnections only (see newRelay).
	exempt func(netip.Addr) bool
	// sockets counts the WebSocket clients admitted, in all and by
	// peer (see admit).
	sockets *peercap.Counter
	// events holds the peers' EVENT buckets, by conn.peer.
	events *ratelimit.Limiter
	// held is what the open subscriptions of each peer hold, by
	// conn.peer (see subscription.size, Config.MaxSubscriptionBytesPerIP).
	held *peerBytes
	// unsent is what the REQs of each peer have loaded and not yet
	// written, by conn.peer (see Config.MaxUnsentBytesPerIP). unsentWait
	// is how long a REQ waits for room (WriteTimeout; tests shorten it).
	unsent     *peerBytes
	unsentWait time.Duration
	// queries are the peers' turns to query the store (see
	// Config.MaxQueriesPerIP); queryWait is how long a REQ waits for one
	// (QueryTimeout: what one turn takes at most; tests change it).
	queries   *querySlots
	queryWait time.Duration
	// reading is what the messages of each peer being read hold beyond
	// their lent buffers, by conn.peer (see Config.MaxReadingBytesPerIP).
	reading *peerBytes

	slowCuts atomic.Int64 // clients disconnected for a full queue
	// slowLog bounds the lines of clients cut as too slow: anyone may
	// connect and read slowly, again and again.
	slowLog logcap.Limiter
	// phaseWaits counts the live events that waited for the end of a
	// patient connection's stored phase.
	phaseWaits atomic.Int64
}

// New opens the database and returns a relay ready to serve. Call Close
// when done with it.
func New(cfg Config) (*Relay, error) {
	// A process on the machine is trusted as much as its user.
	return newRelay(cfg, netip.Addr.IsLoopback)
}

// newRelay is New, with the peers exempt from MaxConnectionsPerIP (counted
// in MaxConnections only): loopback addresses, or none for a test whose
// clients are all on the machine.
func newRelay(cfg Config, exempt func(netip.Addr) bool) (*Relay, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	st, err := openStore(ctx, cfg.DBPath, cfg.storeBound())
	if err != nil {
		cancel()
		return nil, fmt.Errorf("embedded relay: %w", err)
	}
	r := &Relay{
		cfg:     cfg,
		lim:     cfg.limits(),
		log:     cfg.Logger,
		now:     cfg.Now,
		store:   st,
		hub:     newHub(),
		ctx:     ctx,
		cancel:  cancel,
		conns:   make(map[*conn]struct{}),
		held:    newPeerBytes(cfg.MaxSubscriptionBytesPerIP, cfg.MaxSubscriptionBytes),
		unsent:  newPeerBytes(cfg.MaxUnsentBytesPerIP, cfg.MaxUnsentBytes),
		reading: newPeerBytes(cfg.MaxReadingBytesPerIP, cfg.MaxReadingBytes),
		// How long a REQ waits for its peer's unsent bytes to make room.
		unsentWait: cfg.WriteTimeout,
		queries:    newQuerySlots(cfg.MaxQueriesPerIP),
		queryWait:  cfg.QueryTimeout,
		exempt:     exempt,
		sockets:    peercap.New(cfg.MaxConnectionsPerIP, cfg.MaxConnections, exempt),
		events: ratelimit.New(ratelimit.Config{Rate: cfg.EventsPerSecond, Burst: cfg.EventBurst,
			MaxKeys: 4 * cfg.MaxConnections, Now: cfg.Now}),
		upgrader: websocket.Upgrader{
			// A small read buffer of its own (wsReadBuffer), not the
			// HTTP server's 4 KiB one; a frame is built in a buffer
			// borrowed for its write: an idle client holds no write
			// buffer.
			ReadBufferSize:  wsReadBuffer,
			WriteBufferPool: new(sync.Pool),
			// The library clears the deadlines ServeHTTP set before it
			// writes the 101: without this, a peer that reads nothing
			// held the connection and its goroutine for ever.
			HandshakeTimeout: cfg.WriteTimeout,
			// The origin was checked before (checkOrigin).
			CheckOrigin: func(*http.Request) bool { return true },
		},
	}
	pages, _ := newPagePolicy(cfg.AllowedOrigins) // checked by withDefaults
	r.pages.Store(pages)
	if r.info, err = jsonenc.Marshal(r.Info()); err != nil {
		st.close()
		cancel()
		return nil, fmt.Errorf("embedded relay: encode NIP-11 document: %w", err)
	}
	return r, nil
}

// SetEventRate changes EventsPerSecond and EventBurst while the relay
// runs: every peer's bucket refills at the new rate from now on, keeping
// the tokens it has up to the new burst. A rate of 0 lifts the limit;
// a negative, NaN or infinite one is refused.
func (r *Relay) SetEventRate(perSecond float64, burst int) error {
	if err := checkEventRate(perSecond, burst); err != nil {
		return fmt.Errorf("embedded relay: %w", err)
	}
	r.events.SetRate(perSecond, burst)
	return nil
}

// pagePolicy is a list of AllowedOrigins, checked.
type pagePolicy struct {
	list origins.List
	// given is whether the list names any origin: a relay listening
	// elsewhere than on loopback with none takes every origin.
	given bool
}

func newPagePolicy(list []string) (*pagePolicy, error) {
	l, err := origins.Parse(list)
	if err != nil {
		return nil, err
	}
	return &pagePolicy{list: l, given: len(list) > 0}, nil
}

// SetAllowedOrigins changes AllowedOrigins while the relay runs, from
// the next WebSocket upgrade on (the clients connected stay); on an
// error it changes nothing. It returns the origins added and removed
// (see origins.Changes).
func (r *Relay) SetAllowedOrigins(list []string) (added, removed []string, err error) {
	p, err := newPagePolicy(list)
	if err != nil {
		return nil, nil, fmt.Errorf("embedded relay: allowed origins: %w", err)
	}
	old := r.pages.Swap(p)
	added, removed = origins.Changes(old.list, p.list)
	return added, removed, nil
}

// hold counts n more bytes held by peer's subscriptions, unless that
// would take the peer past MaxSubscriptionBytesPerIP or every peer
// together past MaxSubscriptionBytes; it reports whether it did, and if
// not, whether the relay-wide bound was the one in the way.
func (r *Relay) hold(peer string, n int64) (ok, whole bool) {
	got, _, whole := r.held.take(peer, n, false)
	return got == n, whole
}

// unhold gives back n bytes that hold counted for peer.
func (r *Relay) unhold(peer string, n int64) { r.held.give(peer, n) }

// takeUnsent counts want more bytes loaded for peer (see peerBytes.take).
func (r *Relay) takeUnsent(peer string, want int64, some bool) (int64, <-chan struct{}, bool) {
	return r.unsent.take(peer, want, some)
}

// giveUnsent gives back n bytes that takeUnsent counted for peer.
func (r *Relay) giveUnsent(peer string, n int64) { r.unsent.give(peer, n) }

// unsentBytes is what peer's REQs have loaded and not yet written.
func (r *Relay) unsentBytes(peer string) int64 { return r.unsent.count(peer) }

// peerBytes counts bytes by peer against one bound per peer and one for
// all of them: what the open subscriptions of each address hold, what its
// REQs have loaded and not yet sent. Peers counting none are removed. It
// is safe for concurrent use.
type peerBytes struct {
	max, maxTotal int64
	mu            sync.Mutex
	peers         map[string]*peerCount
	total         int64
	// freed, made for a taker that waits for room under maxTotal, is
	// closed when total goes down.
	freed chan struct{}
}

type peerCount struct {
	n int64
	// freed, made for a taker that waits for room, is closed when n goes
	// down.
	freed chan struct{}
}

func newPeerBytes(max, maxTotal int64) *peerBytes {
	return &peerBytes{max: max, maxTotal: maxTotal, peers: make(map[string]*peerCount)}
}

// take counts want more bytes for peer if they fit in its bound and in the
// bound of all peers, or, with some set, as many of them as fit (maybe
// none). It returns what it counted; when it counted nothing because want
// does not fit, it also returns a channel closed once room may have been
// made (the peer's count or, when the bound of all was the one in the
// way, the total went down), and whether that bound of all was in the way.
func (b *peerBytes) take(peer string, want int64, some bool) (int64, <-chan struct{}, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.peers[peer]
	if p == nil {
		p = &peerCount{}
		b.peers[peer] = p
	}
	own, all := b.max-p.n, b.maxTotal-b.total
	room := min(own, all)
	switch {
	case want <= room:
	case some:
		want = max(room, 0)
	default:
		if want > own {
			if p.freed == nil {
				p.freed = make(chan struct{})
			}
			if p.n == 0 { // more than the whole bound: nothing to wait for here
				delete(b.peers, peer)
			}
			return 0, p.freed, false
		}
		if p.n == 0 {
			delete(b.peers, peer)
		}
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		return 0, b.freed, true
	}
	p.n += want
	b.total += want
	if p.n == 0 {
		delete(b.peers, peer)
	}
	return want, nil, false
}

// give gives back n bytes that take counted for peer, and wakes the
// takers waiting for room.
func (b *peerBytes) give(peer string, n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	p := b.peers[peer]
	if p == nil {
		return
	}
	p.n -= n
	b.total -= n
	if b.freed != nil {
		close(b.freed)
		b.freed = nil
	}
	if p.freed != nil {
		close(p.freed)
		p.freed = nil
	}
	if p.n <= 0 {
		delete(b.peers, peer)
	}
}

// count is what peer counts now.
func (b *peerBytes) count(peer string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	if p := b.peers[peer]; p != nil {
		return p.n
	}
	return 0
}

// checkEventRate checks an EVENT rate and burst, as Config and
// SetEventRate take them.
func checkEventRate(perSecond float64, burst int) error {
	if perSecond < 0 || math.IsNaN(perSecond) || math.IsInf(perSecond, 0) || burst < 0 {
		return fmt.Errorf("EventsPerSecond %v, EventBurst %d: want a finite rate of 0 (no limit) or more and a burst of 0 (one second's worth) or more", perSecond, burst)
	}
	return nil
}

// Info is the NIP-11 relay information document.
type Info struct {
	Name          string     `json:"name"`
	Description   string     `json:"description"`
	SupportedNIPs []int      `json:"supported_nips"`
	Software      string     `json:"software"`
	Version       string     `json:"version"`
	Limitation    Limitation `json:"limitation"`
}

// Limitation is the "limitation" object of NIP-11.
type Limitation struct {
	MaxMessageLength    int   `json:"max_message_length"`
	MaxSubscriptions    int   `json:"max_subscriptions"`
	MaxFilters          int   `json:"max_filters"`
	MaxLimit            int   `json:"max_limit"`
	DefaultLimit        int   `json:"default_limit"`
	MaxSubIDLength      int   `json:"max_subid_length"`
	MaxEventTags        int   `json:"max_event_tags"`
	MaxContentLength    int   `json:"max_content_length"`
	MinPowDifficulty    int   `json:"min_pow_difficulty"`
	AuthRequired        bool  `json:"auth_required"`
	PaymentRequired     bool  `json:"payment_required"`
	RestrictedWrites    bool  `json:"restricted_writes"`
	CreatedAtLowerLimit int64 `json:"created_at_lower_limit,omitempty"` // 0, left out: any age (0 may read as "nothing older than now")
	CreatedAtUpperLimit int64 `json:"created_at_upper_limit,omitempty"`
}

// Software is the NIP-11 "software" of the relay.
const Software = "https://github.com/snapnode/snapnode"

// Info returns the relay's NIP-11 document.
func (r *Relay) Info() Info {
	var upper int64
	if r.cfg.CreatedAtUpperLimit > 0 {
		upper = int64(r.cfg.CreatedAtUpperLimit / time.Second)
	}
	return Info{
		Name:        r.cfg.Name,
		Description: r.cfg.Description,
		// 16, 20 and 33 were folded into NIP-01; old clients look for them.
		SupportedNIPs: []int{1, 11, 16, 20, 33, 40},
		Software:      Software,
		Version:       r.cfg.Version,
		Limitation: Limitation{
			MaxMessageLength:    r.cfg.MaxMessageLength,
			MaxSubscriptions:    r.cfg.MaxSubscriptions,
			MaxFilters:          r.cfg.MaxFilters,
			MaxLimit:            r.cfg.MaxLimit,
			DefaultLimit:        r.cfg.DefaultLimit,
			MaxSubIDLength:      r.cfg.MaxSubIDLength,
			MaxEventTags:        r.cfg.MaxEventTags,
			MaxContentLength:    r.cfg.MaxContentLength,
			RestrictedWrites:    r.cfg.AcceptEvent != nil,
			CreatedAtUpperLimit: upper,
		},
	}
}

// ServeHTTP serves a WebSocket upgrade as a Nostr connection, a request
// accepting application/nostr+json as the NIP-11 document, and anything
// else with a short plain-text page.
//
// A request must send its body and take its answer within WriteTimeout,
// the upgrade's refusals included (an upgrade that succeeds has its
// deadlines cleared by the WebSocket library, and sets its own): net/http
// reads what a handler leaves unread of a small body before it writes
// the answer, and writes the answer to a peer that may never read it;
// with no deadline either held the connection and its goroutine for as
// long as the peer liked.
func (r *Relay) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	rc := http.NewResponseController(w)
	deadline := time.Now().Add(r.cfg.WriteTimeout)
	_ = rc.SetWriteDeadline(deadline)
	if req.ContentLength != 0 {
		_ = rc.SetReadDeadline(deadline)
	}
	if websocket.IsWebSocketUpgrade(req) {
		r.serveWebSocket(w, req)
		return
	}
	h := w.Header()
	h.Set("Access-Control-Allow-Origin", "*")
	h.Set("Access-Control-Allow-Headers", "*")
	h.Set("Access-Control-Allow-Methods", "GET, OPTIONS")
	switch {
	case req.Method == http.MethodOptions:
		w.WriteHeader(http.StatusNoContent)
	case req.Method != http.MethodGet && req.Method != http.MethodHead:
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	case strings.Contains(req.Header.Get("Accept"), "application/nostr+json"):
		h.Set("Content-Type", "application/nostr+json")
		_, _ = w.Write(r.info)
	default:
		h.Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "This is a Nostr relay: connect with a WebSocket client.\n")
	}
}

// closeConns disconnects every client with a going-away close frame and
// waits until their goroutines have returned.
func (r *Relay) closeConns(reason string) {
	r.mu.Lock()
	conns := make([]*conn, 0, len(r.conns))
	for c := range r.conns {
		conns = append(conns, c)
	}
	r.mu.Unlock()
	for _, c := range conns {
		c.kill(websocket.CloseGoingAway, reason)
	}
	for _, c := range conns {
		<-c.finished
	}
}

// ListenAndServe listens on addr (host:port) and serves until ctx is
// cancelled; see Serve.
func (r *Relay) ListenAndServe(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("embedded relay: %w", err)
	}
	return r.Serve(ctx, ln)
}

// Serve serves connections on ln, and deletes expired events every
// SweepInterval, until ctx is cancelled; then it stops accepting, closes
// every client connection (close code 1001) and returns nil once they are
// gone. It also returns, with nil, when Close is called. Serve takes
// ownership of ln. The database stays open until Close.
//
// Addr and URL report ln's address once Serve has started; a caller that
// runs Serve in a goroutine should take the URL from WebSocketURL(ln.Addr())
// instead of racing with it.
func (r *Relay) Serve(ctx context.Context, ln net.Listener) error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		ln.Close()
		return errors.New("embedded relay: closed")
	}
	r.addr = ln.Addr()
	r.mu.Unlock()
	r.log.Info("relay listening", "url", WebSocketURL(ln.Addr()))

	// Every connection counts against the caps, from its accept: one
	// that never upgrades holds a socket and a goroutine as a WebSocket
	// client does.
	counted := peercap.NewListener(ln, peercap.ListenerConfig{Total: r.cfg.MaxConnections, PerPeer: r.cfg.MaxConnectionsPerIP,
		Exempt: r.exempt, Refuse: r.refuseConn})
	srv := &http.Server{
		Handler:   r,
		ConnState: counted.ConnState,
		// Its upgrade is not counted again (see serveWebSocket).
		ConnContext: func(ctx context.Context, _ net.Conn) context.Context {
			return context.WithValue(ctx, placeHeld{}, true)
		},
		ReadHeaderTimeout: 10 * time.Second,
		// A kept-alive connection that asks nothing more (after a
		// NIP-11 document) is closed; WebSocket clients are pinged.
		IdleTimeout:    2 * r.cfg.PingInterval,
		MaxHeaderBytes: 64 << 10,
		ErrorLog:       slog.NewLogLogger(r.log.Handler(), slog.LevelDebug),
	}
	sweepDone := make(chan struct{})
	go func() {
		defer close(sweepDone)
		r.sweepLoop(ctx)
	}()
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(counted) }()

	var err error
	select {
	case <-ctx.Done():
	case <-r.ctx.Done(): // Close
	case err = <-serveErr:
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(shutdownCtx) // stops accepting; hijacked sockets are ours
	r.closeConns("relay shutting down")
	if err == nil {
		err = <-serveErr
	}
	<-sweepDone
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("embedded relay: %w", err)
	}
	return nil
}

// sweepLoop sweeps every SweepInterval until ctx is done or the relay
// closed.
func (r *Relay) sweepLoop(ctx context.Context) {
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	defer context.AfterFunc(r.ctx, stop)()
	t := time.NewTicker(r.cfg.SweepInterval)
	defer t.Stop()
	// No bound: the relay's own SQLite file, whose sweep of a large
	// store may rightly take long.
	_ = periodic.Run(ctx, "embedded relay sweep", t.C, 0, func(ctx context.Context, _ time.Time) (int64, error) { return r.Sweep(ctx) }, func(_ int64, err error) {
		if err != nil {
			r.log.Error("sweep expired events", "err", err)
		}
		bound, share := r.store.takeEvicted()
		if bound > 0 {
			r.log.Info("relay database at its bound: the oldest events were deleted to make room",
				"count", bound, "store_max_events", r.cfg.StoreMaxEvents, "store_max_bytes", r.cfg.StoreMaxBytes)
		}
		if share > 0 {
			r.log.Info("relay database: peers past their share of it: their oldest events were deleted to make room",
				"count", share, "store_peer_share", r.cfg.StorePeerShare)
		}
	})
}

// Sweep deletes the stored events that have expired (NIP-40) and returns
// how many it deleted. Serve calls it every SweepInterval; expired events
// are never served even before they are swept.
func (r *Relay) Sweep(ctx context.Context) (int64, error) {
	n, err := r.store.deleteExpired(ctx, r.now().Unix())
	if err != nil {
		return 0, fmt.Errorf("embedded relay: %w", err)
	}
	if n > 0 {
		r.log.Debug("swept expired events", "count", n)
	}
	return n, nil
}

// Addr is the address Serve listens on, or nil before Serve is called.
func (r *Relay) Addr() net.Addr {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.addr
}

// URL is the relay's ws:// URL, or "" before Serve is called.
func (r *Relay) URL() string {
	a := r.Addr()
	if a == nil {
		return ""
	}
	return WebSocketURL(a)
}

// WebSocketURL is the ws:// URL of a relay listening on addr.
func WebSocketURL(addr net.Addr) string {
	return "ws://" + addr.String()
}

// Close disconnects every client, waits for their goroutines and closes
// the database. Serve calls in progress return once their ctx is
// cancelled. Close is idempotent.
func (r *Relay) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	r.closeConns("relay shutting down")
	r.cancel()
	if err := r.store.close(); err != nil {
		return fmt.Errorf("embedded relay: close database: %w", err)
	}
	return nil
}
