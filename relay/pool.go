package relay

import (
	"context"
	"errors"
	"hash/maphash"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/defaults"
)

// Pool defaults.
const (
	DefaultBackoffBase        = 500 * time.Millisecond
	DefaultBackoffMax         = 30 * time.Second
	DefaultResubscribeSkew    = 10 * time.Second
	DefaultDedupeSize         = 100_000
	DefaultDedupeTTL          = 10 * time.Minute
	DefaultDialTimeout        = 10 * time.Second
	DefaultPublishTimeout     = 10 * time.Second
	DefaultEOSETimeout        = 10 * time.Second
	DefaultSubscriptionBuffer = 1024
	// DefaultSubscriptionBufferBytes: see PoolConfig.SubscriptionBufferBytes.
	DefaultSubscriptionBufferBytes = 4 << 20
	DefaultSlowConsumerTimeout     = time.Second
	DefaultQueryMaxEvents          = 10_000
	// DefaultQueryMaxBytes: see PoolConfig.QueryMaxBytes.
	DefaultQueryMaxBytes = 64 << 20
	// DefaultMaxCatchUpPages: see PoolConfig.MaxCatchUpPages.
	DefaultMaxCatchUpPages = 100
)

// Errors of the pool.
var (
	// ErrPoolClosed: the pool was closed.
	ErrPoolClosed = errors.New("relay pool closed")
	// ErrSlowConsumer ends a Subscription whose reader let its buffer fill
	// and stay full for SlowConsumerTimeout.
	ErrSlowConsumer = errors.New("subscription dropped: consumer too slow")
	// ErrSubscriptionClosed is the Err of a Subscription closed by its
	// owner.
	ErrSubscriptionClosed = errors.New("subscription closed")
	// ErrNoRelays: no relay was connected (or, for Query, none was even
	// trying to connect).
	ErrNoRelays = errors.New("no relay available")
	// ErrNotConnected is the outcome of a publish to a relay that was not
	// connected at the time.
	ErrNotConnected = errors.New("relay not connected")
	// ErrRejected is the outcome of a publish a relay answered with OK
	// false.
	ErrRejected = errors.New("relay rejected the event")
	// ErrNotAccepted: no relay answered a publish with OK true.
	ErrNotAccepted = errors.New("no relay accepted the event")
	// ErrInvalidEvent: an event's id or signature does not verify.
	ErrInvalidEvent = errors.New("invalid event")
	// ErrQueryTruncated: a query matched more than QueryMaxEvents events,
	// or events of more than QueryMaxBytes.
	ErrQueryTruncated = errors.New("query result truncated")
)

// PoolConfig configures a Pool. Zero values take the defaults above.
type PoolConfig struct {
	// URLs of the relays (ws:// or wss://); duplicates are ignored.
	URLs   []string
	Logger *slog.Logger
	// Verifier checks every event received or published; share one with
	// an in-process relay and the inbox so that each event's signature is
	// checked once. Default: a Verifier of the pool's own.
	Verifier *Verifier
	// Backoff between reconnection attempts: capped, jittered
	// exponential; defaults 500 ms base, 30 s cap. It resets to the base
	// once a connection has stayed up for BackoffMax, so a relay that
	// accepts and at once drops connections keeps backing off.
	BackoffBase, BackoffMax time.Duration
	// ResubscribeSkew: after a reconnect, subscriptions resume on that
	// relay from the last created_at it brought minus this (default
	// 10 s), so nothing published during the gap is lost.
	ResubscribeSkew time.Duration
	// DedupeSize and DedupeTTL bound the cross-relay event-id dedupe set
	// of live subscriptions (defaults 100,000 ids, 10 minutes — at least
	// the SNAP replay window).
	DedupeSize int
	DedupeTTL  time.Duration
	// Now is the clock (default time.Now): dedupe expiry, the resume
	// points of subscriptions, health times.
	Now func() time.Time
	// Dial opens one relay connection; default DialWebsocket.
	Dial func(ctx context.Context, url string) (Conn, error)

	// DialTimeout bounds one connection attempt (default 10 s).
	DialTimeout time.Duration
	// PublishTimeout bounds Publish when its context has no deadline
	// (default 10 s).
	PublishTimeout time.Duration
	// EOSETimeout: a Subscription's EOSE channel is closed after this even
	// if a relay never sent EOSE (default 10 s). A relay whose EOSE, for
	// a subscription's REQ or one of its catch-up pages, does not come
	// within this of asking, or of the last stored event it sent, has its
	// catch-up cut (see Subscribe).
	EOSETimeout time.Duration
	// SubscriptionBuffer is the capacity of each Subscription's event
	// channel (default 1024).
	SubscriptionBuffer int
	// SubscriptionBufferBytes bounds the bytes of the events waiting in a
	// Subscription's channel, counted as held in memory (EventSize;
	// default 4 MiB). An event is always let into an empty channel, so
	// one may take it past the bound. A full buffer, by count or by bytes,
	// is a slow consumer's (see Pool).
	SubscriptionBufferBytes int64
	// SlowConsumerTimeout is how long delivery waits for room in a full
	// Subscription buffer before dropping that subscription with
	// ErrSlowConsumer (default 1 s).
	SlowConsumerTimeout time.Duration
	// QueryMaxEvents caps the events one Query returns (default 10,000),
	// QueryMaxBytes their bytes as held in memory (EventSize; default 64
	// MiB, the event that passes it not returned).
	QueryMaxEvents int
	QueryMaxBytes  int64
	// MaxCatchUpPages bounds the pages a subscription asks one relay for
	// after a REQ's stored events (default 100; see Subscribe): relays
	// cap the stored events a REQ returns (often at 500 or fewer, the
	// newest), so a gap longer than that is read back a page at a time.
	// A catch-up that reaches the bound (or whose relay sends no EOSE
	// within EOSETimeout) is logged and counted
	// (RelayStatus.CatchUpsCut), and the relay's resume point does not
	// move until a later REQ to that relay catches up in full.
	MaxCatchUpPages int
}

func (c *PoolConfig) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Verifier == nil {
		c.Verifier = NewVerifier()
	}
	defaults.Positive(&c.BackoffBase, DefaultBackoffBase)
	defaults.Positive(&c.BackoffMax, DefaultBackoffMax)
	c.BackoffMax = max(c.BackoffMax, c.BackoffBase)
	defaults.Positive(&c.ResubscribeSkew, DefaultResubscribeSkew)
	defaults.Positive(&c.DedupeSize, DefaultDedupeSize)
	defaults.Positive(&c.DedupeTTL, DefaultDedupeTTL)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Dial == nil {
		c.Dial = DialWebsocket
	}
	defaults.Positive(&c.DialTimeout, DefaultDialTimeout)
	defaults.Positive(&c.PublishTimeout, DefaultPublishTimeout)
	defaults.Positive(&c.EOSETimeout, DefaultEOSETimeout)
	defaults.Positive(&c.SubscriptionBuffer, DefaultSubscriptionBuffer)
	defaults.Positive(&c.SlowConsumerTimeout, DefaultSlowConsumerTimeout)
	defaults.Positive(&c.QueryMaxEvents, DefaultQueryMaxEvents)
	defaults.Positive(&c.QueryMaxBytes, DefaultQueryMaxBytes)
	defaults.Positive(&c.SubscriptionBufferBytes, DefaultSubscriptionBufferBytes)
	defaults.Positive(&c.MaxCatchUpPages, DefaultMaxCatchUpPages)
}

// Pool keeps one connection to each of a fixed set of relays and offers
// them as one: subscriptions that survive reconnects without losing or
// repeating events, queries, and publishing to all.
//
// Each relay has one goroutine that dials, reads and, when the connection
// drops, waits out a backoff and dials again; nothing else runs in the
// background but the timers that ask a relay again for a subscription, or
// a page of its stored events, it refused for a while: each stops with
// its subscription or its connection, and all with Close. Every event is checked (id, signature, the subscription's
// filter) before delivery, and delivered to a subscription once however
// many relays, or reconnections, bring it.
//
// Slow consumers: each Subscription has a bounded buffer (SubscriptionBuffer
// events, SubscriptionBufferBytes of them as held in memory: a relay
// flooding events of a megabyte to a reader that lags holds 4 MiB, not a
// gigabyte, of them). When it is full,
// delivery waits at most SlowConsumerTimeout for room; if there is still
// none, that subscription alone is ended with ErrSlowConsumer (its channel
// is closed after the events already buffered) and delivery to the others
// goes on. The wait holds up the relay connection that brought the event,
// so one slow reader delays others by at most SlowConsumerTimeout, once.
// Meanwhile that connection reads on from its relay only up to
// MaxConnBacklog bytes of messages, then leaves the rest to TCP's flow
// control: nothing is dropped, and a relay flooding the pool while it waits
// costs the node at most that much memory (and one message).
// A consumer that sees Err() == ErrSlowConsumer may subscribe again with
// Since set to the last created_at it processed.
type Pool struct {
	cfg    PoolConfig
	log    *slog.Logger
	relays []*poolRelay
	dedupe *dedupeSet
	// tailSeed keys the hashes of the ids in the subscriptions' tails
	// (tailKey): random, so that no one can choose events whose ids
	// share one.
	tailSeed maphash.Seed

	mu      sync.Mutex
	subs    map[string]*Subscription // by wire id
	serial  uint64
	started bool
	closed  bool
	cancel  context.CancelFunc
	wake    chan struct{} // closed and replaced when a relay connects
	wg      sync.WaitGroup
	// life ends with Close (end), which cancels the publications still
	// awaiting a relay's answer after their Publish returned and waits
	// for them (detached).
	life     context.Context
	end      context.CancelFunc
	detached sync.WaitGroup
}

// NewPool returns a pool for cfg.URLs. Nothing connects before Start.
func NewPool(cfg PoolConfig) *Pool {
	cfg.setDefaults()
	p := &Pool{
		cfg:      cfg,
		log:      cfg.Logger,
		dedupe:   newDedupeSet(cfg.DedupeSize, cfg.DedupeTTL, cfg.Now),
		tailSeed: maphash.MakeSeed(),
		subs:     map[string]*Subscription{},
		wake:     make(chan struct{}),
	}
	p.life, p.end = context.WithCancel(context.Background())
	seen := map[string]bool{}
	for _, u := range cfg.URLs {
		if seen[u] {
			continue
		}
		seen[u] = true
		r := &poolRelay{p: p, idx: len(p.relays), url: u, log: p.log.With("relay", u)}
		r.state.Store(StateIdle)
		p.relays = append(p.relays, r)
	}
	return p
}

// tailKey is the key of event id in a subscription's tail: a 64-bit hash
// of it under the pool's seed.
func (p *Pool) tailKey(id [32]byte) uint64 { return maphash.Bytes(p.tailSeed, id[:]) }

// Start connects to every relay in the background and reconnects, with
// backoff, until ctx ends or Close is called. Calls after the first, or
// after Close, do nothing.
func (p *Pool) Start(ctx context.Context) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started || p.closed {
		return
	}
	p.started = true
	ctx, p.cancel = context.WithCancel(ctx)
	for _, r := range p.relays {
		p.wg.Go(func() { r.run(ctx) })
	}
}

// Close stops every relay loop, waits for them and ends every open
// Subscription with ErrPoolClosed.
func (p *Pool) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	cancel := p.cancel
	subs := p.subscriptions()
	p.mu.Unlock()
	if cancel != nil {
		cancel()
	}
	for _, s := range subs { // first: releases a delivery waiting on a full buffer
		s.end(ErrPoolClosed)
	}
	p.end()
	p.detached.Wait()
	p.wg.Wait()
	return nil
}

// subscriptions returns the open subscriptions. p.mu must be held.
func (p *Pool) subscriptions() []*Subscription {
	out := make([]*Subscription, 0, len(p.subs))
	for _, s := range p.subs {
		out = append(out, s)
	}
	return out
}

func (p *Pool) snapshotSubs() []*Subscription {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.subscriptions()
}

func (p *Pool) lookup(wireID string) *Subscription {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.subs[wireID]
}

// lookupWire returns the subscription of a relay's message by its wire
// id, and page, the id itself if it is one of the subscription's
// catch-up pages (see pageID), "" if it is the subscription's own.
func (p *Pool) lookupWire(id string) (s *Subscription, page string) {
	if s := p.lookup(id); s != nil {
		return s, ""
	}
	if base, _, ok := strings.Cut(id, pageSep); ok {
		return p.lookup(base), id
	}
	return nil, ""
}

// skew is ResubscribeSkew in whole seconds, rounded up.
func (p *Pool) skew() nostr.Timestamp {
	return nostr.Timestamp((p.cfg.ResubscribeSkew + time.Second - 1) / time.Second)
}
