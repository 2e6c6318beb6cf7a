package relay

import (
	"context"
	"encoding/hex"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"

	"github.com/snapnode/snapnode/internal/logcap"
)

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
	EventsMismatch uint64    // dropped: not matching the subscription's filter, or past a query's limit
	// EventsDuplicate counts the events dropped as already delivered to
	// their subscription (by this relay or another).
	EventsDuplicate uint64
	// PublishFailed counts the publications the relay refused (OK
	// false) or did not answer within their bound.
	PublishFailed uint64
	// CatchUpPages counts the pages of stored events asked for after a
	// REQ's (see Subscribe); CatchUpsCut the catch-ups that stopped
	// before a page brought nothing older (at MaxCatchUpPages, the relay
	// refused a page for good, or its EOSE for the REQ or a page did not
	// come within EOSETimeout): the relay's resume point did not move.
	CatchUpPages, CatchUpsCut uint64
}

// Health returns the status of every relay, in the order of
// PoolConfig.URLs.
func (p *Pool) Health() []RelayStatus {
	out := make([]RelayStatus, len(p.relays))
	for i, r := range p.relays {
		r.mu.Lock()
		out[i] = RelayStatus{
			URL:             r.url,
			State:           r.state.Load(),
			LastError:       r.lastErr,
			LastErrorAt:     r.lastErrAt,
			RetryAt:         r.retryAt,
			Reconnects:      max(r.connects-1, 0),
			EventsReceived:  r.received.Load(),
			EventsInvalid:   r.invalid.Load(),
			EventsMismatch:  r.mismatch.Load(),
			EventsDuplicate: r.duplicate.Load(),
			PublishFailed:   r.publishFailed.Load(),
			CatchUpPages:    r.pages.Load(),
			CatchUpsCut:     r.cuts.Load(),
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
	// refused counts the CLOSEDs of each open subscription on conn (see
	// handle): a relay that closes a subscription after each EOSE is
	// asked again ever more slowly, up to BackoffMax. An entry lasts no
	// longer than conn or its subscription.
	refused map[uint64]int
	// retrying holds the subscriptions whose REQ is to be sent again on
	// conn after a CLOSED: one timer each, however many CLOSEDs come;
	// repaging those whose catch-up page, refused, is to be asked again
	// (see retryAfter). Each timer is stopped with its subscription
	// (dropSub) or conn (serve), so none outlives them.
	retrying, repaging map[uint64]*time.Timer
	// awaiting holds, by serial, the timer of the subscription whose REQ
	// or catch-up page awaits its EOSE on conn (see awaitEOSE): stopped
	// with its subscription, its connection, or the EOSE.
	awaiting map[uint64]*time.Timer
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

	received, invalid, mismatch, duplicate atomic.Uint64
	publishFailed                          atomic.Uint64
	pages, cuts                            atomic.Uint64  // see RelayStatus
	talk                                   logcap.Limiter // the relay's NOTICEs and CLOSEDs logged
	// failures: the publications it refused or did not answer, logged
	// (a relay may refuse every one: a paid relay, a blocked kind).
	failures logcap.Limiter
	// pendingAnswers counts the publications still awaiting this relay's
	// OK after Publish returned (at most MaxPendingAnswers).
	pendingAnswers atomic.Int32
	// retryTimers counts the timers of retrying and repaging whose
	// function may still run: set, and neither stopped nor run.
	retryTimers atomic.Int64
	// eoseTimers counts those of awaiting alike.
	eoseTimers atomic.Int64
	// late: the REQs and pages whose EOSE did not come in time, logged.
	late logcap.Limiter
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
		s.relayDone(r.idx)
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
	r.conn, r.active, r.refused = conn, map[uint64]bool{}, map[uint64]int{}
	r.retrying, r.repaging = map[uint64]*time.Timer{}, map[uint64]*time.Timer{}
	r.awaiting = map[uint64]*time.Timer{}
	r.connects++
	r.connectedAt, r.retryAt = r.p.cfg.Now(), time.Time{}
	reconnect := r.connects > 1
	r.mu.Unlock()
	if ic, ok := conn.(InProcessConn); ok {
		ic.Deliver(func(m ConnMessage) { r.handle(m, true) })
	}
	if wc, ok := conn.(*wsConn); ok {
		wc.countBacklog() // given back below, once handled
	}
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
			r.handle(m, false)
			if m.backlog != nil {
				m.backlog.release(m.size)
			}
		}
	}
	r.mu.Lock()
	r.stopRetries(r.retrying)
	r.stopRetries(r.repaging)
	r.stopTimers(r.awaiting, &r.eoseTimers)
	r.conn, r.active, r.refused, r.retrying, r.repaging, r.publishing = nil, nil, nil, nil, nil, false
	r.awaiting = nil
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
	r.ensureSubLocked(s)
}

// ensureSubLocked is ensureSub with r.mu held.
func (r *poolRelay) ensureSubLocked(s *Subscription) {
	if r.conn == nil || r.active[s.serial] {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	r.active[s.serial] = true
	f, stale := s.reqFilter(r.idx)
	if stale != "" {
		if err := r.conn.CloseReq(stale); err != nil {
			r.log.Debug("relay pool: CLOSE failed", "sub", stale, "err", err)
		}
	}
	if err := r.conn.Req(s.wireID, f); err != nil {
		r.log.Warn("relay pool: REQ failed", "sub", s.wireID, "err", err)
		return
	}
	r.log.Debug("relay pool: REQ", "sub", s.wireID, "filter", f)
	if s.local == nil { // a Query has no catch-up to cut: it ends anyway
		r.awaitEOSE(s, "")
	}
}

// awaitEOSE has s's catch-up cut on this relay if the EOSE of ask (the
// REQ's, "", or a catch-up page's id) does not come within EOSETimeout:
// a relay that never sends it would otherwise keep s's catch-up going
// for the whole connection, its events taken as stored ones
// (SubscribeOptions.Stored) and its point never moving, unseen. A relay
// still sending the stored events is not cut: the wait runs from the last
// of them. The timer replaces the one awaiting s's previous REQ or page.
// r.mu is held.
func (r *poolRelay) awaitEOSE(s *Subscription, ask string) {
	r.awaitEOSEFor(s, ask, r.p.cfg.EOSETimeout)
}

// awaitEOSEFor is awaitEOSE, its timer set to d. r.mu is held.
func (r *poolRelay) awaitEOSEFor(s *Subscription, ask string, d time.Duration) {
	r.after(r.awaiting, &r.eoseTimers, s.serial, d, func() {
		cut, again := s.eoseLate(r.idx, ask, r.p.cfg.EOSETimeout)
		if again > 0 {
			r.awaitEOSEFor(s, ask, again) // still sending: r.mu is held
			return
		}
		if !cut {
			return // it came meanwhile, or the catch-up moved on
		}
		r.cuts.Add(1)
		what := "REQ"
		if ask != "" {
			what = "catch-up page"
			if r.conn != nil {
				if err := r.conn.CloseReq(ask); err != nil {
					r.log.Debug("relay pool: CLOSE failed", "sub", ask, "err", err)
				}
			}
		}
		r.logLimited(&r.late, slog.LevelWarn, "relay pool: no EOSE from the relay in time; its catch-up of stored events is cut, its later events taken as live, and its resume point stays until a later REQ catches up",
			"sub", s.wireID, "for", what, "timeout", r.p.cfg.EOSETimeout)
	})
}

// dropSub sends CLOSE for s, and for its catch-up page, if open on the
// current connection (a page may be while s's REQ, closed by the relay,
// waits to be asked again: see paging), and stops the timers that would
// ask either again.
func (r *poolRelay) dropSub(s *Subscription) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.refused, s.serial)
	active, paging := r.active[s.serial], r.paging(s)
	r.stopRetry(r.retrying, s.serial)
	r.stopRetry(r.repaging, s.serial)
	r.stopTimer(r.awaiting, &r.eoseTimers, s.serial)
	if !paging {
		return
	}
	delete(r.active, s.serial)
	if r.conn == nil {
		return
	}
	for _, id := range []string{s.openPage(r.idx), s.wireID} {
		if id == "" || (id == s.wireID && !active) {
			continue
		}
		if err := r.conn.CloseReq(id); err != nil {
			r.log.Debug("relay pool: CLOSE failed", "sub", id, "err", err)
		}
	}
}

// storedEnd acts on the relay's EOSE for s's REQ, or for page of its
// catch-up (see catchUp): it closes the page and asks for the next one,
// if any.
func (r *poolRelay) storedEnd(s *Subscription, page string) {
	next, cut, awaited := s.storedEnd(r.idx, page)
	if cut {
		r.cuts.Add(1)
		r.log.Warn("relay pool: catch-up of stored events stopped at the bound of pages; the relay's resume point stays until a later REQ catches up",
			"sub", s.wireID, "pages", r.p.cfg.MaxCatchUpPages)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conn == nil {
		return
	}
	if awaited {
		r.stopTimer(r.awaiting, &r.eoseTimers, s.serial)
	}
	if page != "" { // awaited or not, its stored events are all sent
		if err := r.conn.CloseReq(page); err != nil {
			r.log.Debug("relay pool: CLOSE failed", "sub", page, "err", err)
		}
	}
	// s.end marks s ended before its dropSub waits for r.mu: a page asked
	// for here is closed by it.
	if next.id == "" || !r.paging(s) || s.ended() {
		return
	}
	r.pages.Add(1)
	if next.skipped {
		r.say(slog.LevelWarn, "relay pool: the relay holds more events in one second than it returns for a REQ; paging on from the second before, the rest of that second may be missed",
			"sub", s.wireID, "second", *next.f.Until+1)
	}
	if err := r.conn.Req(next.id, next.f); err != nil {
		r.log.Warn("relay pool: REQ failed", "sub", next.id, "err", err)
		return
	}
	r.log.Debug("relay pool: REQ", "sub", next.id, "filter", next.f)
	r.awaitEOSE(s, next.id)
}

// paging reports whether s's catch-up pages are asked of the relay on
// the current connection: while its REQ is open, and while the REQ,
// closed by the relay (some close each subscription after its EOSE),
// waits to be asked again. Its catch-up goes on meanwhile: begun again
// with each new REQ, it would never read past one page on such a relay.
// r.mu is held.
func (r *poolRelay) paging(s *Subscription) bool {
	return r.active[s.serial] || r.retrying[s.serial] != nil
}

// retryAfter calls f, with r.mu held, after d, unless stopRetry or
// stopRetries stop it first: m (r.retrying or r.repaging) holds its
// timer under s's serial meanwhile, replacing (and stopping) any other
// there. f runs only if the timer is still m's when it fires, so once
// stopped, under r.mu, it does nothing even if it fired already: nothing
// is asked of a connection, or for a subscription, that ended. r.mu is
// held.
func (r *poolRelay) retryAfter(m map[uint64]*time.Timer, serial uint64, d time.Duration, f func()) {
	r.after(m, &r.retryTimers, serial, d, f)
}

// after is retryAfter with n counting the timers of m whose function may
// still run. r.mu is held.
func (r *poolRelay) after(m map[uint64]*time.Timer, n *atomic.Int64, serial uint64, d time.Duration, f func()) {
	r.stopTimer(m, n, serial)
	var t *time.Timer
	n.Add(1)
	t = time.AfterFunc(d, func() {
		defer n.Add(-1)
		r.mu.Lock()
		defer r.mu.Unlock()
		if m[serial] != t { // t is set: it was under r.mu before this ran
			return
		}
		delete(m, serial)
		f()
	})
	m[serial] = t
}

// stopRetry stops the timer m holds for serial, if any (see retryAfter).
// r.mu is held.
func (r *poolRelay) stopRetry(m map[uint64]*time.Timer, serial uint64) {
	r.stopTimer(m, &r.retryTimers, serial)
}

// stopRetries stops every timer of m (see retryAfter). r.mu is held.
func (r *poolRelay) stopRetries(m map[uint64]*time.Timer) {
	r.stopTimers(m, &r.retryTimers)
}

// stopTimer is stopRetry for a timer counted in n (see after). r.mu is
// held.
func (r *poolRelay) stopTimer(m map[uint64]*time.Timer, n *atomic.Int64, serial uint64) {
	t := m[serial]
	if t == nil {
		return
	}
	delete(m, serial)
	if t.Stop() {
		n.Add(-1) // else it fired, and finds itself gone
	}
}

// stopTimers stops every timer of m, counted in n (see after). r.mu is
// held.
func (r *poolRelay) stopTimers(m map[uint64]*time.Timer, n *atomic.Int64) {
	for serial := range m {
		r.stopTimer(m, n, serial)
	}
}

// repage asks the relay again for the page of s's catch-up it refused,
// unless the subscription or the catch-up moved on meanwhile. r.mu is
// held.
func (r *poolRelay) repage(s *Subscription, refused string) {
	if r.conn == nil || !r.paging(s) || s.ended() {
		return
	}
	next := s.retryPage(r.idx, refused)
	if next.id == "" {
		return
	}
	r.pages.Add(1)
	if err := r.conn.Req(next.id, next.f); err != nil {
		r.log.Warn("relay pool: REQ failed", "sub", next.id, "err", err)
		return
	}
	r.log.Debug("relay pool: REQ", "sub", next.id, "filter", next.f)
	r.awaitEOSE(s, next.id)
}

// handle acts on one message of the relay. inProcess: m was handed over
// by an InProcessConn (see InProcessConn), whose Verified events are not
// checked again.
func (r *poolRelay) handle(m ConnMessage, inProcess bool) {
	switch m.Label {
	case "EVENT":
		r.received.Add(1)
		if s, page := r.p.lookupWire(m.SubID); s != nil && m.Event != nil {
			r.accept(s, m.Event, inProcess && m.Verified, page)
		}
	case "EOSE":
		if s, page := r.p.lookupWire(m.SubID); s != nil {
			r.storedEnd(s, page)
		}
	case "CLOSED":
		s, page := r.p.lookupWire(m.SubID)
		if s == nil {
			r.say(slog.LevelWarn, "relay pool: relay closed a subscription", "sub", m.SubID, "reason", m.Reason)
			return
		}
		if page != "" {
			// A catch-up page refused: asked again after a backoff, as a
			// REQ is, unless for good or past the bound of pages; then
			// the relay's point stays (see catchUp). Its REQ's own
			// subscription is still open.
			awaited, again := s.pageRefused(r.idx, page, permanent(m.Reason))
			switch {
			case !awaited:
			case again > 0:
				wait := min(r.p.cfg.BackoffBase<<min(again-1, 16), r.p.cfg.BackoffMax)
				r.say(slog.LevelWarn, "relay pool: relay refused a page of stored events; asking again",
					"sub", m.SubID, "reason", m.Reason, "in", wait)
				// As in storedEnd: s.end marks s ended before its
				// dropSub, which stops the timer, waits for r.mu.
				r.mu.Lock()
				r.stopTimer(r.awaiting, &r.eoseTimers, s.serial) // until it is asked again
				if r.conn != nil && !s.ended() {
					r.retryAfter(r.repaging, s.serial, wait, func() { r.repage(s, page) })
				}
				r.mu.Unlock()
			default:
				r.mu.Lock()
				r.stopTimer(r.awaiting, &r.eoseTimers, s.serial)
				r.mu.Unlock()
				r.cuts.Add(1)
				r.say(slog.LevelWarn, "relay pool: relay refused a page of stored events; its resume point stays until a later REQ catches up",
					"sub", m.SubID, "reason", m.Reason)
			}
			return
		}
		// A relay that refuses or ends a subscription for a while (its
		// cap on subscriptions, a rate limit) is asked again after a
		// backoff that grows with each refusal on this connection: given
		// up, the subscription would get nothing from this relay until
		// it reconnects, which may be never, and a request whose answer
		// it waits for would time out. A refusal that asking again
		// cannot change (NIP-01's auth-required, blocked, restricted,
		// invalid) gives the subscription up on this connection.
		r.mu.Lock()
		delete(r.active, s.serial)
		if s.awaitsREQ(r.idx) {
			// Its EOSE will not come: a REQ asked again awaits its own.
			// (A page's goes on: see paging.)
			r.stopTimer(r.awaiting, &r.eoseTimers, s.serial)
		}
		conn := r.conn
		if conn == nil || s.ended() || permanent(m.Reason) {
			// Ended meanwhile, or for good: the next connection asks
			// again.
			r.mu.Unlock()
			s.relayDone(r.idx)
			r.say(slog.LevelWarn, "relay pool: relay closed a subscription", "sub", m.SubID, "reason", m.Reason)
			return
		}
		r.refused[s.serial]++
		wait := min(r.p.cfg.BackoffBase<<min(r.refused[s.serial]-1, 16), r.p.cfg.BackoffMax)
		scheduled := r.retrying[s.serial] != nil
		if !scheduled {
			r.retryAfter(r.retrying, s.serial, wait, func() { r.ensureSubLocked(s) })
		}
		r.mu.Unlock()
		s.relayDone(r.idx)
		if scheduled {
			return // asked again when the first CLOSED's backoff ends
		}
		r.say(slog.LevelWarn, "relay pool: relay closed a subscription; asking again", "sub", m.SubID, "reason", m.Reason, "in", wait)
	case "NOTICE":
		r.say(slog.LevelInfo, "relay pool: notice", "notice", m.Reason)
	}
}

// accept checks ev (against s's filter, then its id and signature unless
// verified says the relay in this process checked them) and delivers it
// to s if it is new there. page is the wire id of the catch-up page that
// brought it, "" for s's own.
func (r *poolRelay) accept(s *Subscription, ev *nostr.Event, verified bool, page string) {
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
		r.duplicate.Add(1)
		s.alsoFrom(r.idx, id)
		// This relay has it too: its own resume point moves on. Its
		// created_at is not checked here, but a forged one moves only
		// this relay's own point, and a relay may withhold events
		// anyway. The first copy was handed over, or is being (see
		// Subscription.deliver).
		s.noteSeen(r.idx, ev.CreatedAt, page)
		return
	}
	// The filter before the id's hash and the signature: a relay that
	// ignores the filter, or floods the node with other kinds and other
	// p tags, costs a comparison an event, not a signature check.
	if !s.filter.Matches(ev) || s.pastEnd(r.idx, ev) {
		r.mismatch.Add(1)
		r.log.Debug("relay pool: dropped an event outside the filter", "sub", s.wireID, "event", ev.ID)
		return
	}
	if s.overLimit(r.idx) {
		r.mismatch.Add(1)
		r.log.Debug("relay pool: dropped an event past the query's limit", "sub", s.wireID, "event", ev.ID)
		return
	}
	if s.gate.Pass != nil && !s.gate.Pass(id) {
		// Another process's share: neither verified nor marked seen here,
		// but a catch-up counts it.
		s.noteAside(r.idx, ev.CreatedAt, page)
		s.setAside(ev)
		return
	}
	// A verified event was checked by the relay in this process: hashing
	// it again would find the same id, and its signature is cached.
	if !verified {
		if err := r.p.cfg.Verifier.Verify(ev); err != nil {
			r.invalid.Add(1)
			r.log.Debug("relay pool: dropped an invalid event", "sub", s.wireID, "err", err)
			return
		}
	}
	if s.deliver(r.idx, id, ev, page) { // another relay's copy came meanwhile
		r.duplicate.Add(1)
	}
}

// say logs a line about what the relay said (a NOTICE, a CLOSED), unless
// the relay said too much this minute (see logcap).
func (r *poolRelay) say(level slog.Level, msg string, args ...any) {
	r.logLimited(&r.talk, level, msg, args...)
}

// logLimited logs a line through l, which bounds the lines a minute.
func (r *poolRelay) logLimited(l *logcap.Limiter, level slog.Level, msg string, args ...any) {
	l.Log(context.Background(), r.log, r.p.cfg.Now(), level, msg, args...)
}

// permanent reports whether a relay's CLOSED reason is one that asking
// again cannot change: NIP-01's machine-readable prefixes for a client
// the relay will not serve (auth-required: the pool does not do NIP-42;
// blocked, restricted) or a filter it refuses (invalid).
func permanent(reason string) bool {
	for _, p := range []string{"auth-required:", "blocked:", "restricted:", "invalid:"} {
		if strings.HasPrefix(reason, p) {
			return true
		}
	}
	return false
}
