package relay

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nbd-wtf/go-nostr"
)

// Subscription is a live subscription across all relays of a Pool.
type Subscription struct {
	p      *Pool
	serial uint64
	wireID string                // the NIP-01 subscription id
	filter nostr.Filter          // as given: every event is checked against it
	local  map[[32]byte]struct{} // a Query's own dedupe set (guarded by mu)
	// ends holds, by relay index, the Until of a query's REQ to that relay
	// (QueryOptions.Until): nil, the filter's. A relay's events past its
	// own are dropped.
	ends []*nostr.Timestamp
	// from holds, by event id, the indexes of the relays that brought it,
	// for QuerySources (guarded by mu; nil for the other subscriptions).
	from map[[32]byte][]int
	// queried holds, by relay index, the events of a Query with a limit
	// that relay brought within the filter (guarded by mu): past the
	// limit the rest are dropped (see overLimit).
	queried []int

	events chan *nostr.Event
	take   func(*nostr.Event) // SubscribeFunc's: takes the events instead of events
	// takeStored, SubscribeOptions.Stored, takes in take's place the
	// events brought before their relay's stored events are all read.
	takeStored func(*nostr.Event)
	gate       Gate       // SubscribeGated's
	sendMu     sync.Mutex // held while sending on events (or calling take); events is closed under it
	// sizes holds the sizes (EventSize) of the events sent on events
	// that the reader may not have taken yet, oldest first, and held
	// their sum: the reader takes the oldest, so those it took are the
	// first len(sizes) - len(events) (see buffered). Guarded by sendMu.
	sizes    []int64
	held     int64
	waits    atomic.Uint64 // times delivery waited for room
	eose     chan struct{}
	eoseOnce sync.Once
	done     chan struct{}
	doneOnce sync.Once
	err      error // set before done is closed

	mu      sync.Mutex
	stopCtx func() bool  // stops the context.AfterFunc that ends s
	pending map[int]bool // relays whose EOSE is awaited
	awaited int          // relays awaited at first
	served  map[int]bool // relays that sent EOSE: later REQs resume from their lastSeen
	// lastSeen holds, by relay index, the newest created_at (at most
	// now) of the events that relay brought, 0 if none yet: each relay
	// resumes from its own, since a relay that was away may hold events
	// older than what the others delivered meanwhile. One entry a relay.
	lastSeen []nostr.Timestamp
	// droppedAt is the oldest created_at (at most now) of the events
	// marked delivered and then dropped (see dropped), 0 if none:
	// Resume keeps every point before it.
	droppedAt nostr.Timestamp
	// stored holds, by relay index, the newest created_at (at most now)
	// that relay brought since its current REQ, and live whether its
	// stored events are all read: that REQ's EOSE came, and the catch-up
	// after it ended (see catchUp). Stored events come newest first, so
	// lastSeen takes stored in only then: a connection that drops part
	// way through them is asked again for the older ones.
	stored []nostr.Timestamp
	live   []bool
	// catchUp holds, by relay index, the paging of that relay's stored
	// events for its current REQ; pageSerial numbers the pages' wire ids.
	catchUp    []catchUp
	pageSerial uint64
	// start holds, by relay index, the Since of that relay's first REQ:
	// the filter's, or the one SubscribeWith was given for its URL.
	start []*nostr.Timestamp
	// floor is the oldest resume point: the least lastSeen set, minus
	// the skew (0 while none is set).
	floor nostr.Timestamp
	// tail holds the ids delivered with created_at ≥ floor, which a
	// relay resends after a reconnect. It outlives DedupeTTL, so an
	// outage longer than the TTL does not redeliver them; it holds at
	// most DedupeSize ids, the newest (when full, the oldest quarter is
	// let go: past them, only the dedupe set, bounded in age, keeps a
	// relay's resent events from being delivered again).
	//
	// It is keyed by a 64-bit hash of each id under the pool's random
	// seed (Pool.tailKey), about 24 bytes an id at 100,000 instead of 63
	// with the 32-byte ids (2.4 MB instead of 6.3 at DedupeSize's
	// default). A new event whose hash is one the tail holds is dropped
	// as seen: with n ids held, a chance of n in 2⁶⁴ an event, and of
	// about n²/2⁶⁵ that any of the n events delivered while the tail
	// fills up is (3 in 10¹⁰ at 100,000), which no relay or author can
	// raise without knowing the seed.
	tail      map[uint64]nostr.Timestamp
	eoseTimer *time.Timer
}

// Events delivers the matching events, each once. The channel is closed
// when the subscription ends; Err then says why. A subscription made with
// SubscribeFunc delivers nothing here: its channel is only closed.
func (s *Subscription) Events() <-chan *nostr.Event { return s.events }

// EOSE is closed once every relay that was not backing off has sent EOSE
// and, when its stored events are paged (see Subscribe), the EOSE of its
// last page (relays that fall into backoff are no longer waited for), or
// after EOSETimeout, or when the subscription ends.
func (s *Subscription) EOSE() <-chan struct{} { return s.eose }

// Filter returns the filter the subscription was opened with (by
// SubscribeWith: with its Since the earliest of the relays').
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

// ended reports whether the subscription has ended.
func (s *Subscription) ended() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
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

// relayDone stops waiting for relay idx's stored events: it served
// them (see storedEnd), or is away, or refused the subscription.
func (s *Subscription) relayDone(idx int) {
	s.mu.Lock()
	wasPending := s.pending[idx]
	delete(s.pending, idx)
	empty := wasPending && len(s.pending) == 0
	s.mu.Unlock()
	if empty {
		s.closeEOSE()
	}
}

// Resume returns, by relay URL, the resume point of each relay that
// brought an event: the newest created_at (at most now) of the events it
// brought, every event it holds up to then received, what it brought
// after a REQ counting once all its stored events were read (that REQ's
// EOSE came, and the catch-up after it: see Subscribe). It is where the
// subscription resumes on that relay after a reconnect (less
// ResubscribeSkew), and what a subscriber keeps to begin a later
// subscription from (SubscribeOptions.Since). Only events handed over
// move it (taken, or sent on Events): one dropped as the subscription
// ended, or under the slow-consumer policy, does not, and no point
// passes an event dropped from Events once it was marked delivered.
// Events a Gate passed over do not move it either.
func (s *Subscription) Resume() map[string]nostr.Timestamp {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]nostr.Timestamp{}
	for idx, at := range s.lastSeen {
		if s.droppedAt > 0 {
			at = min(at, s.droppedAt-1)
		}
		if at > 0 {
			out[s.p.relays[idx].url] = at
		}
	}
	return out
}

// Starts returns, by relay URL, the Since each relay was first asked
// from: the one SubscribeOptions.Since gave for it, else the filter's
// (relays with neither are left out). A subscriber that keeps the points
// of Resume keeps these for the relays that brought nothing yet: such a
// relay resumes from its start.
func (s *Subscription) Starts() map[string]nostr.Timestamp {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]nostr.Timestamp{}
	for idx, at := range s.start {
		if at != nil {
			out[s.p.relays[idx].url] = *at
		}
	}
	return out
}

// reqFilter is the filter to send to relay idx: the original one, with
// that relay's own Since if SubscribeWith gave one, the first time, and
// after a reconnect that filter with since moved to the last created_at
// that relay brought minus the skew (and no limit: the whole gap is
// wanted). A relay that brought nothing yet is sent its first filter
// again.
//
// It is called as the REQ is sent: what the relay brings from then until
// its stored events are all read (see catchUp) moves its point only
// then. It also returns the wire id of a catch-up page of an earlier REQ
// still open, to be closed, "" if none.
func (s *Subscription) reqFilter(idx int) (nostr.Filter, string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	served, last := s.served[idx], s.lastSeen[idx]
	s.live[idx], s.stored[idx] = false, 0
	f := s.filter.Clone()
	f.Since = s.start[idx]
	if s.ends != nil {
		f.Until = s.ends[idx]
	}
	if served && last > 0 {
		since := max(last-s.p.skew(), 0)
		if f.Since == nil || since > *f.Since {
			f.Since = &since
		}
		f.Limit, f.LimitZero = 0, false
	}
	return f, s.startCatchUp(idx, f)
}

// noteSeen moves the resume point of relay idx, which brought an event
// created at at on page ("" for the subscription's own REQ; see
// catchUp), or, before the stored events of its current REQ are all
// read, the point it moves to then. A created_at in the future counts as
// now, so a forged far-future event cannot make resubscriptions skip what
// comes before it.
func (s *Subscription) noteSeen(idx int, at nostr.Timestamp, page string) {
	at = min(at, nostr.Timestamp(s.p.cfg.Now().Unix()))
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.live[idx] {
		s.stored[idx] = max(s.stored[idx], at)
		s.noteCatchUp(idx, at, page)
		return
	}
	s.moveTo(idx, at)
}

// storedNow reports whether relay idx's stored events (catch-up pages
// included) are still being read: an event it brings now is one of them,
// or came meanwhile. Once its catch-up is cut they will not all be read
// on this REQ (MaxCatchUpPages, a page refused for good, an EOSE that
// did not come within EOSETimeout): what comes after is live, though the
// point stays. It
// chooses only whom deliver hands the event to (Stored or Take), not
// where the relay's point moves, which noteSeen reads again: idx's reader
// ends the stored events (storedEnd), but a REQ asked again after a
// CLOSED begins them again from a timer (reqFilter), and an in-process
// relay delivers from its own goroutines.
func (s *Subscription) storedNow(idx int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.live[idx] && s.catchUp[idx].state != catchUpCut
}

// noteAside counts an event a Gate passed over, created at at and
// brought by relay idx on page, toward that relay's catch-up; it does not
// move the relay's point.
func (s *Subscription) noteAside(idx int, at nostr.Timestamp, page string) {
	at = min(at, nostr.Timestamp(s.p.cfg.Now().Unix()))
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.live[idx] {
		s.noteCatchUp(idx, at, page)
	}
}

// moveTo moves relay idx's resume point to at, if later, and the floor of
// the tail with it. s.mu is held.
func (s *Subscription) moveTo(idx int, at nostr.Timestamp) {
	if at <= s.lastSeen[idx] {
		return
	}
	s.lastSeen[idx] = at
	var least nostr.Timestamp
	for _, t := range s.lastSeen {
		if t > 0 && (least == 0 || t < least) {
			least = t
		}
	}
	// A relay's first event may lower the floor: from then on the tail
	// keeps what that relay may resend.
	floor := max(least-s.p.skew(), 0)
	raised := floor > s.floor
	s.floor = floor
	if !raised {
		return
	}
	for id, t := range s.tail {
		if t < floor {
			delete(s.tail, id)
		}
	}
}

// firstSight records the id of an event created at at, brought by relay
// idx, for this subscription and reports whether it is new.
//
// The tail keeps it if it is at or past the floor, or if relay idx has no
// point yet: its point, moved once the event is handed over, may lower the
// floor to the event's created_at less the skew, and the relay resends
// the event from there after a reconnect.
func (s *Subscription) firstSight(idx int, id [32]byte, at nostr.Timestamp) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.local != nil {
		s.noteFrom(idx, id)
		if _, ok := s.local[id]; ok {
			return false
		}
		s.local[id] = struct{}{}
		return true
	}
	if !s.p.dedupe.add(dedupeKey{sub: s.serial, id: id}) {
		return false
	}
	k := s.p.tailKey(id)
	if _, ok := s.tail[k]; ok {
		return false
	}
	if (at >= s.floor || s.lastSeen[idx] == 0) && (len(s.tail) < s.p.cfg.DedupeSize || at >= s.trimTail()) {
		s.tail[k] = at
	}
	return true
}

// trimTail lets the oldest quarter of the full tail go (at least one id)
// and returns the oldest created_at it keeps: a relay gone for good holds
// the floor back, and the ids a relay back from an outage resends are the
// newest. s.mu is held.
func (s *Subscription) trimTail() nostr.Timestamp {
	ats := make([]nostr.Timestamp, 0, len(s.tail))
	for _, t := range s.tail {
		ats = append(ats, t)
	}
	slices.Sort(ats)
	drop := max(len(ats)/4, 1)
	cut := ats[drop-1] // the newest let go
	for id, t := range s.tail {
		if drop == 0 {
			break
		}
		if t <= cut {
			delete(s.tail, id)
			drop--
		}
	}
	return cut
}

// alsoFrom records, for QuerySources, that relay idx brought the event
// id, which another relay brought first.
func (s *Subscription) alsoFrom(idx int, id [32]byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.noteFrom(idx, id)
}

// noteFrom records that relay idx brought the event id, if s keeps that
// (QuerySources). s.mu is held.
func (s *Subscription) noteFrom(idx int, id [32]byte) {
	if s.from == nil {
		return
	}
	if !slices.Contains(s.from[id], idx) {
		s.from[id] = append(s.from[id], idx)
	}
}

func (s *Subscription) seenBefore(id [32]byte) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.local != nil {
		_, ok := s.local[id]
		return ok
	}
	if _, ok := s.tail[s.p.tailKey(id)]; ok {
		return true
	}
	return s.p.dedupe.contains(dedupeKey{sub: s.serial, id: id})
}

// deliver hands ev, of id and brought by relay idx on page ("" for s's
// own REQ), to the reader, applying the slow-consumer policy, or to
// SubscribeFunc's function (SubscribeOptions.Stored's while idx's stored
// events are read: see storedNow), unless it was delivered before; it reports
// whether it was (another relay's copy came meanwhile).
//
// The relay's point moves (noteSeen) only once the event is handed over:
// taken, or sent on the channel. One dropped, because the subscription
// ended first or under the slow-consumer policy, leaves it where it was:
// a subscriber that keeps the points (Resume) asks the relay for it
// again. The event is marked delivered (firstSight) under sendMu, from
// the check that the subscription is open until the hand-over: another
// relay's copy that finds it marked finds it handed over, or on its way
// (its take runs before Close returns), unless it is dropped from the
// channel then, and Resume keeps every point behind such a drop (see
// dropped).
func (s *Subscription) deliver(idx int, id [32]byte, ev *nostr.Event, page string) (duplicate bool) {
	s.sendMu.Lock()
	select {
	case <-s.done:
		s.sendMu.Unlock()
		return false
	default:
	}
	if !s.firstSight(idx, id, ev.CreatedAt) {
		// This relay has it too: its own point moves on.
		s.noteSeen(idx, ev.CreatedAt, page)
		s.sendMu.Unlock()
		return true
	}
	if s.take != nil {
		if s.takeStored != nil && s.storedNow(idx) {
			s.takeStored(ev)
		} else {
			s.take(ev)
		}
		s.noteSeen(idx, ev.CreatedAt, page)
		s.sendMu.Unlock()
		return false
	}
	size := EventSize(ev)
	if s.fits(size) {
		select {
		case s.events <- ev:
			s.sent(size)
			s.noteSeen(idx, ev.CreatedAt, page)
			s.sendMu.Unlock()
			return false
		default:
		}
	}
	s.waits.Add(1)
	res := s.await(ev, size)
	if res == awaitSent {
		s.noteSeen(idx, ev.CreatedAt, page)
	} else {
		s.dropped(ev.CreatedAt)
	}
	s.sendMu.Unlock()
	if res == awaitTimedOut {
		s.end(fmt.Errorf("relay: subscription %s: buffer of %d events or %d bytes full for %s: %w",
			s.wireID, cap(s.events), s.p.cfg.SubscriptionBufferBytes, s.p.cfg.SlowConsumerTimeout, ErrSlowConsumer))
	}
	return false
}

// dropped keeps every relay's point, as Resume returns it, behind an
// event created at at that was marked delivered and then dropped: another
// relay's copy of it, a duplicate then, may have moved that relay's point
// past it meanwhile.
func (s *Subscription) dropped(at nostr.Timestamp) {
	at = max(min(at, nostr.Timestamp(s.p.cfg.Now().Unix())), 1) // 0 is none
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.droppedAt == 0 || at < s.droppedAt {
		s.droppedAt = at
	}
}

// bufferPoll is how often a delivery waiting for the reader to take
// bytes out of its buffer looks again: a channel tells its sender when
// it has room for one more event, not when the events in it got fewer
// bytes.
const bufferPoll = 5 * time.Millisecond

// awaitResult is what await did with an event.
type awaitResult int

const (
	awaitSent     awaitResult = iota // sent on the channel
	awaitTimedOut                    // no room within SlowConsumerTimeout
	awaitEnded                       // the subscription ended meanwhile
)

// await waits at most SlowConsumerTimeout for room for ev, of size
// bytes, and sends it. s.sendMu is held.
func (s *Subscription) await(ev *nostr.Event, size int64) awaitResult {
	t := time.NewTimer(s.p.cfg.SlowConsumerTimeout)
	defer t.Stop()
	var poll *time.Ticker
	for {
		if s.fits(size) {
			// Only the count can be short now: the reader's taking
			// leaves fewer bytes, never more.
			select {
			case s.events <- ev:
				s.sent(size)
				return awaitSent
			case <-t.C:
				return awaitTimedOut
			case <-s.done:
				return awaitEnded
			}
		}
		if poll == nil {
			poll = time.NewTicker(bufferPoll)
			defer poll.Stop()
		}
		select {
		case <-poll.C:
		case <-t.C:
			return awaitTimedOut
		case <-s.done:
			return awaitEnded
		}
	}
}

// fits reports whether an event of size bytes may join the buffer's: it
// is empty, or they stay within SubscriptionBufferBytes. s.sendMu is
// held.
func (s *Subscription) fits(size int64) bool {
	return s.buffered() == 0 || s.held+size <= s.p.cfg.SubscriptionBufferBytes
}

// buffered returns the bytes of the events sent and not yet taken by the
// reader, forgetting those it took. s.sendMu is held.
func (s *Subscription) buffered() int64 {
	taken := len(s.sizes) - len(s.events)
	if taken <= 0 {
		return s.held
	}
	for _, n := range s.sizes[:taken] {
		s.held -= n
	}
	s.sizes = s.sizes[:copy(s.sizes, s.sizes[taken:])]
	return s.held
}

// sent records an event of size bytes sent on the channel. s.sendMu is
// held.
func (s *Subscription) sent(size int64) {
	s.sizes = append(s.sizes, size)
	s.held += size
}

// setAside hands ev to the gate's Aside, unless the subscription ended.
func (s *Subscription) setAside(ev *nostr.Event) {
	s.sendMu.Lock()
	defer s.sendMu.Unlock()
	select {
	case <-s.done:
	default:
		s.gate.Aside(ev)
	}
}

// Subscribe delivers every event matching f from any relay: each event id
// once (across relays and reconnects), each event's id and signature
// verified (unverifiable events are dropped and counted in Health), and
// each re-checked against f, since some relays ignore multi-letter tag
// filters on live subscriptions. After a reconnect, a relay that had sent
// EOSE is asked again with since = max(f.Since, the last created_at that
// relay brought − ResubscribeSkew; what it brought before an EOSE counts
// once that EOSE came), or with f if it brought none: each
// relay from its own point, so that events published to it alone while it
// was away are not skipped for newer ones the others delivered.
//
// Relays cap the stored events a REQ returns (the newest first), so when
// a REQ with a since and no limit (every resumption's) brought stored
// events, the relay is asked for those before the oldest it brought, page
// after page (until = that created_at, inclusive, under a subscription id
// of its own), until a page brings nothing older, at most
// MaxCatchUpPages: a gap longer than the relay's cap is read in full, and
// the relay's point moves only then (see Resume). A relay that returns
// every stored event is asked one page more, which brings again only the
// events of the oldest second. A second holding more events than the relay
// returns (a page brings only that second's, as many as its fullest
// answer) cannot be read past its cap: the pages go on from the second
// before, so the older events are still read, and a warning is logged.
// Live events are delivered as they come meanwhile. A page the relay
// refuses for a while (CLOSED, but not auth-required, blocked, restricted
// or invalid) is asked again after a backoff, as a REQ is, each time
// counting as a page. A catch-up cut at the bound, whose page the relay
// refuses for good, or whose relay does not send the EOSE of its REQ or
// of a page within EOSETimeout of asking (a relay that never does would
// otherwise never end its stored events), is logged and counted
// (RelayStatus.CatchUpsCut), and that relay's point stays where it was
// until a later REQ catches up: what it brings after the cut is
// delivered as live, but moves the point no more than its stored events
// do, since stored events older than it may not have come. A first
// REQ with a limit, or without a since, is not paged: the subscriber
// asked for the newest events.
//
// The subscription ends when ctx ends, on Close, when the pool closes, or
// under the slow-consumer policy (see Pool).
func (p *Pool) Subscribe(ctx context.Context, f nostr.Filter) (*Subscription, error) {
	return p.subscribe(ctx, f, notQuery, nil, nil, Gate{}, nil, nil)
}

// SubscribeFunc is Subscribe with each event handed to take instead of
// the Events channel, in the goroutine that brought it: a relay
// connection's reader, or, for an in-process relay, the goroutine that
// published the event. That saves a goroutine hand-off per event. take is
// called for one event at a time, never after the subscription has ended
// (Close has returned, or Events is closed), and must not block: it
// holds up the relay connection that brought the event. Events is only
// closed, when the subscription ends.
func (p *Pool) SubscribeFunc(ctx context.Context, f nostr.Filter, take func(*nostr.Event)) (*Subscription, error) {
	if take == nil {
		return nil, errors.New("relay: SubscribeFunc: take is nil")
	}
	return p.subscribe(ctx, f, notQuery, nil, take, Gate{}, nil, nil)
}

// Gate lets a subscriber pass over events before their signatures are
// checked (SubscribeGated): processes that share the events of one
// subscription out among themselves each check only their own share.
type Gate struct {
	// Pass reports whether the event with this id is checked and taken
	// now. It runs for every event matching the filter not delivered
	// before, before its signature is checked, in the goroutine that
	// brought it; it must be cheap and must not block.
	Pass func(id [32]byte) bool
	// Aside gets each event matching the filter that Pass turned away,
	// with neither its id nor its signature checked: the subscriber must
	// verify it (Verifier.Verify) before acting on it. Such an event is
	// not marked delivered (a copy from another relay is offered again)
	// and does not move its relay's resume point. Aside is called as take
	// is: one event at a time, never after the subscription has ended,
	// and it must not block.
	Aside func(*nostr.Event)
}

// SubscribeGated is SubscribeFunc with g deciding, before each event is
// verified, whether take gets it or g.Aside does (see Gate).
func (p *Pool) SubscribeGated(ctx context.Context, f nostr.Filter, take func(*nostr.Event), g Gate) (*Subscription, error) {
	if take == nil || g.Pass == nil || g.Aside == nil {
		return nil, errors.New("relay: SubscribeGated: take, Pass and Aside must all be set")
	}
	return p.subscribe(ctx, f, notQuery, nil, take, g, nil, nil)
}

// SubscribeOptions are the choices of SubscribeWith.
type SubscribeOptions struct {
	// Take, when set, gets the events instead of the Events channel, as
	// SubscribeFunc's take does.
	Take func(*nostr.Event)
	// Stored, when set with Take, gets in Take's place the events a relay
	// brings before its stored events are all read: its REQ's EOSE and
	// the catch-up after it (see Subscribe), live events of the meantime
	// included. A catch-up cut short (MaxCatchUpPages, a page refused
	// for good, no EOSE within EOSETimeout) ends that: what the relay
	// brings after goes to Take. It is called as Take is, and must not
	// block either: a
	// subscriber that may make stored events wait (they are not live
	// traffic) holds them itself, bounded. A relay's resume point
	// (Resume) moves past them once its stored events are all read,
	// whatever the subscriber did with them.
	Stored func(*nostr.Event)
	// Gate, when its Pass is set, decides which events Take gets, as
	// SubscribeGated's does; Take and Aside must be set too.
	Gate Gate
	// Since holds, by relay URL, where the subscription begins on that
	// relay in place of the filter's Since: a subscriber that kept each
	// relay's point (Subscription.Resume) from an earlier subscription,
	// before a restart say, begins each relay from its own, so that what
	// a relay that was away holds is not skipped for the newer events
	// the others brought. Relays not in it begin from the filter's Since.
	// A URL matches a relay's whatever the case of its scheme and host,
	// a trailing slash or the scheme's default port; of several that
	// match one relay, the latest point counts. Every event is checked
	// against the filter with its Since the earliest of these.
	Since map[string]nostr.Timestamp
}

// SubscribeWith is Subscribe, SubscribeFunc or SubscribeGated (as o's
// Take and Gate say) with each relay beginning from its own Since
// (o.Since).
func (p *Pool) SubscribeWith(ctx context.Context, f nostr.Filter, o SubscribeOptions) (*Subscription, error) {
	if o.Gate.Pass != nil && (o.Take == nil || o.Gate.Aside == nil) {
		return nil, errors.New("relay: SubscribeWith: a Gate needs Take and Aside")
	}
	if o.Stored != nil && o.Take == nil {
		return nil, errors.New("relay: SubscribeWith: Stored needs Take")
	}
	return p.subscribe(ctx, f, notQuery, nil, o.Take, o.Gate, o.Since, o.Stored)
}

func (p *Pool) subscribe(ctx context.Context, f nostr.Filter, query queryKind, until map[string]nostr.Timestamp, take func(*nostr.Event), gate Gate, since map[string]nostr.Timestamp, takeStored func(*nostr.Event)) (*Subscription, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("relay: subscribe: %w", err)
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, fmt.Errorf("relay: subscribe: %w", ErrPoolClosed)
	}
	p.serial++
	buffer := p.cfg.SubscriptionBuffer
	if take != nil {
		buffer = 0 // take gets the events; the channel is only closed
	}
	s := &Subscription{
		p:          p,
		serial:     p.serial,
		wireID:     "snap-" + strconv.FormatUint(p.serial, 36),
		filter:     f.Clone(),
		events:     make(chan *nostr.Event, buffer),
		take:       take,
		takeStored: takeStored,
		gate:       gate,
		eose:       make(chan struct{}),
		done:       make(chan struct{}),
		pending:    map[int]bool{},
		served:     map[int]bool{},
		lastSeen:   make([]nostr.Timestamp, len(p.relays)),
		stored:     make([]nostr.Timestamp, len(p.relays)),
		live:       make([]bool, len(p.relays)),
		catchUp:    make([]catchUp, len(p.relays)),
		start:      make([]*nostr.Timestamp, len(p.relays)),
		tail:       map[uint64]nostr.Timestamp{},
	}
	// Each relay's point under any spelling of its URL; the latest of
	// those given for one relay.
	byKey := make(map[string]nostr.Timestamp, len(since))
	for u, at := range since {
		k := urlKey(u)
		if old, ok := byKey[k]; !ok || at > old {
			byKey[k] = at
		}
	}
	for _, r := range p.relays {
		s.start[r.idx] = f.Since
		if at, ok := byKey[urlKey(r.url)]; ok {
			s.start[r.idx] = &at
			if s.filter.Since != nil && at < *s.filter.Since {
				s.filter.Since = &at
			}
		}
	}
	if len(until) > 0 {
		s.setEnds(f, until)
	}
	if query != notQuery {
		s.local = map[[32]byte]struct{}{}
		if query == querySources {
			s.from = map[[32]byte][]int{}
		}
		if f.Limit > 0 {
			s.queried = make([]int, len(p.relays))
		}
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

// overLimit reports whether relay idx brought a Query's limit of events
// already, and counts the one it brings now if not. A relay that ignores
// the limit would otherwise fill the query's bound (QueryMaxEvents) with
// events anyone can make, failing it for every relay however small the
// limit, and have each of them verified.
func (s *Subscription) overLimit(idx int) bool {
	if s.queried == nil {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.queried[idx] >= s.filter.Limit {
		return true
	}
	s.queried[idx]++
	return false
}

// Query returns the stored events matching f from all relays, deduped,
// verified and checked against f, once every relay not in backoff has sent
// EOSE (or EOSETimeout passed). If ctx ends first, it returns what it has
// with ctx's error. It fails with ErrNoRelays when every relay is backing
// off, and returns what it has with ErrQueryTruncated when more than
// QueryMaxEvents events match, or events of more than QueryMaxBytes (as
// held in memory, EventSize): a relay answering with a flood of large
// events costs the query that much, not QueryMaxEvents megabytes. With a
// limit, each relay is held to it: the events a relay sends past f.Limit
// are dropped unchecked (and counted in RelayStatus.EventsMismatch).
func (p *Pool) Query(ctx context.Context, f nostr.Filter) ([]*nostr.Event, error) {
	out, _, err := p.query(ctx, f, plainQuery, nil)
	return out, err
}

// Sourced is an event a query returned, with the URLs of the relays that
// brought it (as configured, in the pool's order).
type Sourced struct {
	Event  *nostr.Event
	Relays []string
}

// QuerySources is Query with the relays that brought each event: every
// relay whose copy came before the query ended, not only the first. A
// caller that must give each relay its share of what it keeps (card
// discovery: one relay's flood of events must not crowd out the others')
// tells them apart with it.
//
// With o.Until, each relay is asked for its events until its own point.
func (p *Pool) QuerySources(ctx context.Context, f nostr.Filter, o QueryOptions) ([]Sourced, error) {
	evs, s, err := p.query(ctx, f, querySources, o.Until)
	if s == nil {
		return nil, err
	}
	out := make([]Sourced, len(evs))
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, ev := range evs {
		out[i].Event = ev
		var id [32]byte
		_, _ = hex.Decode(id[:], []byte(ev.ID)) // checked as it came
		for _, idx := range s.from[id] {
			out[i].Relays = append(out[i].Relays, p.relays[idx].url)
		}
	}
	return out, err
}

// QueryOptions are the choices of QuerySources.
type QueryOptions struct {
	// Until holds, by relay URL, where the query ends on that relay in
	// place of the filter's Until: a caller paging back through each
	// relay's stored events (newest first, NIP-01's until) asks each
	// from where it stopped, so that a relay whose events are older or
	// newer than the others' neither holds them back nor skips theirs.
	// URLs match as SubscribeOptions.Since's do, the earliest counting of
	// several that match one relay; relays not in it end at the
	// filter's Until. A relay's events past its own are dropped.
	Until map[string]nostr.Timestamp
}

// setEnds sets each relay's Until (QueryOptions.Until) and widens the
// filter's to the latest of them, as setting each relay's since does.
func (s *Subscription) setEnds(f nostr.Filter, until map[string]nostr.Timestamp) {
	byKey := make(map[string]nostr.Timestamp, len(until))
	for u, at := range until {
		k := urlKey(u)
		if old, ok := byKey[k]; !ok || at < old {
			byKey[k] = at
		}
	}
	s.ends = make([]*nostr.Timestamp, len(s.p.relays))
	var latest *nostr.Timestamp
	for i, r := range s.p.relays {
		s.ends[r.idx] = f.Until
		if at, ok := byKey[urlKey(r.url)]; ok {
			s.ends[r.idx] = &at
		}
		switch end := s.ends[r.idx]; {
		case end == nil:
			s.filter.Until = nil // a relay without an end: none
			return
		case i == 0 || *end > *latest:
			latest = end
		}
	}
	s.filter.Until = latest
}

// pastEnd reports whether ev is dated past relay idx's Until in a query
// (QueryOptions.Until).
func (s *Subscription) pastEnd(idx int, ev *nostr.Event) bool {
	return s.ends != nil && s.ends[idx] != nil && ev.CreatedAt > *s.ends[idx]
}

// queryKind says whether a subscription is a query's, and which.
type queryKind int

const (
	notQuery     queryKind = iota // Subscribe's
	plainQuery                    // Query's
	querySources                  // QuerySources': keeps each event's relays
)

// query runs Query, returning its subscription (closed) too, nil if none
// was made.
func (p *Pool) query(ctx context.Context, f nostr.Filter, kind queryKind, until map[string]nostr.Timestamp) ([]*nostr.Event, *Subscription, error) {
	s, err := p.subscribe(ctx, f, kind, until, nil, Gate{}, nil, nil)
	if err != nil {
		return nil, nil, err
	}
	defer s.Close()
	s.mu.Lock()
	none := s.awaited == 0
	s.mu.Unlock()
	if none {
		return nil, s, fmt.Errorf("relay: query: %w", ErrNoRelays)
	}
	var out []*nostr.Event
	var bytes int64
	add := func(ev *nostr.Event) error {
		if len(out) >= p.cfg.QueryMaxEvents {
			return fmt.Errorf("relay: query: more than %d events: %w", p.cfg.QueryMaxEvents, ErrQueryTruncated)
		}
		bytes += EventSize(ev)
		if bytes > p.cfg.QueryMaxBytes {
			return fmt.Errorf("relay: query: events of more than %d bytes: %w", p.cfg.QueryMaxBytes, ErrQueryTruncated)
		}
		out = append(out, ev)
		return nil
	}
	for {
		select {
		case ev, ok := <-s.events:
			if !ok {
				return out, s, fmt.Errorf("relay: query: %w", s.Err())
			}
			if err := add(ev); err != nil {
				return out, s, err
			}
		case <-s.eose:
			if err := s.Err(); err != nil {
				return out, s, fmt.Errorf("relay: query: %w", err)
			}
			// Events sent before each relay's EOSE are already buffered.
			s.Close()
			for ev := range s.events {
				if err := add(ev); err != nil {
					return out, s, err
				}
			}
			return out, s, nil
		}
	}
}
