package embedded

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/snapnode/snapnode/relay"
)

// Relay-to-client message labels (NIP-01).
const (
	labelEvent  = "EVENT"
	labelOK     = "OK"
	labelEOSE   = "EOSE"
	labelClosed = "CLOSED"
	labelNotice = "NOTICE"
)

// message is one relay-to-client message before any encoding: the
// transport renders it, as JSON for a WebSocket client or as a
// relay.ConnMessage for an in-process one.
type message struct {
	label string     // labelEvent, labelOK, …
	ref   string     // the subscription id (EVENT, EOSE, CLOSED) or event id (OK)
	ev    *eventData // EVENT
	ok    bool       // OK
	text  string     // OK, CLOSED, NOTICE
}

// outItem is one message for the writer. sub, when set, is the
// subscription the message belongs to: it is dropped if the subscription
// has been closed (or replaced) meanwhile. flip, when set, is a marker:
// the stored phase of that subscription is over.
type outItem struct {
	sub  *subscription
	msg  message
	flip *subscription
	// unsent, for a stored event, is the bytes counted for it against
	// its peer's Config.MaxUnsentBytesPerIP until it is written.
	unsent int64
}

// transport carries a conn's messages to its client: a WebSocket (ws.go)
// or a channel in the same process (local.go). Everything else — checks,
// storage, subscriptions, queues, limits — is the conn's, whatever the
// transport.
type transport interface {
	// write hands one message to the client; an error means the
	// connection is dead. Only the writer goroutine calls it, between
	// begin and flush.
	write(it outItem) error
	// begin opens a burst of writes: the transport may hold them until
	// flush, which the writer calls as soon as its queues are empty, and
	// which sends them in the order they were written (an error means the
	// connection is dead).
	begin()
	flush() error
	// ack may answer an EVENT at once, without queueing the OK; it
	// reports whether it did.
	ack(id string, accepted bool, msg string) bool
	// direct may hand a live event to the client at once, in the
	// publisher's goroutine, without queueing it for the writer; it
	// reports whether it took it (delivered, or dropped because the
	// connection or the subscription has ended).
	direct(it outItem) bool
	// sendsJSON reports whether events go out as JSON.
	sendsJSON() bool
	// inline reports whether the reader may write its own answers when
	// the writer is idle (see conn.sendNow).
	inline() bool
	// pingInterval is how often the writer calls ping; 0: never.
	pingInterval() time.Duration
	ping() error
	// abort makes a write in progress return now (the client is too slow).
	abort()
	// killed is called once, when the connection is killed, before done
	// is closed.
	killed(code int, text string)
	// finish is called once, when the writer has stopped for good and
	// nothing is being written (see conn.stop).
	finish(code int, text string)
}

// conn is one client connection. Its reader (the HTTP handler's goroutine
// for a WebSocket, a goroutine of its own for an in-process connection,
// or the publisher's: see localConn.handleNow) handles messages one at a
// time; its writer goroutine drains two bounded
// queues: ctrl, filled by the reader (answers and stored events; the
// reader waits for room, up to WriteTimeout), and live, filled by
// publishers on other connections without ever waiting (a full queue
// disconnects the client as too slow). A WebSocket reader writes its
// answer to a message (an OK, an EOSE) itself when the writer is idle
// and both queues are empty (see sendNow).
type conn struct {
	r      *Relay
	t      transport
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	ctrl *outQueue
	live *outQueue
	// ready tells the writer that a queue has a message: it is signalled
	// (never blocking: it holds one signal) after every put.
	ready chan struct{}
	// liveTurn: the writer takes from the live queue first next time.
	liveTurn bool
	// wmu is held by whoever hands messages to the transport: the writer
	// goroutine for a burst, or the reader answering in place (sendNow).
	wmu sync.Mutex
	// stopped: the writer has stopped for good; whoever holds wmu then,
	// or takes it next, finishes the transport (see stop).
	stopped atomic.Bool
	// finishCalled: the transport has been finished; wmu held.
	finishCalled bool
	// patient: a full live queue holds the publisher (for at most
	// WriteTimeout) instead of cutting the connection. Only the
	// in-process connection, the node itself, is patient.
	patient bool

	done      chan struct{} // closed by kill
	finished  chan struct{} // closed when reader and writer have returned
	killOnce  sync.Once
	closeCode int
	closeText string

	subs map[string]*subscription // the goroutine handling a request only
	// values is the number of filter values subs hold (see
	// Config.MaxOpenFilterValues); the goroutine handling a request only.
	values int

	// peer names the connection's peer for the per-peer bounds: its
	// EVENT bucket in Relay.events and its share of the store (see
	// Config.StorePeerShare); "" (loopback, the in-process connection):
	// neither.
	peer string
	// reqTokens is what the connection's REQ bucket holds (see
	// Config.ReqsPerSecond) at reqAt; the goroutine handling a request
	// only.
	reqTokens float64
	reqAt     time.Time
	// unsent is what the connection's REQs have loaded and not yet
	// written, counted for peer (see Config.MaxUnsentBytesPerIP): the
	// reader adds, the writer takes away, and serve gives back the rest.
	unsent atomic.Int64
}

var errConnClosed = errors.New("connection closed")

// newConn makes a connection of r over t; register it, then serve it.
func (r *Relay) newConn(t transport, log *slog.Logger) *conn {
	ctx, cancel := context.WithCancel(r.ctx)
	return &conn{
		r:         r,
		t:         t,
		log:       log,
		ctx:       ctx,
		cancel:    cancel,
		ctrl:      newOutQueue(ctrlQueue),
		live:      newOutQueue(r.cfg.SendQueue),
		ready:     make(chan struct{}, 1),
		done:      make(chan struct{}),
		finished:  make(chan struct{}),
		closeCode: websocket.CloseNormalClosure,
		subs:      make(map[string]*subscription),
	}
}

// register adds c to the relay's connections, unless the relay is closed.
func (r *Relay) register(c *conn) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return false
	}
	r.conns[c] = struct{}{}
	return true
}

// serve runs a registered connection: read (which returns when the
// connection ends) in this goroutine and the writer in another, then
// removes its subscriptions and unregisters it; gone, when not nil, runs
// last, before the connection counts as finished (closeConns waits for
// it).
func (c *conn) serve(read func(), gone func()) {
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		c.writeLoop()
	}()
	read()
	c.kill(websocket.CloseNormalClosure, "") // if the reader stopped on its own
	<-writerDone
	for _, s := range c.subs {
		c.dropSub(s)
	}
	c.sentUnsent(c.unsent.Load()) // what was loaded or queued and never written
	c.cancel()
	c.r.mu.Lock()
	delete(c.r.conns, c)
	c.r.mu.Unlock()
	if gone != nil {
		gone()
	}
	close(c.finished)
}

// kill ends the connection once: the writer stops, and the transport
// closes (a WebSocket gets a close frame with code and text, best effort).
func (c *conn) kill(code int, text string) {
	c.killOnce.Do(func() {
		c.closeCode, c.closeText = code, text
		c.t.killed(code, text)
		close(c.done)
		c.cancel()
	})
}

// killed reports whether the connection was killed (done is closed).
func (c *conn) killed() bool {
	select {
	case <-c.done:
		return true
	default:
		return false
	}
}

// slow disconnects a client whose queue is full.
func (c *conn) slow() {
	c.r.slowCuts.Add(1)
	c.r.slowLog.Log(context.Background(), c.log, c.r.now(), slog.LevelInfo, "disconnecting slow client", "reason", "outbound queue full")
	c.kill(websocket.ClosePolicyViolation, "too slow: outbound queue full")
	// The writer is most likely blocked on the client: abort that write
	// now rather than at its deadline.
	c.t.abort()
}

// sendLive queues it without waiting; a full queue disconnects the
// client. A patient connection (the in-process one) is not cut at once:
// the publisher, whose goroutine this is, waits for room up to
// WriteTimeout. Cutting the node's own connection would lose every
// ephemeral request published until it resubscribes, the valid among the
// flood; waiting slows the flood at its source instead (its connection is
// not read meanwhile) while the node, which queues requests fairly by
// key, catches up.
func (c *conn) sendLive(it outItem) {
	if c.t.direct(it) {
		return
	}
	if c.enqueue(c.live, it, c.patient) == queueFull {
		c.slow()
	}
}

// await waits for ch to close, at most WriteTimeout, and reports whether
// it did; false too when the connection ends first.
func (c *conn) await(ch <-chan struct{}) bool {
	t := time.NewTimer(c.r.cfg.WriteTimeout)
	defer t.Stop()
	select {
	case <-ch:
		return true
	case <-c.done:
	case <-t.C:
	}
	return false
}

// send queues it on the control queue, waiting at most WriteTimeout for
// room. It returns an error when the connection is (or gets) closed.
func (c *conn) send(it outItem) error {
	switch c.enqueue(c.ctrl, it, true) {
	case queued:
		return nil
	case queueFull:
		c.slow()
	}
	return errConnClosed
}

// trimEvery is how often the writer of a connection that is not pinged
// lets its empty queues' buffers go (see outQueue.trim).
const trimEvery = 30 * time.Second

// ctrlQueue bounds a connection's control queue: answers and stored
// events, for which the reader waits.
const ctrlQueue = 64

// queueResult is what became of a message given to enqueue.
type queueResult int

const (
	queued    queueResult = iota
	queueFull             // no room, or none within WriteTimeout
	connDone              // the connection ended first
)

// enqueue puts it on q and wakes the writer; when q is full it waits for
// room, in turn with other senders, up to WriteTimeout if wait is set.
func (c *conn) enqueue(q *outQueue, it outItem, wait bool) queueResult {
	if c.killed() {
		return connDone
	}
	switch {
	case !wait:
		if !q.tryPut(it) {
			return queueFull
		}
	default:
		ok, turn := q.putOrWait(it)
		if ok {
			break
		}
		t := time.NewTimer(c.r.cfg.WriteTimeout)
		defer t.Stop()
		select {
		case <-turn:
			q.putKept(it)
		case <-c.done:
			q.cancel(turn)
			return connDone
		case <-t.C:
			q.cancel(turn)
			return queueFull
		}
	}
	select {
	case c.ready <- struct{}{}:
	default: // a signal is already pending
	}
	return queued
}

// trim lets the empty queues' large buffers go (see outQueue.trim).
func (c *conn) trim() {
	c.ctrl.trim()
	c.live.trim()
}

// next takes the next queued message, from the control and the live
// queue in turn while both hold some: a long stored result on the control
// queue must not hold back the live events of the client's other
// subscriptions until their queue fills and the client is cut as too
// slow. Only the writer calls it, c.wmu held.
func (c *conn) next() (outItem, bool) {
	first, second := c.ctrl, c.live
	if c.liveTurn {
		first, second = second, first
	}
	c.liveTurn = !c.liveTurn
	if it, ok := first.take(); ok {
		return it, true
	}
	return second.take()
}

func (c *conn) notice(msg string) error {
	return c.send(outItem{msg: message{label: labelNotice, text: msg}})
}

func (c *conn) ok(id string, accepted bool, msg string) error {
	if c.t.ack(id, accepted, msg) {
		return nil
	}
	return c.sendNow(outItem{msg: message{label: labelOK, ref: id, ok: accepted, text: msg}})
}

// closedSub answers CLOSED for subID, and closes the open subscription
// of that id, if any (a REQ refused in its place): after CLOSED, the
// client gets no EVENT for the id.
func (c *conn) closedSub(subID, msg string) error {
	if s, ok := c.subs[subID]; ok {
		c.dropSub(s)
	}
	return c.send(outItem{msg: message{label: labelClosed, ref: subID, text: msg}})
}

// maxEchoedRef bounds, in bytes, the event or subscription id a refusal
// echoes (at least the bytes MaxSubIDLength characters may take, four
// each): a longer one cannot be either, and echoing it whole would let a
// client that does not read make the relay hold its queued answers, each
// as large as a message.
const maxEchoedRef = 256

// refuse answers a refused message as the refusal says; one whose
// reference is too long to echo gets a NOTICE instead.
func (c *conn) refuse(r *refusal) error {
	if r.reply != replyNotice && len(r.ref) > max(maxEchoedRef, utf8.UTFMax*c.r.cfg.MaxSubIDLength) {
		return c.notice(r.msg)
	}
	switch r.reply {
	case replyOK:
		return c.ok(r.ref, false, r.msg)
	case replyClosed:
		return c.closedSub(r.ref, r.msg)
	default:
		return c.notice(r.msg)
	}
}

// writeLoop hands queued messages to the transport in bursts (and pings)
// until the connection is killed, then lets the transport finish.
func (c *conn) writeLoop() {
	// The queues are trimmed at each ping, or every trimEvery for a
	// transport that does not ping.
	var ping, trim <-chan time.Time
	if d := c.t.pingInterval(); d > 0 {
		t := time.NewTicker(d)
		defer t.Stop()
		ping = t.C
	} else {
		t := time.NewTicker(trimEvery)
		defer t.Stop()
		trim = t.C
	}
	// Always killed by now: the loop ends only on done or after a kill.
	defer c.stop()
	for {
		// Prefer being killed over writing more.
		if c.killed() {
			return
		}
		select {
		case <-c.done:
			return
		case <-c.ready:
			c.wmu.Lock()
			ok := c.burst()
			c.wmu.Unlock()
			if !ok {
				return
			}
		case <-trim:
			c.trim()
		case <-ping:
			c.trim()
			if err := c.t.ping(); err != nil {
				c.kill(websocket.CloseAbnormalClosure, "")
				return
			}
		}
	}
}

// burst writes whatever is queued, and flushes once the queues are
// empty: one system call for messages that were ready together, and none
// held back waiting for more. It reports false when the connection is
// dead. Only the writer calls it, c.wmu held.
func (c *conn) burst() bool {
	it, more := c.next()
	if !more {
		return true // what was signalled went out in the last burst
	}
	c.t.begin()
	ok := c.handle(it)
	for ok {
		if it, more = c.next(); !more {
			break
		}
		ok = c.handle(it)
	}
	return c.flush(ok)
}

// flush ends a burst that wrote all it had to if ok; it reports whether
// the connection is alive. c.wmu is held.
func (c *conn) flush(ok bool) bool {
	if err := c.t.flush(); err != nil && ok {
		c.log.Debug("write failed", "err", err)
		c.kill(websocket.CloseAbnormalClosure, "")
		return false
	}
	return ok
}

// handle writes one item taken for writing: a message, or the buffered
// live events of a subscription whose stored phase it ends. c.wmu is
// held.
func (c *conn) handle(it outItem) bool {
	if s := it.flip; s != nil {
		for _, it := range s.flip() {
			if s.isClosed() {
				break
			}
			if !c.write(it) {
				return false
			}
		}
		return true
	}
	if it.unsent > 0 {
		defer c.sentUnsent(it.unsent) // written, or dropped
	}
	if it.sub != nil && it.sub.isClosed() {
		return true
	}
	return c.write(it)
}

// write hands it to the transport; false when the connection is dead.
// c.wmu is held.
func (c *conn) write(it outItem) bool {
	if c.killed() {
		return false
	}
	if err := c.t.write(it); err != nil {
		c.log.Debug("write failed", "err", err)
		c.kill(websocket.CloseAbnormalClosure, "")
		return false
	}
	return true
}

// stop finishes the transport once the writer has stopped: for a
// WebSocket, the close frame with the kill's code goes out and the socket
// closes. The reader may be writing an answer in place then, wmu held and
// its frames held in a burst not yet on the wire: finishing under it
// would put the close frame in that burst and close the socket before
// the burst is written, and the client would get neither, only the end
// of the stream (1006) where the relay meant 1001 or 1008. So the
// transport is finished by whoever has wmu: the writer now when it is
// free, else the reader when it lets it go (unlockAfterInPlace), its
// answer written or failed by then, within its write's deadline.
func (c *conn) stop() {
	c.stopped.Store(true)
	if c.wmu.TryLock() {
		c.finishLocked()
		c.wmu.Unlock()
	}
}

// finishLocked finishes the transport, once; wmu is held.
func (c *conn) finishLocked() {
	if !c.finishCalled {
		c.finishCalled = true
		c.t.finish(c.closeCode, c.closeText)
	}
}

// unlockAfterInPlace lets go of wmu, which the reader held to write in
// place, and finishes the transport if the writer stopped meanwhile (see
// stop). Were the writer to stop after the check, its own TryLock
// finds wmu free: stopped is set before it tries.
func (c *conn) unlockAfterInPlace() {
	c.wmu.Unlock()
	if c.stopped.Load() && c.wmu.TryLock() {
		c.finishLocked()
		c.wmu.Unlock()
	}
}

// sendNow hands its, the reader's answer to one message (an OK; an EOSE
// and the end of the stored phase), to the transport in the calling
// goroutine when the writer is idle and nothing is queued before them,
// and queues them as send does otherwise. An answer written in place
// does not wake the writer goroutine: with one requester at a time, two
// hand-offs between goroutines less per request (its subscription's
// EOSE, its event's OK). The reader writes its answer only: what is
// queued meanwhile is the writer's, which its signal wakes, so that a
// stream of live events never keeps the reader from its client's
// messages. A write the client does not take in time fails at
// WriteTimeout, as the writer's would, and ends the connection; the
// reader waits for it as it would for room in the control queue.
func (c *conn) sendNow(its ...outItem) error {
	if c.t.inline() && c.wmu.TryLock() {
		if done, err := c.writeInPlace(its); done {
			return err
		}
	}
	for _, it := range its {
		if err := c.send(it); err != nil {
			return err
		}
	}
	return nil
}

// writeInPlace is sendNow's write in the calling goroutine, wmu held:
// done reports whether its went to the transport (err: the connection
// closed meanwhile), not when something is queued before them. wmu is
// let go however it ends, a panic in a write included, so that the
// writer and the connection's end are never left waiting for it.
func (c *conn) writeInPlace(its []outItem) (done bool, err error) {
	defer c.unlockAfterInPlace()
	if !c.ctrl.idle() || !c.live.idle() {
		return false, nil
	}
	c.t.begin()
	ok := true
	for _, it := range its {
		if ok = c.handle(it); !ok {
			break
		}
	}
	if !c.flush(ok) {
		return true, errConnClosed
	}
	return true, nil
}

// process acts on one client message, or answers err, the refusal the
// message got from the parser; an error means the connection is closed.
func (c *conn) process(m *clientMessage, err error) error {
	if err != nil {
		var r *refusal
		if !errors.As(err, &r) {
			return c.notice("error: " + err.Error())
		}
		return c.refuse(r)
	}
	switch m.typ {
	case msgEvent:
		return c.handleEvent(m.event)
	case msgReq:
		return c.handleReq(m.subID, m.filters)
	case msgClose:
		if s, ok := c.subs[m.subID]; ok {
			c.dropSub(s)
		}
		return nil
	}
	return nil
}

// dropSub closes s, one of subs, and gives its filter values back.
func (c *conn) dropSub(s *subscription) {
	delete(c.subs, s.id)
	c.values -= s.values
	if c.peer != "" {
		c.r.unhold(c.peer, s.size)
	}
	c.r.hub.remove(s)
}

// takeUnsent counts up to want bytes of stored events about to be loaded
// against the connection's peer's Config.MaxUnsentBytesPerIP, waiting up
// to the relay's unsentWait for room for all of them; past it, it counts
// what room there is, maybe none. It returns what it counted (want when
// the connection has no peer) and whether the bound of every peer
// together (MaxUnsentBytes) was the one in the way, or an error once the
// connection ends.
func (c *conn) takeUnsent(want int64) (int64, bool, error) {
	if c.peer == "" {
		return want, false, nil
	}
	t := time.NewTimer(c.r.unsentWait)
	defer t.Stop()
	some, whole := false, false
	for {
		n, freed, all := c.r.takeUnsent(c.peer, want, some)
		if freed == nil {
			c.unsent.Add(n)
			return n, whole, nil
		}
		whole = all
		select {
		case <-freed:
		case <-t.C:
			some = true
		case <-c.ctx.Done():
			return 0, false, errConnClosed
		}
	}
}

// sentUnsent gives back n bytes that takeUnsent counted: written, or
// never to be.
func (c *conn) sentUnsent(n int64) {
	if c.peer == "" || n == 0 {
		return
	}
	c.unsent.Add(-n)
	c.r.giveUnsent(c.peer, n)
}

// allowEvent takes a token from the connection's EVENT bucket.
func (c *conn) allowEvent() bool {
	if c.peer == "" {
		return true
	}
	ok, _ := c.r.events.Allow(c.peer)
	return ok
}

// handleEvent checks, stores and forwards ev, which the relay owns from
// now on and never modifies.
func (c *conn) handleEvent(ev *nostr.Event) error {
	r := c.r
	now := r.now()
	if !c.allowEvent() {
		return c.ok(ev.ID, false, fmt.Sprintf("rate-limited: more than %g events a second from your address", r.events.Rate()))
	}
	if err := r.cfg.Verifier.Verify(ev); err != nil {
		return c.ok(ev.ID, false, "invalid: "+reason(err))
	}
	exp, hasExp, err := expiration(ev)
	if err != nil {
		return c.ok(ev.ID, false, "invalid: "+reason(err))
	}
	unix := now.Unix()
	if hasExp && exp <= unix {
		return c.ok(ev.ID, false, "invalid: event has expired")
	}
	if up := r.cfg.CreatedAtUpperLimit; up > 0 && int64(ev.CreatedAt) > unix+int64(up/time.Second) {
		return c.ok(ev.ID, false, fmt.Sprintf("invalid: created_at is more than %s in the future", up))
	}
	if r.cfg.AcceptEvent != nil {
		if err := r.cfg.AcceptEvent(ev); err != nil {
			return c.ok(ev.ID, false, "blocked: "+err.Error())
		}
	}
	d := liveEvent(ev)
	if kindClass(ev.Kind) == classEphemeral {
		// Encoded only if a WebSocket subscriber wants it.
		r.hub.broadcast(d)
		return c.ok(ev.ID, true, "")
	}
	raw, err := d.json()
	if err != nil {
		return c.ok(ev.ID, false, "error: could not encode event")
	}
	res, err := r.store.save(c.ctx, ev, raw, exp, hasExp, unix, c.peer)
	if err != nil {
		c.log.Error("save event", "id", ev.ID, "err", err)
		return c.ok(ev.ID, false, "error: could not save event")
	}
	switch res {
	case duplicate:
		return c.ok(ev.ID, true, "duplicate: already have this event")
	case superseded:
		// Not stored, and not forwarded: the relay holds a newer version
		// of this address (or one as new with a lower id). NIP-01 has no
		// prefix for it; the event is valid, so not "invalid:", and the
		// relay already holds the address's current version, so there
		// is nothing for the publisher to retry: OK true with
		// "duplicate:", as nostream answers (khatru answers OK true
		// without a reason; strfry OK false with its own "replaced:").
		return c.ok(ev.ID, true, "duplicate: a newer version of this replaceable event is already stored")
	}
	r.hub.broadcast(d)
	return c.ok(ev.ID, true, "")
}

// reason is the text of an invalid-event error without its sentinel prefix.
func reason(err error) string {
	s := err.Error()
	for _, sentinel := range []error{errInvalidEvent, relay.ErrInvalidEvent} {
		if p := sentinel.Error() + ": "; strings.HasPrefix(s, p) {
			return s[len(p):]
		}
	}
	return s
}

// allowReq takes a token from the connection's REQ bucket.
func (c *conn) allowReq() bool {
	if c.peer == "" {
		return true
	}
	now, cfg := c.r.now(), &c.r.cfg
	switch {
	case c.reqAt.IsZero():
		c.reqTokens, c.reqAt = float64(cfg.ReqBurst), now
	case now.After(c.reqAt):
		c.reqTokens = min(float64(cfg.ReqBurst), c.reqTokens+now.Sub(c.reqAt).Seconds()*cfg.ReqsPerSecond)
		c.reqAt = now
	}
	if c.reqTokens < 1 {
		return false
	}
	c.reqTokens--
	return true
}

func (c *conn) handleReq(subID string, filters []*filter) error {
	r := c.r
	if !c.allowReq() {
		return c.closedSub(subID, fmt.Sprintf("rate-limited: more than %g REQs a second on this connection", r.cfg.ReqsPerSecond))
	}
	if old, ok := c.subs[subID]; ok {
		c.dropSub(old) // NIP-01: a REQ with an open id replaces it
	} else if len(c.subs) >= r.cfg.MaxSubscriptions {
		return c.closedSub(subID, fmt.Sprintf("rate-limited: too many open subscriptions (max %d)", r.cfg.MaxSubscriptions))
	}
	sub := newSubscription(c, subID, filters)
	// Each value of an open filter holds memory (the filter's sets, the
	// hub's index): bounded per connection, not per filter only.
	if !c.patient && c.values+sub.values > r.cfg.MaxOpenFilterValues {
		return c.closedSub(subID, fmt.Sprintf("rate-limited: too many filter values in open subscriptions (max %d)", r.cfg.MaxOpenFilterValues))
	}
	// And what they hold in bytes, by peer: one value may be a long
	// string, and a peer may open many connections.
	if c.peer != "" {
		if ok, whole := r.hold(c.peer, sub.size); whole {
			return c.closedSub(subID, fmt.Sprintf("rate-limited: open subscriptions hold too much memory on this relay (max %d bytes); try again later", r.cfg.MaxSubscriptionBytes))
		} else if !ok {
			return c.closedSub(subID, fmt.Sprintf("rate-limited: open subscriptions from your address hold too much memory (max %d bytes)", r.cfg.MaxSubscriptionBytesPerIP))
		}
	}
	c.subs[subID] = sub
	c.values += sub.values
	r.hub.add(sub) // before querying: live events now buffer in sub

	now := r.now().Unix()
	var found []storedEvent
	// One budget for the whole REQ: sixteen copies of a filter load no
	// more than one may. The node's own connection (patient) is not
	// bounded in bytes: its inbox's catch-up after a restart takes what
	// its filter's limit gives, however large the requests.
	events, bytes := r.cfg.MaxLimit, r.cfg.MaxStoredBytes
	// What they load stays in memory until written, however slowly the
	// client reads: counted by peer, across its connections, waiting
	// for room (see Config.MaxUnsentBytesPerIP).
	var took int64
	whole := false // the bound of every peer together cut it, not the peer's
	if c.patient {
		bytes = -1
	} else {
		var err error
		if took, whole, err = c.takeUnsent(int64(bytes)); err != nil {
			c.dropSub(sub)
			return err
		}
	}
	short := took < int64(bytes) // the peer's budget left less than a REQ's
	bytes = int(min(took, int64(bytes)))
	limit := func(f *filter) int {
		if f.hasLimit {
			return f.limit
		}
		return r.cfg.DefaultLimit
	}
	queries := false // some filter asks the database
	for _, f := range filters {
		queries = queries || r.store.mayMatch(f, limit(f))
	}
	// One turn of the peer's (see Config.MaxQueriesPerIP) and one time
	// budget (QueryTimeout) for the REQ's queries, all its filters.
	// Both end with the queries, before the events are written.
	release := func() {}
	if queries && c.peer != "" {
		var err error
		if release, err = r.queries.acquire(c.ctx, c.peer, r.queryWait); err != nil {
			c.sentUnsent(took)
			c.dropSub(sub)
			if c.ctx.Err() != nil {
				return errConnClosed
			}
			return c.closedSub(subID, fmt.Sprintf("rate-limited: too many queries at once from your address (max %d); try again later", r.cfg.MaxQueriesPerIP))
		}
	}
	defer release() // gives back nothing once given back
	qctx, cancel := context.WithTimeout(c.ctx, r.cfg.QueryTimeout)
	defer cancel()
	cut := false // and it cut what was loaded
	for _, f := range filters {
		evs, stopped, err := r.store.query(qctx, f, min(limit(f), events), bytes, now)
		if err != nil {
			c.sentUnsent(took)
			c.dropSub(sub)
			if c.ctx.Err() != nil {
				return errConnClosed
			}
			if qctx.Err() != nil {
				return c.closedSub(subID, fmt.Sprintf("error: the query took too long (max %s); try a narrower filter", r.cfg.QueryTimeout))
			}
			c.log.Error("query events", "err", err)
			return c.closedSub(subID, "error: could not query the database")
		}
		cut = cut || (short && stopped)
		found = append(found, evs...)
		events -= len(evs)
		for _, e := range evs {
			bytes -= len(e.raw)
		}
	}
	release()
	cancel()
	if len(filters) > 1 {
		slices.SortFunc(found, func(a, b storedEvent) int {
			if a.createdAt != b.createdAt {
				return cmp.Compare(b.createdAt, a.createdAt)
			}
			return cmp.Compare(a.id, b.id)
		})
		found = slices.CompactFunc(found, func(a, b storedEvent) bool { return a.id == b.id })
	}
	if !c.patient {
		// Give back what was counted and not loaded (or loaded twice).
		loaded := int64(0)
		for _, e := range found {
			loaded += int64(len(e.raw))
		}
		c.sentUnsent(took - loaded)
	}
	sent := make(map[string]struct{}, len(found))
	for i, e := range found {
		sent[e.id] = struct{}{}
		it := sub.eventItem(storedEventData(e.raw))
		if !c.patient {
			it.unsent = int64(len(e.raw))
		}
		found[i].raw = nil // once written, the event is the queue's to let go
		if err := c.send(it); err != nil {
			return err // serve gives back what was not written
		}
	}
	if cut {
		msg := fmt.Sprintf("rate-limited: stored events loaded for your address and not yet sent are at their bound (max %d bytes): subscription %s got fewer stored events", r.cfg.MaxUnsentBytesPerIP, subID)
		if whole {
			msg = fmt.Sprintf("rate-limited: stored events loaded and not yet sent on this relay are at their bound (max %d bytes): subscription %s got fewer stored events; try again later", r.cfg.MaxUnsentBytes, subID)
		}
		if err := c.notice(msg); err != nil {
			return err
		}
	}
	sub.mu.Lock()
	sub.sent = sent
	sub.mu.Unlock()
	return c.sendNow(outItem{sub: sub, msg: message{label: labelEOSE, ref: subID}}, outItem{flip: sub})
}
