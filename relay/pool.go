package relay

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// Pool defaults.
const (
	DefaultBackoffBase         = 500 * time.Millisecond
	DefaultBackoffMax          = 30 * time.Second
	DefaultResubscribeSkew     = 10 * time.Second
	DefaultDedupeSize          = 100_000
	DefaultDedupeTTL           = 10 * time.Minute
	DefaultDialTimeout         = 10 * time.Second
	DefaultPublishTimeout      = 10 * time.Second
	DefaultEOSETimeout         = 10 * time.Second
	DefaultSubscriptionBuffer  = 1024
	DefaultSlowConsumerTimeout = time.Second
	DefaultQueryMaxEvents      = 10_000
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
	// ErrQueryTruncated: a query matched more than QueryMaxEvents events.
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
	// ResubscribeSkew: after a reconnect, subscriptions resume from the
	// last seen created_at minus this (default 10 s), so nothing published
	// during the gap is lost.
	ResubscribeSkew time.Duration
	// DedupeSize and DedupeTTL bound the cross-relay event-id dedupe set
	// of live subscriptions (defaults 100,000 ids, 10 minutes — at least
	// the SNAP replay window).
	DedupeSize int
	DedupeTTL  time.Duration
	// Now is the clock (default time.Now): dedupe expiry, the resume point
	// of subscriptions, health times.
	Now func() time.Time
	// Dial opens one relay connection; default DialWebsocket.
	Dial func(ctx context.Context, url string) (Conn, error)

	// DialTimeout bounds one connection attempt (default 10 s).
	DialTimeout time.Duration
	// PublishTimeout bounds Publish when its context has no deadline
	// (default 10 s).
	PublishTimeout time.Duration
	// EOSETimeout: a Subscription's EOSE channel is closed after this even
	// if a relay never sent EOSE (default 10 s).
	EOSETimeout time.Duration
	// SubscriptionBuffer is the capacity of each Subscription's event
	// channel (default 1024).
	SubscriptionBuffer int
	// SlowConsumerTimeout is how long delivery waits for room in a full
	// Subscription buffer before dropping that subscription with
	// ErrSlowConsumer (default 1 s).
	SlowConsumerTimeout time.Duration
	// QueryMaxEvents caps the events one Query returns (default 10,000).
	QueryMaxEvents int
}

func (c *PoolConfig) setDefaults() {
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Verifier == nil {
		c.Verifier = NewVerifier()
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	c.BackoffMax = max(c.BackoffMax, c.BackoffBase)
	if c.ResubscribeSkew <= 0 {
		c.ResubscribeSkew = DefaultResubscribeSkew
	}
	if c.DedupeSize <= 0 {
		c.DedupeSize = DefaultDedupeSize
	}
	if c.DedupeTTL <= 0 {
		c.DedupeTTL = DefaultDedupeTTL
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Dial == nil {
		c.Dial = DialWebsocket
	}
	if c.DialTimeout <= 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.PublishTimeout <= 0 {
		c.PublishTimeout = DefaultPublishTimeout
	}
	if c.EOSETimeout <= 0 {
		c.EOSETimeout = DefaultEOSETimeout
	}
	if c.SubscriptionBuffer <= 0 {
		c.SubscriptionBuffer = DefaultSubscriptionBuffer
	}
	if c.SlowConsumerTimeout <= 0 {
		c.SlowConsumerTimeout = DefaultSlowConsumerTimeout
	}
	if c.QueryMaxEvents <= 0 {
		c.QueryMaxEvents = DefaultQueryMaxEvents
	}
}

// Pool keeps one connection to each of a fixed set of relays and offers
// them as one: subscriptions that survive reconnects without losing or
// repeating events, queries, and publishing to all.
//
// Each relay has one goroutine that dials, reads and, when the connection
// drops, waits out a backoff and dials again; nothing else runs in the
// background. Every event is checked (id, signature, the subscription's
// filter) before delivery, and delivered to a subscription once however
// many relays, or reconnections, bring it.
//
// Slow consumers: each Subscription has a bounded buffer. When it is full,
// delivery waits at most SlowConsumerTimeout for room; if there is still
// none, that subscription alone is ended with ErrSlowConsumer (its channel
// is closed after the events already buffered) and delivery to the others
// goes on. The wait holds up the relay connection that brought the event,
// so one slow reader delays others by at most SlowConsumerTimeout, once.
// A consumer that sees Err() == ErrSlowConsumer may subscribe again with
// Since set to the last created_at it processed.
type Pool struct {
	cfg    PoolConfig
	log    *slog.Logger
	relays []*poolRelay
	dedupe *dedupeSet

	mu      sync.Mutex
	subs    map[string]*Subscription // by wire id
	serial  uint64
	started bool
	closed  bool
	cancel  context.CancelFunc
	wake    chan struct{} // closed and replaced when a relay connects
	wg      sync.WaitGroup
}

// NewPool returns a pool for cfg.URLs. Nothing connects before Start.
func NewPool(cfg PoolConfig) *Pool {
	cfg.setDefaults()
	p := &Pool{
		cfg:    cfg,
		log:    cfg.Logger,
		dedupe: newDedupeSet(cfg.DedupeSize, cfg.DedupeTTL, cfg.Now),
		subs:   map[string]*Subscription{},
		wake:   make(chan struct{}),
	}
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

// Subscription is a live subscription across all relays of a Pool.
type Subscription struct {
	p      *Pool
	serial uint64
	wireID string                // the NIP-01 subscription id
	filter nostr.Filter          // as given: every event is checked against it
	local  map[[32]byte]struct{} // a Query's own dedupe set (guarded by mu)

	events   chan *nostr.Event
	sendMu   sync.Mutex // held while sending on events; events is closed under it
	eose     chan struct{}
	eoseOnce sync.Once
	done     chan struct{}
	doneOnce sync.Once
	err      error // set before done is closed

	mu       sync.Mutex
	stopCtx  func() bool  // stops the context.AfterFunc that ends s
	pending  map[int]bool // relays whose EOSE is awaited
	awaited  int          // relays awaited at first
	served   map[int]bool // relays that sent EOSE: later REQs resume from lastSeen
	lastSeen nostr.Timestamp
	// tail holds the ids delivered with created_at ≥ lastSeen − skew,
	// which a relay resends after a reconnect. It outlives DedupeTTL, so
	// an outage longer than the TTL does not redeliver them.
	tail      map[[32]byte]nostr.Timestamp
	eoseTimer *time.Timer
}

// Events delivers the matching events, each once. The channel is closed
// when the subscription ends; Err then says why.
func (s *Subscription) Events() <-chan *nostr.Event { return s.events }

// EOSE is closed once every relay that was not backing off has sent EOSE
// (relays that fall into backoff are no longer waited for), or after
// EOSETimeout, or when the subscription ends.
func (s *Subscription) EOSE() <-chan struct{} { return s.eose }

// Filter returns the filter the subscription was opened with.
func (s *Subscription) Filter() nostr.Filter { return s.filter.Clone() }

// Err is nil while the subscription is open; afterwards it is
// ErrSubscriptionClosed, ErrSlowConsumer, ErrPoolClosed or the cause of
// the context given to Subscribe.
func (s *Subscription) Err() error {
	select {
	case <-s.done:
		return s.err
	default:
		return nil
	}
}

// Close ends the subscription and sends CLOSE to the relays. It may be
// called more than once.
func (s *Subscription) Close() { s.end(ErrSubscriptionClosed) }

func (s *Subscription) end(err error) {
	s.doneOnce.Do(func() {
		s.err = err
		close(s.done)
		s.mu.Lock()
		stop, timer := s.stopCtx, s.eoseTimer
		s.mu.Unlock()
		if stop != nil {
			stop()
		}
		if timer != nil {
			timer.Stop()
		}
		s.closeEOSE()
		s.p.mu.Lock()
		delete(s.p.subs, s.wireID)
		s.p.mu.Unlock()
		for _, r := range s.p.relays {
			r.dropSub(s)
		}
		s.sendMu.Lock()
		close(s.events)
		s.sendMu.Unlock()
		if errors.Is(err, ErrSlowConsumer) {
			s.p.log.Warn("relay pool: subscription dropped", "sub", s.wireID, "err", err)
		}
	})
}

func (s *Subscription) closeEOSE() { s.eoseOnce.Do(func() { close(s.eose) }) }

// relayDone stops waiting for relay idx's EOSE; eose says whether the
// relay sent it (and so has served its stored events).
func (s *Subscription) relayDone(idx int, eose bool) {
	s.mu.Lock()
	if eose {
		s.served[idx] = true
	}
	wasPending := s.pending[idx]
	delete(s.pending, idx)
	empty := wasPending && len(s.pending) == 0
	s.mu.Unlock()
	if empty {
		s.closeEOSE()
	}
}

// reqFilter is the filter to send to relay idx: the original one the
// first time, and after a reconnect the original with since moved to the
// last created_at seen minus the skew (and no limit: the whole gap is
// wanted).
func (s *Subscription) reqFilter(idx int) nostr.Filter {
	s.mu.Lock()
	served, last := s.served[idx], s.lastSeen
	s.mu.Unlock()
	f := s.filter.Clone()
	if !served || last == 0 {
		return f
	}
	since := max(last-s.p.skew(), 0)
	if f.Since == nil || since > *f.Since {
		f.Since = &since
	}
	f.Limit, f.LimitZero = 0, false
	return f
}

// noteSeen moves the resume point. A created_at in the future counts as
// now, so a forged far-future event cannot make resubscriptions skip what
// comes before it.
func (s *Subscription) noteSeen(at nostr.Timestamp) {
	at = min(at, nostr.Timestamp(s.p.cfg.Now().Unix()))
	s.mu.Lock()
	defer s.mu.Unlock()
	if at <= s.lastSeen {
		return
	}
	s.lastSeen = at
	floor := at - s.p.skew()
	for id, t := range s.tail {
		if t < floor {
			delete(s.tail, id)
		}
	}
}

// firstSight records the id of an event created at at for this
// subscription and reports whether it is new.
func (s *Subscription) firstSight(id [32]byte, at nostr.Timestamp) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.local != nil {
		if _, ok := s.local[id]; ok {
			return false
		}
		s.local[id] = struct{}{}
		return true
	}
	if !s.p.dedupe.add(dedupeKey{sub: s.serial, id: id}) {
		return false
	}
	if _, ok := s.tail[id]; ok {
		return false
	}
	if at >= s.lastSeen-s.p.skew() && len(s.tail) < s.p.cfg.DedupeSize {
		s.tail[id] = at
	}
	return true
}

func (s *Subscription) seenBefore(id [32]byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.local != nil {
		_, ok := s.local[id]
		return ok
	}
	if _, ok := s.tail[id]; ok {
		return true
	}
	return s.p.dedupe.contains(dedupeKey{sub: s.serial, id: id})
}

// skew is ResubscribeSkew in whole seconds, rounded up.
func (p *Pool) skew() nostr.Timestamp {
	return nostr.Timestamp((p.cfg.ResubscribeSkew + time.Second - 1) / time.Second)
}

// deliver hands ev to the reader, applying the slow-consumer policy.
func (s *Subscription) deliver(ev *nostr.Event) {
	s.sendMu.Lock()
	select {
	case <-s.done:
		s.sendMu.Unlock()
		return
	default:
	}
	select {
	case s.events <- ev:
		s.sendMu.Unlock()
		return
	default:
	}
	t := time.NewTimer(s.p.cfg.SlowConsumerTimeout)
	delivered := false
	select {
	case s.events <- ev:
		delivered = true
	case <-t.C:
	case <-s.done:
		delivered = true // ended meanwhile: nothing to do
	}
	t.Stop()
	s.sendMu.Unlock()
	if !delivered {
		s.end(fmt.Errorf("relay: subscription %s: buffer of %d full for %s: %w",
			s.wireID, cap(s.events), s.p.cfg.SlowConsumerTimeout, ErrSlowConsumer))
	}
}

// Subscribe delivers every event matching f from any relay: each event id
// once (across relays and reconnects), each event's id and signature
// verified (unverifiable events are dropped and counted in Health), and
// each re-checked against f, since some relays ignore multi-letter tag
// filters on live subscriptions. After a reconnect, a relay that had sent
// EOSE is asked again with since = max(f.Since, last seen created_at −
// ResubscribeSkew). The subscription ends when ctx ends, on Close, when
// the pool closes, or under the slow-consumer policy (see Pool).
func (p *Pool) Subscribe(ctx context.Context, f nostr.Filter) (*Subscription, error) {
	return p.subscribe(ctx, f, false)
}

func (p *Pool) subscribe(ctx context.Context, f nostr.Filter, query bool) (*Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("relay: subscribe: %w", err)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("relay: subscribe: %w", ErrPoolClosed)
	}
	p.serial++
	s := &Subscription{
		p:       p,
		serial:  p.serial,
		wireID:  "snap-" + strconv.FormatUint(p.serial, 36),
		filter:  f.Clone(),
		events:  make(chan *nostr.Event, p.cfg.SubscriptionBuffer),
		eose:    make(chan struct{}),
		done:    make(chan struct{}),
		pending: map[int]bool{},
		served:  map[int]bool{},
		tail:    map[[32]byte]nostr.Timestamp{},
	}
	if query {
		s.local = map[[32]byte]struct{}{}
	}
	// The relays awaited for EOSE are read while registering, under p.mu:
	// a relay that falls into backoff either is seen in backoff here or
	// finds s registered and stops awaiting; and no relay can answer
	// before s is registered.
	for _, r := range p.relays {
		if r.state.Load() != StateBackoff {
			s.pending[r.idx] = true
		}
	}
	s.awaited = len(s.pending)
	if s.awaited > 0 {
		s.eoseTimer = time.AfterFunc(p.cfg.EOSETimeout, s.closeEOSE)
	} else {
		s.closeEOSE()
	}
	p.subs[s.wireID] = s
	p.mu.Unlock()

	// From here on Pool.Close may end s at any time.
	stop := context.AfterFunc(ctx, func() { s.end(context.Cause(ctx)) })
	s.mu.Lock()
	s.stopCtx = stop
	ended := s.Err() != nil
	s.mu.Unlock()
	if ended {
		stop()
	}
	for _, r := range p.relays {
		r.ensureSub(s)
	}
	return s, nil
}

// Query returns the stored events matching f from all relays, deduped,
// verified and checked against f, once every relay not in backoff has sent
// EOSE (or EOSETimeout passed). If ctx ends first, it returns what it has
// with ctx's error. It fails with ErrNoRelays when every relay is backing
// off, and returns QueryMaxEvents events with ErrQueryTruncated when more
// match.
func (p *Pool) Query(ctx context.Context, f nostr.Filter) ([]*nostr.Event, error) {
	s, err := p.subscribe(ctx, f, true)
	if err != nil {
		return nil, err
	}
	defer s.Close()
	s.mu.Lock()
	none := s.awaited == 0
	s.mu.Unlock()
	if none {
		return nil, fmt.Errorf("relay: query: %w", ErrNoRelays)
	}
	var out []*nostr.Event
	add := func(ev *nostr.Event) error {
		if len(out) >= p.cfg.QueryMaxEvents {
			return fmt.Errorf("relay: query: more than %d events: %w", p.cfg.QueryMaxEvents, ErrQueryTruncated)
		}
		out = append(out, ev)
		return nil
	}
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return out, fmt.Errorf("relay: query: %w", s.Err())
			}
			if err := add(ev); err != nil {
				return out, err
			}
		case <-s.eose:
			if err := s.Err(); err != nil {
				return out, fmt.Errorf("relay: query: %w", err)
			}
			// Events sent before each relay's EOSE are already buffered.
			s.Close()
			for ev := range s.events {
				if err := add(ev); err != nil {
					return out, err
				}
			}
			return out, nil
		}
	}
}

// RelayOutcome is what one relay did with a published event.
type RelayOutcome struct {
	URL     string
	OK      bool   // the relay answered OK true
	Message string // the relay's OK message, if any
	Err     error  // nil when OK; else ErrNotConnected, ErrRejected or a transport error
}

// PublishResult gathers the outcome of a Publish on every relay, in the
// order of PoolConfig.URLs.
type PublishResult struct {
	EventID string
	Relays  []RelayOutcome
}

// Accepted returns how many relays answered OK true.
func (r PublishResult) Accepted() int {
	n := 0
	for _, o := range r.Relays {
		if o.OK {
			n++
		}
	}
	return n
}

// Publish sends ev, which must verify, to every connected relay and waits
// for their OKs (bounded by ctx, or PublishTimeout when ctx has no
// deadline). When no relay is connected yet it waits, within the same
// bound, for one to connect. It succeeds when at least one relay answers
// OK true; the outcome of each relay is returned and logged either way.
func (p *Pool) Publish(ctx context.Context, ev nostr.Event) (PublishResult, error) {
	res := PublishResult{EventID: ev.ID}
	if err := p.cfg.Verifier.Verify(&ev); err != nil {
		return res, fmt.Errorf("relay: publish: %w", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, p.cfg.PublishTimeout)
		defer cancel()
	}
	res.Relays = make([]RelayOutcome, len(p.relays))
	conns, err := p.awaitConnected(ctx)
	if err != nil {
		for i, r := range p.relays {
			res.Relays[i] = RelayOutcome{URL: r.url, Err: ErrNotConnected}
		}
		return res, fmt.Errorf("relay: publish %s: %w", ev.ID, err)
	}
	var wg sync.WaitGroup
	for i, r := range p.relays {
		res.Relays[i].URL = r.url
		c := conns[i]
		if c == nil {
			res.Relays[i].Err = ErrNotConnected
			continue
		}
		o := &res.Relays[i]
		wg.Go(func() {
			ok, msg, err := c.Publish(ctx, ev)
			o.OK, o.Message = ok && err == nil, msg
			switch {
			case err != nil:
				o.Err = err
			case !ok:
				o.Err = fmt.Errorf("%w: %s", ErrRejected, msg)
			}
		})
	}
	wg.Wait()
	var errs []error
	for _, o := range res.Relays {
		switch {
		case o.OK:
			p.log.Debug("relay pool: published", "relay", o.URL, "event", ev.ID, "kind", ev.Kind)
			continue
		case errors.Is(o.Err, ErrNotConnected): // its connection loop already logs why
			p.log.Debug("relay pool: not published", "relay", o.URL, "event", ev.ID, "kind", ev.Kind, "err", o.Err)
		default:
			p.log.Warn("relay pool: publish failed", "relay", o.URL, "event", ev.ID, "kind", ev.Kind, "err", o.Err)
		}
		errs = append(errs, fmt.Errorf("%s: %w", o.URL, o.Err))
	}
	if res.Accepted() == 0 {
		return res, fmt.Errorf("relay: publish %s: %w: %w", ev.ID, ErrNotAccepted, errors.Join(errs...))
	}
	return res, nil
}

// awaitConnected returns the current connection of each relay (nil when
// not connected), waiting until ctx ends for at least one.
func (p *Pool) awaitConnected(ctx context.Context) ([]Conn, error) {
	for {
		p.mu.Lock()
		closed, wake := p.closed, p.wake
		p.mu.Unlock()
		if closed {
			return nil, ErrPoolClosed
		}
		conns := make([]Conn, len(p.relays))
		some := false
		for i, r := range p.relays {
			r.mu.Lock()
			if r.publishing {
				conns[i] = r.conn
			}
			r.mu.Unlock()
			some = some || conns[i] != nil
		}
		if some {
			return conns, nil
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, fmt.Errorf("%w: %w", ErrNoRelays, context.Cause(ctx))
		}
	}
}

func (p *Pool) wakeWaiters() {
	p.mu.Lock()
	close(p.wake)
	p.wake = make(chan struct{})
	p.mu.Unlock()
}

// RelayState is the state of one relay connection.
type RelayState string

// Relay states.
const (
	StateIdle       RelayState = "idle" // not started, or stopped
	StateConnecting RelayState = "connecting"
	StateConnected  RelayState = "connected"
	StateBackoff    RelayState = "backoff" // waiting before the next attempt
)

// RelayStatus is the health of one relay.
type RelayStatus struct {
	URL            string
	State          RelayState
	LastError      error     // the last dial or connection error, nil if none yet
	LastErrorAt    time.Time //
	ConnectedSince time.Time // zero unless connected
	RetryAt        time.Time // next attempt, when in backoff
	Reconnects     int       // connections made after the first
	EventsReceived uint64    // EVENT messages received, before any check
	EventsInvalid  uint64    // dropped: bad id or signature
	EventsMismatch uint64    // dropped: not matching the subscription's filter
}

// Health returns the status of every relay, in the order of
// PoolConfig.URLs.
func (p *Pool) Health() []RelayStatus {
	out := make([]RelayStatus, len(p.relays))
	for i, r := range p.relays {
		r.mu.Lock()
		out[i] = RelayStatus{
			URL:            r.url,
			State:          r.state.Load(),
			LastError:      r.lastErr,
			LastErrorAt:    r.lastErrAt,
			RetryAt:        r.retryAt,
			Reconnects:     max(r.connects-1, 0),
			EventsReceived: r.received.Load(),
			EventsInvalid:  r.invalid.Load(),
			EventsMismatch: r.mismatch.Load(),
		}
		if r.conn != nil {
			out[i].ConnectedSince = r.connectedAt
		}
		r.mu.Unlock()
	}
	return out
}

// poolRelay is one relay of a pool and its connection loop.
type poolRelay struct {
	p   *Pool
	idx int
	url string
	log *slog.Logger

	state atomicState // read without mu by Subscribe

	mu     sync.Mutex
	conn   Conn            // nil unless connected
	active map[uint64]bool // subscriptions REQ'd on conn
	// publishing: conn takes publications. Set once the REQs of the
	// subscriptions open when it connected are sent, so that a request
	// published right after its reply's subscription is never on the
	// wire before that REQ (the reply, ephemeral, would be missed).
	publishing  bool
	lastErr     error
	lastErrAt   time.Time
	connectedAt time.Time
	retryAt     time.Time
	connects    int

	received, invalid, mismatch atomic.Uint64
}

type atomicState struct{ v atomic.Value }

func (a *atomicState) Load() RelayState   { s, _ := a.v.Load().(RelayState); return s }
func (a *atomicState) Store(s RelayState) { a.v.Store(s) }

// run dials, serves and redials until ctx ends.
func (r *poolRelay) run(ctx context.Context) {
	defer r.state.Store(StateIdle)
	bo := backoff{base: r.p.cfg.BackoffBase, max: r.p.cfg.BackoffMax}
	for {
		r.state.Store(StateConnecting)
		dctx, cancel := context.WithTimeout(ctx, r.p.cfg.DialTimeout)
		conn, err := r.p.cfg.Dial(dctx, r.url)
		cancel()
		if ctx.Err() != nil {
			if err == nil {
				conn.Close()
			}
			return
		}
		if err != nil {
			if !r.wait(ctx, bo.next(), err) {
				return
			}
			continue
		}
		up := r.p.cfg.Now()
		err = r.serve(ctx, conn)
		if ctx.Err() != nil {
			return
		}
		if r.p.cfg.Now().Sub(up) >= r.p.cfg.BackoffMax {
			bo.reset()
		}
		if !r.wait(ctx, bo.next(), err) {
			return
		}
	}
}

// wait records err, enters backoff for d and reports whether ctx is still
// alive afterwards.
func (r *poolRelay) wait(ctx context.Context, d time.Duration, err error) bool {
	now := r.p.cfg.Now()
	r.mu.Lock()
	r.lastErr, r.lastErrAt, r.retryAt = err, now, now.Add(d)
	r.mu.Unlock()
	r.state.Store(StateBackoff)
	for _, s := range r.p.snapshotSubs() {
		s.relayDone(r.idx, false)
	}
	r.log.Info("relay pool: relay down, backing off", "err", err, "retry_in", d)
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// serve runs one connection: subscribes every open subscription, then
// handles what the relay sends until the connection or ctx ends. It
// returns why the connection ended.
func (r *poolRelay) serve(ctx context.Context, conn Conn) error {
	r.mu.Lock()
	r.conn, r.active = conn, map[uint64]bool{}
	r.connects++
	r.connectedAt, r.retryAt = r.p.cfg.Now(), time.Time{}
	reconnect := r.connects > 1
	r.mu.Unlock()
	// Subscriptions first, then publications: see publishing.
	for _, s := range r.p.snapshotSubs() {
		r.ensureSub(s)
	}
	r.mu.Lock()
	r.publishing = true
	r.mu.Unlock()
	r.state.Store(StateConnected)
	r.log.Info("relay pool: connected", "reconnect", reconnect)
	r.p.wakeWaiters()

	var err error
loop:
	for {
		select {
		case <-ctx.Done():
			err = ctx.Err()
			break loop
		case m, ok := <-conn.Messages():
			if !ok {
				err = conn.Err()
				break loop
			}
			r.handle(m)
		}
	}
	r.mu.Lock()
	r.conn, r.active, r.publishing = nil, nil, false
	r.mu.Unlock()
	conn.Close()
	if err == nil {
		err = ErrConnClosed
	}
	return err
}

// ensureSub sends s's REQ on the current connection unless it was sent
// already. Under r.mu, so that REQ and CLOSE of one subscription are
// queued in order.
func (r *poolRelay) ensureSub(s *Subscription) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn == nil || r.active[s.serial] {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	r.active[s.serial] = true
	f := s.reqFilter(r.idx)
	if err := r.conn.Req(s.wireID, f); err != nil {
		r.log.Warn("relay pool: REQ failed", "sub", s.wireID, "err", err)
		return
	}
	r.log.Debug("relay pool: REQ", "sub", s.wireID, "filter", f)
}

// dropSub sends CLOSE for s if it is open on the current connection.
func (r *poolRelay) dropSub(s *Subscription) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.active[s.serial] {
		return
	}
	delete(r.active, s.serial)
	if r.conn != nil {
		if err := r.conn.CloseReq(s.wireID); err != nil {
			r.log.Debug("relay pool: CLOSE failed", "sub", s.wireID, "err", err)
		}
	}
}

func (r *poolRelay) handle(m ConnMessage) {
	switch m.Label {
	case "EVENT":
		r.received.Add(1)
		if s := r.p.lookup(m.SubID); s != nil && m.Event != nil {
			r.accept(s, m.Event)
		}
	case "EOSE":
		if s := r.p.lookup(m.SubID); s != nil {
			s.relayDone(r.idx, true)
		}
	case "CLOSED":
		r.log.Warn("relay pool: relay closed a subscription", "sub", m.SubID, "reason", m.Reason)
		if s := r.p.lookup(m.SubID); s != nil {
			r.mu.Lock()
			delete(r.active, s.serial)
			r.mu.Unlock()
			s.relayDone(r.idx, false)
		}
	case "NOTICE":
		r.log.Info("relay pool: notice", "notice", m.Reason)
	}
}

// accept checks ev and delivers it to s if it is new there.
func (r *poolRelay) accept(s *Subscription, ev *nostr.Event) {
	var id [32]byte
	if len(ev.ID) != 64 {
		r.invalid.Add(1)
		return
	}
	if _, err := hex.Decode(id[:], []byte(ev.ID)); err != nil {
		r.invalid.Add(1)
		return
	}
	if s.seenBefore(id) { // cheap: skip verifying what another relay brought
		return
	}
	if err := r.p.cfg.Verifier.Verify(ev); err != nil {
		r.invalid.Add(1)
		r.log.Debug("relay pool: dropped an invalid event", "sub", s.wireID, "err", err)
		return
	}
	if !s.filter.Matches(ev) {
		r.mismatch.Add(1)
		r.log.Debug("relay pool: dropped an event outside the filter", "sub", s.wireID, "event", ev.ID)
		return
	}
	s.noteSeen(ev.CreatedAt)
	if !s.firstSight(id, ev.CreatedAt) {
		return
	}
	s.deliver(ev)
}
