package embedded

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/websocket"
	"github.com/nbd-wtf/go-nostr"
	"github.com/snapnode/snapnode/relay"
)

// outItem is one message for the writer. sub, when set, is the
// subscription the message belongs to: it is dropped if the subscription
// has been closed (or replaced) meanwhile. flip, when set, is a marker:
// the stored phase of that subscription is over.
type outItem struct {
	sub  *subscription
	msg  []byte
	flip *subscription
}

// conn is one client WebSocket connection. Its reader runs in the HTTP
// handler's goroutine and handles messages one at a time; its writer
// goroutine drains two bounded queues: ctrl, filled by the reader (answers
// and stored events; the reader waits for room, up to WriteTimeout), and
// live, filled by publishers on other connections without ever waiting (a
// full queue disconnects the client as too slow).
type conn struct {
	r      *Relay
	ws     *websocket.Conn
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc

	ctrl chan outItem
	live chan outItem

	done      chan struct{} // closed by kill
	finished  chan struct{} // closed when reader and writer have returned
	killOnce  sync.Once
	closeCode int
	closeText string

	subs map[string]*subscription // reader goroutine only

	tokens   float64 // rate limit bucket (reader goroutine only)
	lastFill time.Time
}

var errConnClosed = errors.New("connection closed")

// kill ends the connection once: the writer sends a close frame with code
// and text (best effort) and closes the socket, which stops the reader.
func (c *conn) kill(code int, text string) {
	c.killOnce.Do(func() {
		c.closeCode, c.closeText = code, text
		close(c.done)
		c.cancel()
	})
}

// slow disconnects a client whose queue is full.
func (c *conn) slow() {
	c.r.slowCuts.Add(1)
	c.log.Info("disconnecting slow client", "reason", "outbound queue full")
	c.kill(websocket.ClosePolicyViolation, "too slow: outbound queue full")
	// The writer is most likely blocked on a full socket: abort that write
	// now rather than at its deadline. The close frame is sent only if
	// the socket still takes it.
	_ = c.ws.NetConn().SetWriteDeadline(time.Now())
}

// sendLive queues msg without waiting; a full queue disconnects the client.
func (c *conn) sendLive(sub *subscription, msg []byte) {
	select {
	case c.live <- outItem{sub: sub, msg: msg}:
	case <-c.done:
	default:
		c.slow()
	}
}

// send queues it on the control queue, waiting at most WriteTimeout for
// room. It returns an error when the connection is (or gets) closed.
func (c *conn) send(it outItem) error {
	select {
	case c.ctrl <- it:
		return nil
	case <-c.done:
		return errConnClosed
	default:
	}
	t := time.NewTimer(c.r.cfg.WriteTimeout)
	defer t.Stop()
	select {
	case c.ctrl <- it:
		return nil
	case <-c.done:
		return errConnClosed
	case <-t.C:
		c.slow()
		return errConnClosed
	}
}

func (c *conn) sendJSON(v ...any) error {
	b, err := marshalNoEscape(v)
	if err != nil {
		return fmt.Errorf("encode message: %w", err)
	}
	return c.send(outItem{msg: b})
}

func (c *conn) notice(msg string) error { return c.sendJSON("NOTICE", msg) }

func (c *conn) ok(id string, accepted bool, msg string) error {
	return c.sendJSON("OK", id, accepted, msg)
}

func (c *conn) closedSub(subID, msg string) error { return c.sendJSON("CLOSED", subID, msg) }

// refuse answers a refused message as the refusal says.
func (c *conn) refuse(r *refusal) error {
	switch r.reply {
	case replyOK:
		return c.ok(r.ref, false, r.msg)
	case replyClosed:
		return c.closedSub(r.ref, r.msg)
	default:
		return c.notice(r.msg)
	}
}

// writeLoop writes queued messages and pings until the connection is
// killed, then sends the close frame and closes the socket.
func (c *conn) writeLoop() {
	cfg := &c.r.cfg
	ping := time.NewTicker(cfg.PingInterval)
	defer ping.Stop()
	defer func() {
		deadline := time.Now().Add(time.Second)
		_ = c.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(c.closeCode, c.closeText), deadline)
		_ = c.ws.Close()
	}()
	write := func(msg []byte) bool {
		select {
		case <-c.done:
			return false
		default:
		}
		_ = c.ws.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout))
		if err := c.ws.WriteMessage(websocket.TextMessage, msg); err != nil {
			c.log.Debug("write failed", "err", err)
			c.kill(websocket.CloseAbnormalClosure, "")
			return false
		}
		return true
	}
	handle := func(it outItem) bool {
		if it.flip != nil {
			for _, msg := range it.flip.flip() {
				if it.flip.isClosed() {
					break
				}
				if !write(msg) {
					return false
				}
			}
			return true
		}
		if it.sub != nil && it.sub.isClosed() {
			return true
		}
		return write(it.msg)
	}
	for {
		// Prefer being killed over writing more.
		select {
		case <-c.done:
			return
		default:
		}
		select {
		case <-c.done:
			return
		case it := <-c.ctrl:
			if !handle(it) {
				return
			}
		case it := <-c.live:
			if !handle(it) {
				return
			}
		case <-ping.C:
			if err := c.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(cfg.WriteTimeout)); err != nil {
				c.kill(websocket.CloseAbnormalClosure, "")
				return
			}
		}
	}
}

// readLoop reads and handles messages until the socket fails or the
// connection is killed.
func (c *conn) readLoop() {
	cfg := &c.r.cfg
	pongWait := 2 * cfg.PingInterval
	// Messages up to twice the limit are read and refused with an
	// answer; beyond that the WebSocket library closes with 1009.
	c.ws.SetReadLimit(int64(2 * cfg.MaxMessageLength))
	_ = c.ws.SetReadDeadline(time.Now().Add(pongWait))
	c.ws.SetPongHandler(func(string) error {
		return c.ws.SetReadDeadline(time.Now().Add(pongWait))
	})
	for {
		typ, b, err := c.ws.ReadMessage()
		if err != nil {
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout():
				c.log.Debug("client silent for too long", "timeout", pongWait)
				c.kill(websocket.CloseGoingAway, "no pong")
			default:
				if !websocket.IsCloseError(err, websocket.CloseNormalClosure, websocket.CloseGoingAway, websocket.CloseNoStatusReceived) {
					c.log.Debug("read failed", "err", err)
				}
				c.kill(websocket.CloseNormalClosure, "")
			}
			return
		}
		_ = c.ws.SetReadDeadline(time.Now().Add(pongWait))
		if typ != websocket.TextMessage {
			if c.notice("invalid: only text messages are supported") != nil {
				return
			}
			continue
		}
		if err := c.handle(b); err != nil {
			return
		}
	}
}

// handle acts on one message; an error means the connection is closed.
func (c *conn) handle(b []byte) error {
	m, err := parseClientMessage(b, &c.r.lim)
	if err != nil {
		var r *refusal
		if !errors.As(err, &r) {
			return c.notice("error: " + err.Error())
		}
		if len(b) > c.r.lim.maxMessageLength {
			if id := eventIDHint(b); id != "" {
				return c.ok(id, false, r.msg)
			}
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
			delete(c.subs, m.subID)
			c.r.hub.remove(s)
		}
		return nil
	}
	return nil
}

// allowEvent takes a token from the connection's EVENT bucket.
func (c *conn) allowEvent(now time.Time) bool {
	rate := c.r.cfg.EventsPerSecond
	if rate <= 0 {
		return true
	}
	burst := float64(max(c.r.cfg.EventBurst, 1))
	if c.lastFill.IsZero() {
		c.tokens = burst
	} else if d := now.Sub(c.lastFill).Seconds(); d > 0 {
		c.tokens = min(burst, c.tokens+d*rate)
	}
	c.lastFill = now
	if c.tokens < 1 {
		return false
	}
	c.tokens--
	return true
}

func (c *conn) handleEvent(ev *nostr.Event) error {
	r := c.r
	now := r.now()
	if !c.allowEvent(now) {
		return c.ok(ev.ID, false, "rate-limited: slow down")
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
	raw, err := encodeEvent(ev)
	if err != nil {
		return c.ok(ev.ID, false, "error: could not encode event")
	}
	if kindClass(ev.Kind) == classEphemeral {
		r.hub.broadcast(ev, raw)
		return c.ok(ev.ID, true, "")
	}
	res, err := r.store.save(c.ctx, ev, raw, exp, hasExp, unix)
	if err != nil {
		c.log.Error("save event", "id", ev.ID, "err", err)
		return c.ok(ev.ID, false, "error: could not save event")
	}
	switch res {
	case duplicate:
		return c.ok(ev.ID, true, "duplicate: already have this event")
	case superseded:
		return c.ok(ev.ID, false, "invalid: a newer version of this replaceable event is already stored")
	}
	r.hub.broadcast(ev, raw)
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

func (c *conn) handleReq(subID string, filters []*filter) error {
	r := c.r
	if old, ok := c.subs[subID]; ok {
		delete(c.subs, subID)
		r.hub.remove(old) // NIP-01: a REQ with an open id replaces it
	} else if len(c.subs) >= r.cfg.MaxSubscriptions {
		return c.closedSub(subID, fmt.Sprintf("rate-limited: too many open subscriptions (max %d)", r.cfg.MaxSubscriptions))
	}
	sub := newSubscription(c, subID, filters)
	c.subs[subID] = sub
	r.hub.add(sub) // before querying: live events now buffer in sub

	now := r.now().Unix()
	var found []storedEvent
	for _, f := range filters {
		limit := r.cfg.DefaultLimit
		if f.hasLimit {
			limit = f.limit
		}
		evs, err := r.store.query(c.ctx, f, limit, now)
		if err != nil {
			delete(c.subs, subID)
			r.hub.remove(sub)
			if c.ctx.Err() != nil {
				return errConnClosed
			}
			c.log.Error("query events", "err", err)
			return c.closedSub(subID, "error: could not query the database")
		}
		found = append(found, evs...)
	}
	if len(filters) > 1 {
		slices.SortFunc(found, func(a, b storedEvent) int {
			if a.createdAt != b.createdAt {
				return cmp.Compare(b.createdAt, a.createdAt)
			}
			return cmp.Compare(a.id, b.id)
		})
		found = slices.CompactFunc(found, func(a, b storedEvent) bool { return a.id == b.id })
	}
	sent := make(map[string]struct{}, len(found))
	for _, e := range found {
		sent[e.id] = struct{}{}
		if err := c.send(outItem{sub: sub, msg: sub.eventMessage(e.raw)}); err != nil {
			return err
		}
	}
	sub.mu.Lock()
	sub.sent = sent
	sub.mu.Unlock()
	eose, err := marshalNoEscape([]any{"EOSE", subID})
	if err != nil {
		return fmt.Errorf("encode EOSE: %w", err)
	}
	if err := c.send(outItem{sub: sub, msg: eose}); err != nil {
		return err
	}
	return c.send(outItem{flip: sub})
}

// wireEvent is the JSON form of an event the relay stores and sends.
type wireEvent struct {
	ID        string     `json:"id"`
	PubKey    string     `json:"pubkey"`
	CreatedAt int64      `json:"created_at"`
	Kind      int        `json:"kind"`
	Tags      [][]string `json:"tags"`
	Content   string     `json:"content"`
	Sig       string     `json:"sig"`
}

func encodeEvent(ev *nostr.Event) ([]byte, error) {
	tags := make([][]string, len(ev.Tags))
	for i, t := range ev.Tags {
		tags[i] = t
	}
	return marshalNoEscape(wireEvent{ev.ID, ev.PubKey, int64(ev.CreatedAt), ev.Kind, tags, ev.Content, ev.Sig})
}

// marshalNoEscape is json.Marshal without HTML escaping and without the
// trailing newline.
func marshalNoEscape(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// eventIDHint finds the id of an oversized ["EVENT", {…}] message, so the
// refusal can be an OK the publisher is waiting for. It gives "" when the
// message is not an EVENT or has no string id.
func eventIDHint(b []byte) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	want := func(d json.Delim) bool {
		t, err := dec.Token()
		return err == nil && t == d
	}
	if !want('[') {
		return ""
	}
	if t, err := dec.Token(); err != nil || t != "EVENT" {
		return ""
	}
	if !want('{') {
		return ""
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return ""
		}
		if k == "id" {
			var id string
			if dec.Decode(&id) != nil || !isLowerHex(id, 64) {
				return ""
			}
			return id
		}
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return ""
		}
	}
	return ""
}
