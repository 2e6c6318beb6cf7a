package embedded

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/snapnode/snapnode/internal/lowerhex"
	"github.com/snapnode/snapnode/relay"
)

// localQueue bounds the requests (REQ, CLOSE, EVENT) of an in-process
// connection waiting for the relay, as the WebSocket Conn of the pool
// bounds the frames waiting for its socket.
const localQueue = 256

// errLocalEnded prefixes the Err of an in-process connection the relay
// ended.
var errLocalEnded = errors.New("embedded relay: in-process connection ended")

// LocalConn opens an in-process connection to r: a relay.Conn for a
// relay.Pool of the same process (PoolConfig.Dial), which reaches the
// relay with no socket and no JSON. Events go both ways as copies, so the
// pool and the relay share no mutable memory.
//
// The connection is a client like any WebSocket one: its events are
// checked, stored and forwarded, its subscriptions served (stored events,
// EOSE, live events), and its requests bounded, by the same code and
// limits (message lengths are those of the messages' JSON encoding).
// Answers and events wait in the same bounded queues; Messages holds up to
// SendQueue messages, and a connection whose owner stops reading it is
// cut off like a slow WebSocket client, without holding up anyone else.
//
// The connection ends when its owner closes it, when the relay closes or
// when Serve shuts down (like every connection), or when the relay cuts it
// off; Err then says why. LocalConn fails once r is closed.
//
// It is a relay.InProcessConn: a pool hands it a function that takes each
// message (live events in the goroutine that publishes them), and does not
// check again the live events the relay checked (see Deliver).
func (r *Relay) LocalConn() (relay.Conn, error) {
	l := &localConn{
		in:   make(chan localRequest, localQueue),
		msgs: make(chan relay.ConnMessage, r.cfg.SendQueue),
	}
	c := r.newConn(l, r.log.With("remote", "in-process"))
	c.patient = true
	l.c = c
	if !r.register(c) {
		c.cancel()
		return nil, errors.New("embedded relay: closed")
	}
	go c.serve(l.readLoop, nil)
	return l, nil
}

var _ relay.InProcessConn = (*localConn)(nil)

// localConn is both the relay.Conn handed to the pool and the transport of
// its conn: requests go in through in, answers and events come out
// through msgs (OKs go to the publishers waiting for them).
type localConn struct {
	c    *conn
	in   chan localRequest
	msgs chan relay.ConnMessage

	errMu sync.Mutex
	err   error

	oks relay.OKWaiters // publishers waiting for their OK

	// processing is held while one request is handled, by the reader or
	// by a Publish handling its event itself; queued counts the requests
	// in `in` not yet handled. A Publish finding none queued handles its
	// event in its own goroutine: two goroutine hand-offs fewer for each
	// event the node publishes, and the connection's requests are still
	// handled one at a time, each after those queued before it.
	processing sync.Mutex
	queued     atomic.Int64

	// deliver, once the pool has set it (Deliver), takes the messages
	// instead of msgs.
	deliver atomic.Pointer[func(relay.ConnMessage)]
}

// Deliver makes the connection hand each message to f instead of queueing
// it on Messages (relay.InProcessConn): live events in the goroutine that
// publishes them (see direct), everything else in the writer's.
// Live events are marked Verified: handleEvent checked each with the
// relay's Verifier before forwarding it, and each is a copy. Stored events,
// read back from the database, are not.
func (l *localConn) Deliver(f func(relay.ConnMessage)) { l.deliver.Store(&f) }

// localRequest is one client message: what the relay's parser would have
// made of it on a WebSocket, or the refusal it would have answered.
type localRequest struct {
	m   *clientMessage
	err error
}

func (l *localConn) setErr(err error) {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	if l.err == nil {
		l.err = err
	}
}

// Err is nil while the connection is open, then why it ended.
func (l *localConn) Err() error {
	l.errMu.Lock()
	defer l.errMu.Unlock()
	return l.err
}

// Messages delivers the relay's EVENT, EOSE, CLOSED and NOTICE messages.
func (l *localConn) Messages() <-chan relay.ConnMessage { return l.msgs }

// Close ends the connection and waits for its goroutines.
func (l *localConn) Close() error {
	l.setErr(relay.ErrConnClosed)
	l.c.kill(websocket.CloseNormalClosure, "")
	<-l.c.finished
	return nil
}

// Req opens or replaces subscription id. It does not wait: a full request
// queue ends the connection.
func (l *localConn) Req(id string, f nostr.Filter) error {
	m, err := reqMessage(id, f, &l.c.r.lim)
	return l.queue(localRequest{m, err})
}

// CloseReq ends subscription id, queued like Req.
func (l *localConn) CloseReq(id string) error {
	m, err := closeMessage(id, &l.c.r.lim)
	return l.queue(localRequest{m, err})
}

// queue queues q without waiting; a full queue ends the connection.
func (l *localConn) queue(q localRequest) error {
	if l.c.killed() {
		return l.Err()
	}
	l.queued.Add(1)
	select {
	case l.in <- q:
		return nil
	default:
		l.queued.Add(-1)
		err := fmt.Errorf("embedded relay: in-process connection: request queue full (%d)", cap(l.in))
		l.setErr(err)
		l.c.kill(websocket.CloseAbnormalClosure, "")
		return err
	}
}

// Publish sends a copy of ev and waits, until ctx ends or the connection
// does, for the relay's OK. Unlike Req, it waits for room in a full
// request queue.
func (l *localConn) Publish(ctx context.Context, ev nostr.Event) (bool, string, error) {
	m, perr := eventMessage(&ev, &l.c.r.lim)
	reply, cancel := l.oks.Wait(ev.ID)
	defer cancel()

	if !l.handleNow(m, perr) {
		l.queued.Add(1)
		select {
		case l.in <- localRequest{m, perr}:
		case <-l.c.done:
			l.queued.Add(-1)
			return false, "", l.Err()
		case <-ctx.Done():
			l.queued.Add(-1)
			return false, "", fmt.Errorf("embedded relay: in-process connection: %s not sent: %w", ev.ID, context.Cause(ctx))
		}
	}
	select {
	case r := <-reply:
		return r.Accepted, r.Reason, nil
	case <-ctx.Done():
		return false, "", fmt.Errorf("embedded relay: in-process connection: no OK for %s: %w", ev.ID, context.Cause(ctx))
	case <-l.c.done:
		return false, "", fmt.Errorf("embedded relay: in-process connection: no OK for %s: %w", ev.ID, l.Err())
	}
}

// handleNow handles a published event in the caller's goroutine, unless
// requests are queued before it or the connection has ended; it reports
// whether it did.
func (l *localConn) handleNow(m *clientMessage, err error) bool {
	l.processing.Lock()
	defer l.processing.Unlock()
	if l.queued.Load() != 0 {
		return false
	}
	if l.c.killed() {
		return false
	}
	_ = l.c.process(m, err) // an error: the connection ended, which Publish sees
	return true
}

// readLoop handles the queued requests, one at a time, until the
// connection is killed.
func (l *localConn) readLoop() {
	c := l.c
	for {
		if c.killed() {
			return
		}
		select {
		case <-c.done:
			return
		case q := <-l.in:
			l.processing.Lock()
			err := c.process(q.m, q.err)
			l.queued.Add(-1)
			l.processing.Unlock()
			if err != nil {
				return
			}
		}
	}
}

// connMessage is it as the owner gets it; false: a stored event that no
// longer decodes (logged), which is skipped.
func (l *localConn) connMessage(it outItem) (relay.ConnMessage, bool) {
	m := &it.msg
	switch m.label {
	case labelEvent:
		ev, err := m.ev.event()
		if err != nil {
			l.c.log.Error("decode stored event", "err", err)
			return relay.ConnMessage{}, false
		}
		return relay.ConnMessage{Label: labelEvent, SubID: m.ref, Event: ev, Verified: m.ev.ev != nil}, true
	case labelEOSE:
		return relay.ConnMessage{Label: labelEOSE, SubID: m.ref}, true
	case labelClosed:
		return relay.ConnMessage{Label: labelClosed, SubID: m.ref, Reason: m.text}, true
	default:
		return relay.ConnMessage{Label: labelNotice, Reason: m.text}, true
	}
}

// direct hands a live event to the owner's deliver function in the
// publisher's goroutine, once the owner has set one (Deliver): the writer
// goroutine is not woken for it. The writer still hands over the
// subscription's stored events, its EOSE and the live events that arrived
// before that EOSE, in order; a live event delivered here comes after
// them (the subscription leaves its stored phase only once they are
// written) but may overtake those still being written.
func (l *localConn) direct(it outItem) bool {
	f := l.deliver.Load()
	if f == nil {
		return false
	}
	if l.c.killed() {
		return true
	}
	if it.sub != nil && it.sub.isClosed() {
		return true
	}
	if cm, ok := l.connMessage(it); ok {
		(*f)(cm)
	}
	return true
}

// write hands one message to the owner: to its deliver function when it
// has set one, else on Messages, waiting at most WriteTimeout for room
// there (OKs do not come here: see ack).
func (l *localConn) write(it outItem) error {
	cm, ok := l.connMessage(it)
	if !ok {
		return nil
	}
	if f := l.deliver.Load(); f != nil {
		(*f)(cm)
		return nil
	}
	select {
	case l.msgs <- cm:
		return nil
	default:
	}
	wt := l.c.r.cfg.WriteTimeout
	t := time.NewTimer(wt)
	defer t.Stop()
	select {
	case l.msgs <- cm:
		return nil
	case <-l.c.done:
		return errConnClosed
	case <-t.C:
		err := fmt.Errorf("%w: messages not read for %s", errLocalEnded, wt)
		l.setErr(err)
		return err
	}
}

// ack hands an OK to the publishers waiting for it, at once: they wait
// on channels of their own, which never fill.
func (l *localConn) ack(id string, accepted bool, msg string) bool {
	l.oks.Resolve(id, relay.OK{Accepted: accepted, Reason: msg})
	return true
}

func (l *localConn) begin()                      {}
func (l *localConn) flush() error                { return nil }
func (l *localConn) sendsJSON() bool             { return false }
func (l *localConn) inline() bool                { return false }
func (l *localConn) pingInterval() time.Duration { return 0 }
func (l *localConn) ping() error                 { return nil }

// abort: a write waiting for room in Messages returns when done closes.
func (l *localConn) abort() {}

func (l *localConn) killed(code int, text string) {
	if text == "" {
		text = "code " + strconv.Itoa(code)
	}
	l.setErr(fmt.Errorf("%w: %s", errLocalEnded, text))
}

// finish closes Messages, after Err was set (by killed, at the latest).
func (l *localConn) finish(int, string) { close(l.msgs) }

// The messages of an in-process client, as the WebSocket parser would make
// them of the JSON messages the pool's WebSocket Conn sends (go-nostr's
// envelopes), with the same refusals. Message lengths are counted as the
// relay's JSON encoding would write them, without encoding anything.

// eventMessage is the EVENT message carrying a copy of ev.
func eventMessage(ev *nostr.Event, lim *limits) (*clientMessage, error) {
	if n := eventMessageLen(ev); n > lim.maxMessageLength {
		msg := fmt.Sprintf("invalid: message too large (%d > %d bytes)", n, lim.maxMessageLength)
		if lowerhex.Valid(ev.ID, 64) {
			return nil, okFalse(ev.ID, "%s", msg)
		}
		return nil, notice("%s", msg)
	}
	// go-nostr leaves out an empty id, pubkey or sig.
	for _, f := range [...]struct{ name, v string }{{"id", ev.ID}, {"pubkey", ev.PubKey}, {"sig", ev.Sig}} {
		if f.v == "" {
			return nil, okFalse(ev.ID, "invalid: missing field %q", f.name)
		}
	}
	cp := copyEvent(ev)
	if cp.Tags == nil {
		cp.Tags = nostr.Tags{} // as parsed: go-nostr writes nil tags as []
	}
	if err := checkShape(cp, lim); err != nil {
		return nil, okFalse(ev.ID, "invalid: %s", reason(err))
	}
	return &clientMessage{typ: msgEvent, event: cp}, nil
}

// reqMessage is the REQ message opening subscription id with f.
func reqMessage(id string, f nostr.Filter, lim *limits) (*clientMessage, error) {
	if n := len(`["REQ",,]`) + jsonStringLen(id) + filterLen(&f); n > lim.maxMessageLength {
		msg := fmt.Sprintf("invalid: message too large (%d > %d bytes)", n, lim.maxMessageLength)
		if checkSubID(id, "REQ", lim) == nil {
			return nil, closed(id, "%s", msg) // as wholeRefusal
		}
		return nil, notice("%s", msg)
	}
	if err := checkSubID(id, "REQ", lim); err != nil {
		return nil, err
	}
	flt, err := filterFromNostr(f, lim)
	if err != nil {
		return nil, filterRefusal(id, err)
	}
	return &clientMessage{typ: msgReq, subID: id, filters: []*filter{flt}}, nil
}

// closeMessage is the CLOSE message ending subscription id.
func closeMessage(id string, lim *limits) (*clientMessage, error) {
	if n := len(`["CLOSE",]`) + jsonStringLen(id); n > lim.maxMessageLength {
		return nil, notice("invalid: message too large (%d > %d bytes)", n, lim.maxMessageLength)
	}
	if err := checkSubID(id, "CLOSE", lim); err != nil {
		return nil, err
	}
	return &clientMessage{typ: msgClose, subID: id}, nil
}

// filterFromNostr is parseFilter for a filter go-nostr would encode: empty
// ids, kinds and authors are left out (no condition), a tag with no values
// is kept (it matches nothing), and the lists are copied.
func filterFromNostr(nf nostr.Filter, lim *limits) (*filter, error) {
	if nf.Search != "" {
		return nil, closed("", "unsupported: search (NIP-50) is not supported")
	}
	f := &filter{}
	if len(nf.IDs) > 0 {
		f.ids = append([]string(nil), nf.IDs...)
	}
	if len(nf.Authors) > 0 {
		f.authors = append([]string(nil), nf.Authors...)
	}
	if len(nf.Kinds) > 0 {
		f.kinds = append([]int(nil), nf.Kinds...)
	}
	if nf.Since != nil {
		f.hasSince, f.since = true, int64(*nf.Since)
	}
	if nf.Until != nil {
		f.hasUntil, f.until = true, int64(*nf.Until)
	}
	if nf.Limit != 0 || nf.LimitZero {
		if nf.Limit < 0 {
			return nil, fmt.Errorf("limit must not be negative")
		}
		f.hasLimit, f.limit = true, min(nf.Limit, lim.maxLimit)
	}
	for name, values := range nf.Tags {
		if name == "" {
			return nil, closed("", "unsupported: filter contains unknown element %q", "#")
		}
		f.tags = append(f.tags, tagFilter{name: name, values: append([]string{}, values...)})
	}
	return f.complete(lim)
}

// eventMessageLen is the length of ["EVENT",ev] in the relay's encoding.
func eventMessageLen(ev *nostr.Event) int {
	n := len(`["EVENT",{"id":,"pubkey":,"created_at":,"kind":,"tags":[],"content":,"sig":}]`)
	n += jsonStringLen(ev.ID) + jsonStringLen(ev.PubKey) + jsonStringLen(ev.Content) + jsonStringLen(ev.Sig)
	n += intLen(int64(ev.CreatedAt)) + intLen(int64(ev.Kind))
	for i, t := range ev.Tags {
		if i > 0 {
			n++
		}
		n += stringsLen(t)
	}
	return n
}

// filterLen is the length of f as a JSON object with go-nostr's members.
func filterLen(f *nostr.Filter) int {
	n, members := len(`{}`), 0
	member := func(key string, value int) {
		n += len(key) + 3 + value // "key":value
		members++
	}
	if len(f.IDs) > 0 {
		member("ids", stringsLen(f.IDs))
	}
	if len(f.Kinds) > 0 {
		v := len(`[]`) + len(f.Kinds) - 1
		for _, k := range f.Kinds {
			v += intLen(int64(k))
		}
		member("kinds", v)
	}
	if len(f.Authors) > 0 {
		member("authors", stringsLen(f.Authors))
	}
	if f.Since != nil {
		member("since", intLen(int64(*f.Since)))
	}
	if f.Until != nil {
		member("until", intLen(int64(*f.Until)))
	}
	if f.Limit != 0 || f.LimitZero {
		member("limit", intLen(int64(f.Limit)))
	}
	if f.Search != "" {
		member("search", jsonStringLen(f.Search))
	}
	for name, values := range f.Tags {
		n += jsonStringLen("#"+name) - len(`""`)
		member("", stringsLen(values))
	}
	if members > 1 {
		n += members - 1
	}
	return n
}

// stringsLen is the length of a JSON array of strings.
func stringsLen(ss []string) int {
	n := len(`[]`)
	for i, s := range ss {
		if i > 0 {
			n++
		}
		n += jsonStringLen(s)
	}
	return n
}

func intLen(v int64) int {
	var b [24]byte
	return len(strconv.AppendInt(b[:0], v, 10))
}

// jsonStringLen is the length of s as a JSON string written by
// encoding/json without HTML escaping (jsonenc.Marshal).
func jsonStringLen(s string) int {
	n := len(`""`)
	for i := 0; i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			switch {
			case b == '"' || b == '\\' || b == '\b' || b == '\f' || b == '\n' || b == '\r' || b == '\t':
				n += 2
			case b < 0x20:
				n += len(`\u0000`)
			default:
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			n += len(`\ufffd`)
		case r == '\u2028' || r == '\u2029':
			n += len(`\u2028`)
		default:
			n += size
		}
		i += size
	}
	return n
}
