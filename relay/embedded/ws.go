package embedded

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/internal/lowerhex"
	"github.com/snapnode/snapnode/internal/origins"
	"github.com/snapnode/snapnode/internal/peercap"
)

// wsTransport carries a conn over a WebSocket, as NIP-01 JSON.
type wsTransport struct {
	c     *conn
	ws    *websocket.Conn
	batch *batchConn
}

func (r *Relay) serveWebSocket(w http.ResponseWriter, req *http.Request) {
	if why := r.checkOrigin(req); why != "" {
		http.Error(w, why, http.StatusForbidden)
		return
	}
	key := peercap.Key(req.RemoteAddr)
	held := req.Context().Value(placeHeld{}) != nil
	if code, why := r.admit(key, held); code != 0 {
		http.Error(w, why, code)
		return
	}
	release := func() {
		if !held {
			r.release(key)
		}
	}
	bw := &batchWriter{ResponseWriter: w, pool: &r.bursts}
	ws, err := r.upgrader.Upgrade(bw, req, nil)
	if err != nil {
		release()
		return // the upgrader answered with an HTTP error
	}
	t := &wsTransport{ws: ws, batch: bw.conn}
	c := r.newConn(t, r.log.With("remote", req.RemoteAddr))
	c.peer = peerName(key)
	t.c = c
	if !r.register(c) {
		defer release()
		c.cancel()
		_ = ws.WriteControl(websocket.CloseMessage,
			websocket.FormatCloseMessage(websocket.CloseGoingAway, "relay shutting down"), time.Now().Add(time.Second))
		_ = ws.Close()
		return
	}
	// Served from a goroutine of its own, so that this one returns and
	// net/http lets go of what it keeps for a request until its handler
	// returns (a 4 KiB write buffer, the request, the handler's grown
	// stack): an idle client holds none of it. What the goroutine does
	// after it is counted finished is return: closeConns, which shutdown
	// and Close wait on, sees it all done.
	go c.serve(func() {
		defer c.recoverPanic()
		c.log.Debug("client connected")
		t.readLoop()
	}, func() {
		// The close frame was sent by the writer as it stopped, and the
		// socket closed, unless a panic left the writer unable to: the
		// socket is closed here in any case.
		_ = ws.NetConn().Close()
		release()
		c.log.Debug("client disconnected", "code", c.closeCode, "reason", c.closeText)
	})
}

// recoverPanic, deferred by a WebSocket's reader, logs a panic and ends
// the connection with 1011, as any other end of it: serve then stops
// the writer and unregisters the client. net/http, which recovered a
// panic in the handler's goroutine where the reader ran before, closed
// nothing of a hijacked connection, so that one panic made shutdown
// wait for ever for the client.
func (c *conn) recoverPanic() {
	if v := recover(); v != nil {
		c.log.Error("panic serving a client", "panic", v, "stack", string(debug.Stack()))
		c.kill(websocket.CloseInternalServerErr, "internal error")
	}
}

// wsReadBuffer is the size of a client's read buffer, which it holds
// while idle: room for a frame's header and a control frame (at most 125
// bytes), and a small message whole; a larger message is read directly
// into a buffer lent for it (see readLimited and Relay.reads).
const wsReadBuffer = 512

// checkOrigin says why a WebSocket upgrade from a web page's origin is
// refused (see Config.AllowedOrigins), or "" when it is not.
func (r *Relay) checkOrigin(req *http.Request) string {
	o := req.Header.Get("Origin")
	p := r.pages.Load()
	if o == "" || p.list.Has(o) || origins.Loopback(o) {
		return ""
	}
	if !p.given && !r.onLoopback(req) {
		return "" // a public relay
	}
	if r.refusedOrigin.CompareAndSwap(false, true) {
		r.log.Warn("a web page of another origin refused; list the origins of pages that may use the relay in relay_allowed_origins (snapnode relay --allowed-origin); logged once",
			"origin", o, "remote", req.RemoteAddr)
	}
	return fmt.Sprintf("a web page of origin %q may not use this relay: it takes pages of loopback origins and of relay_allowed_origins only", o)
}

// onLoopback reports whether the relay listens on a loopback address:
// the listener's that Serve was given, else the address the request's
// connection came to.
func (r *Relay) onLoopback(req *http.Request) bool {
	a := r.Addr()
	if a == nil {
		a, _ = req.Context().Value(http.LocalAddrContextKey).(net.Addr)
	}
	t, ok := a.(*net.TCPAddr)
	return ok && t.IP.IsLoopback()
}

// placeHeld is the key of a request context's value on the connections
// Serve accepted, which hold their place under the caps from their
// accept to their close.
type placeHeld struct{}

// admit takes a place for a WebSocket client of peer key, or says with
// which HTTP status and text it is refused; release gives the place back.
// A client whose connection has held its place since its accept (held)
// takes none.
func (r *Relay) admit(key netip.Addr, held bool) (int, string) {
	r.mu.Lock()
	closed := r.closed
	r.mu.Unlock()
	if closed {
		return http.StatusServiceUnavailable, "relay closed"
	}
	if held {
		return 0, ""
	}
	if code := r.sockets.Acquire(key); code != 0 {
		return code, r.tooMany(key, code)
	}
	return 0, ""
}

// tooMany is the text of a refusal over a cap with status code: 429, the
// peer key's; 503, the total.
func (r *Relay) tooMany(key netip.Addr, code int) string {
	if code == http.StatusTooManyRequests {
		return fmt.Sprintf("too many connections from %s (max %d)", key, r.cfg.MaxConnectionsPerIP)
	}
	return fmt.Sprintf("too many connections (max %d)", r.cfg.MaxConnections)
}

// refuseConn answers a connection Serve accepted over a cap, as http.Error
// answers an upgrade over one, with Retry-After.
func (r *Relay) refuseConn(c net.Conn, key netip.Addr, code int) {
	h := make(http.Header, 3)
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Retry-After", "1")
	peercap.WriteRefusal(c, code, h, []byte(r.tooMany(key, code)+"\n"))
}

func (r *Relay) release(key netip.Addr) { r.sockets.Release(key) }

// peerName is conn.peer for a WebSocket client of peer key, shared by
// the peer's connections; "" on loopback, which has no per-peer bounds.
func peerName(key netip.Addr) string {
	if key.IsLoopback() {
		return ""
	}
	return key.String()
}

// readLoop reads and handles messages until the socket fails or the
// connection is killed.
func (t *wsTransport) readLoop() {
	c := t.c
	cfg := &c.r.cfg
	pongWait := 2 * cfg.PingInterval
	// Messages up to twice the limit are read and refused with an
	// answer (keeping no more than the limit of them: see
	// readLimited); beyond that the WebSocket library closes with 1009.
	t.ws.SetReadLimit(int64(2 * cfg.MaxMessageLength))
	_ = t.ws.SetReadDeadline(time.Now().Add(pongWait))
	// reading: a message has begun and is not read whole yet. It must be,
	// within pongWait of its first frame: a pong proves the client alive,
	// not its message coming, and a client that answered pings (or sent
	// pongs of its own) between the fragments of a message it never ended
	// held what it had sent of it, up to MaxMessageLength, for as long as
	// it liked. The pong handler runs in this goroutine, within
	// NextReader and the message's reads.
	reading := false
	t.ws.SetPongHandler(func(string) error {
		if reading {
			return nil
		}
		return t.ws.SetReadDeadline(time.Now().Add(pongWait))
	})
	// room counts what the message being read keeps; given back once it
	// is handled, or here if handling it panicked.
	var room readRoom
	defer room.giveBack()
	for {
		reading = false
		typ, r, err := t.ws.NextReader()
		// The buffer is borrowed once a message has come, and given back
		// once it is handled: an idle reader, waiting in NextReader,
		// holds none.
		var buf *[]byte
		var b, tail []byte
		var size int64
		if err == nil {
			reading = true
			_ = t.ws.SetReadDeadline(time.Now().Add(pongWait))
			buf = c.r.reads.Get(readBufferSize)
			room = readRoom{c: c}
			b, tail, size, err = readKept(r, cfg.MaxMessageLength, *buf, room.grow)
		}
		if err != nil {
			room.giveBack()
			c.r.reads.Put(buf)
			var ne net.Error
			switch {
			case errors.As(err, &ne) && ne.Timeout() && reading:
				c.r.slowLog.Log(context.Background(), c.log, c.r.now(), slog.LevelInfo, "disconnecting slow client", "reason", "message not received whole in time", "timeout", pongWait)
				c.kill(websocket.ClosePolicyViolation, "too slow: message not received whole in time")
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
		_ = t.ws.SetReadDeadline(time.Now().Add(pongWait))
		if typ != websocket.TextMessage {
			room.giveBack()
			c.r.reads.Put(buf)
			if c.notice("invalid: only text messages are supported") != nil {
				return
			}
			continue
		}
		// Refused for want of room only if something was let go (the
		// message may have ended where the room did) and the message is
		// not too large anyway, which handle says.
		if room.refused && size > int64(len(b)) && size <= int64(cfg.MaxMessageLength) {
			err = c.refuse(room.refusal(b, tail))
		} else {
			err = t.handle(b, tail, size)
		}
		room.giveBack()
		c.r.reads.Put(buf) // nothing handle made keeps b: see parseMessage
		if err != nil {
			return
		}
	}
}

// readLimited reads r to its end, keeping at most limit+1 bytes of it:
// enough to tell a message over limit, which is refused, and to find an
// oversized EVENT's id (see eventIDHint), while what is past them is let
// go as it is read. It returns what it kept and how many bytes it read.
// Reading a message whole before refusing it held up to twice the limit
// (more, in the slack of a growing buffer) for each connection sending
// one.
//
// What it keeps is read into buf (from its start) as far as buf's
// capacity goes; a longer message moves to a buffer of its own, which
// grows, so that buf is never more than written into.
func readLimited(r io.Reader, limit int, buf []byte) ([]byte, int64, error) {
	b, _, n, err := readKept(r, limit, buf, nil)
	return b, n, err
}

// readKept is readLimited asking grow, when it is not nil, for room for
// each n bytes more it would keep past buf: when grow refuses, what it
// kept so far is all it keeps, and the rest of the message is let go.
// Of what it lets go it keeps the last tailKept bytes, tail (nil when
// the message was kept whole): where an oversized EVENT's id is when its
// members come in nostr-tools's order, after the content (see
// wholeRefusal).
func readKept(r io.Reader, limit int, buf []byte, grow func(n int) bool) (b, tail []byte, size int64, err error) {
	keep := limit + 1
	b = buf[:0:min(keep, cap(buf))]
	if cap(b) == 0 {
		b = make([]byte, 0, min(keep, readBufferSize))
	}
	for len(b) < keep {
		if len(b) == cap(b) {
			n := min(2*cap(b), keep)
			if grow != nil && !grow(n-cap(b)) {
				break
			}
			b = append(make([]byte, 0, n), b...)
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil, int64(len(b)), nil
		}
		if err != nil {
			return nil, nil, 0, err
		}
	}
	tail, rest, err := readTail(r)
	if err != nil {
		return nil, nil, 0, err
	}
	return b, tail, int64(len(b)) + rest, nil
}

// tailKept is how much of the end of a message not kept whole readKept
// keeps: an event's id and what follows it (its sig) take about 210
// bytes as nostr-tools writes them.
const tailKept = 512

// readTail reads r to its end and returns its last tailKept bytes (or
// fewer, if it has fewer) and how many bytes it read. It holds a small
// buffer for the call: only a message not kept whole comes here.
func readTail(r io.Reader) ([]byte, int64, error) {
	buf := make([]byte, 8*tailKept)
	used := 0
	var n int64
	for {
		if used == len(buf) { // slide: keep the last tailKept bytes
			used = copy(buf, buf[used-tailKept:used])
		}
		m, err := r.Read(buf[used:])
		used += m
		n += int64(m)
		if err == io.EOF {
			return buf[max(0, used-tailKept):used], n, nil
		}
		if err != nil {
			return nil, 0, err
		}
	}
}

// readRoom counts, for one message of c being read, the bytes its
// reader keeps beyond its lent buffer against c's peer's
// Config.MaxReadingBytesPerIP and the relay's MaxReadingBytes.
type readRoom struct {
	c       *conn
	counted int64
	// refused: a bound was in the way, the one of every peer together
	// if whole; the message was read to its end and not kept whole.
	refused, whole bool
}

// grow counts n more bytes, and reports whether they fit.
func (m *readRoom) grow(n int) bool {
	if m.c.peer == "" {
		return true
	}
	got, _, whole := m.c.r.reading.take(m.c.peer, int64(n), false)
	m.counted += got
	if got < int64(n) {
		m.refused, m.whole = true, whole
		return false
	}
	return true
}

// giveBack gives back what grow counted: the message is handled.
func (m *readRoom) giveBack() {
	if m.counted > 0 {
		m.c.r.reading.give(m.c.peer, m.counted)
		m.counted = 0
	}
}

// refusal is the answer to a message refused for want of room, of which
// b is what was kept and tail the end of what was not (see readKept): see
// wholeRefusal.
func (m *readRoom) refusal(b, tail []byte) *refusal {
	cfg := &m.c.r.cfg
	msg := fmt.Sprintf("rate-limited: the messages your address is sending hold too much memory on this relay while they are read (max %d bytes); try again later", cfg.MaxReadingBytesPerIP)
	if m.whole {
		msg = fmt.Sprintf("rate-limited: the messages being sent to this relay hold too much memory while they are read (max %d bytes); try again later", cfg.MaxReadingBytes)
	}
	return wholeRefusal(b, tail, &m.c.r.lim, msg)
}

// readBufferSize is the size of the buffers the readers borrow
// (Relay.reads): a small message's whole, most of what a node's peer
// sends. Before, each message took a new buffer of up to 4 KiB: a
// quarter of all the bytes a node allocated for a peer's request.
const readBufferSize = 4096

// handle parses and acts on one message, b, of size bytes (of which b
// keeps at most the limit and one, and tail the end of the rest: see
// readKept); an error means the connection is closed.
func (t *wsTransport) handle(b, tail []byte, size int64) error {
	return t.c.process(parseMessage(b, tail, size, &t.c.r.lim))
}

// parseMessage parses one message, b, of size bytes (see handle). What
// it returns keeps none of b's bytes (every string in it is a copy,
// every refusal's text formatted anew), so that the reader lends b again
// once the message is handled (see Relay.reads; TestParseKeepsNothing
// holds it to that).
func parseMessage(b, tail []byte, size int64, lim *limits) (*clientMessage, error) {
	if size > int64(lim.maxMessageLength) {
		// Too large to parse: answer an EVENT with the OK its
		// publisher waits for, a REQ with its CLOSED.
		return nil, wholeRefusal(b, tail, lim, fmt.Sprintf("invalid: message too large (%d > %d bytes)", size, lim.maxMessageLength))
	}
	return parseClientMessage(b, lim)
}

func (t *wsTransport) sendsJSON() bool { return true }

// inline: the reader writes its answers itself when the writer is idle.
func (t *wsTransport) inline() bool { return true }

// ack: OKs are written in turn with everything else.
func (t *wsTransport) ack(string, bool, string) bool { return false }

// direct: a WebSocket client's events are written by the writer only.
func (t *wsTransport) direct(outItem) bool { return false }

func (t *wsTransport) write(it outItem) error {
	if it.msg.label == labelEvent {
		return t.writeEvent(it)
	}
	b, err := it.msg.json()
	if err != nil {
		t.c.log.Error("encode message", "label", it.msg.label, "err", err)
		return nil
	}
	_ = t.ws.SetWriteDeadline(time.Now().Add(t.c.r.cfg.WriteTimeout))
	return t.ws.WriteMessage(websocket.TextMessage, b)
}

// writeEvent writes ["EVENT",<subscription id>,<event>] as one frame,
// put together in a buffer borrowed for the write (the socket copies it
// into its burst, or has sent it, before WriteMessage returns).
func (t *wsTransport) writeEvent(it outItem) error {
	raw, err := it.msg.ev.json()
	if err != nil {
		return nil // an event that could not be encoded
	}
	bp, _ := t.c.r.frames.Get().(*[]byte)
	if bp == nil {
		bp = new([]byte)
	}
	b := append(append(append((*bp)[:0], it.sub.prefix...), raw...), ']')
	_ = t.ws.SetWriteDeadline(time.Now().Add(t.c.r.cfg.WriteTimeout))
	err = t.ws.WriteMessage(websocket.TextMessage, b)
	if cap(b) <= maxBatch { // a buffer a large event grew is let go
		*bp = b[:0]
		t.c.r.frames.Put(bp)
	}
	return err
}

func (t *wsTransport) begin() { t.batch.begin() }

func (t *wsTransport) flush() error {
	_ = t.ws.NetConn().SetWriteDeadline(time.Now().Add(t.c.r.cfg.WriteTimeout))
	return t.batch.end()
}

func (t *wsTransport) pingInterval() time.Duration { return t.c.r.cfg.PingInterval }

func (t *wsTransport) ping() error {
	return t.ws.WriteControl(websocket.PingMessage, nil, time.Now().Add(t.c.r.cfg.WriteTimeout))
}

// abort: the close frame is sent afterwards only if the socket still
// takes it.
func (t *wsTransport) abort() { _ = t.ws.NetConn().SetWriteDeadline(time.Now()) }

func (t *wsTransport) killed(int, string) {}

// finish sends the close frame (best effort) and closes the socket, which
// stops the reader.
func (t *wsTransport) finish(code int, text string) {
	deadline := time.Now().Add(time.Second)
	_ = t.ws.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), deadline)
	_ = t.ws.Close()
}

// wholeRefusal is the answer to a message refused as a whole, too large
// or too malformed to parse, with msg, so that a client waiting on it
// learns why (NIP-01): OK false for an EVENT whose id can be found (see
// eventIDHint; in tail, the end of a message not kept whole, when it
// comes after what was kept, as nostr-tools orders an event's members),
// CLOSED for a REQ whose subscription id can be read and the relay could
// hold, a NOTICE otherwise.
func wholeRefusal(head, tail []byte, lim *limits, msg string) *refusal {
	if id := eventIDHint(head); id != "" {
		return okFalse(id, "%s", msg)
	}
	if tail != nil && eventObject(head) != nil {
		if id := tailEventID(tail); id != "" {
			return okFalse(id, "%s", msg)
		}
	}
	if id := reqIDHint(head, lim); id != "" {
		return closed(id, "%s", msg)
	}
	return notice("%s", msg)
}

// eventObject returns a decoder of b, a message that begins as
// ["EVENT", {, past the event's '{'; nil when b does not begin so.
func eventObject(b []byte) *json.Decoder {
	dec := json.NewDecoder(bytes.NewReader(b))
	want := func(d json.Delim) bool {
		t, err := dec.Token()
		return err == nil && t == d
	}
	if !want('[') {
		return nil
	}
	if t, err := dec.Token(); err != nil || t != "EVENT" {
		return nil
	}
	if !want('{') {
		return nil
	}
	return dec
}

// reqIDHint finds the subscription id of a ["REQ", id, …] message too
// large or too malformed to parse, so that the refusal can be the
// CLOSED its client waits for. It gives "" when the message is not a
// REQ, or its id is not one the relay could hold (see checkSubID).
func reqIDHint(b []byte, lim *limits) string {
	dec := json.NewDecoder(bytes.NewReader(b))
	if t, err := dec.Token(); err != nil || t != json.Delim('[') {
		return ""
	}
	if t, err := dec.Token(); err != nil || t != "REQ" {
		return ""
	}
	t, err := dec.Token()
	id, ok := t.(string)
	if err != nil || !ok || checkSubID(id, "REQ", lim) != nil {
		return ""
	}
	return id
}

// tailEventID finds, in tail, the end of an EVENT message not kept
// whole, the last member "id" whose value is 64 lowercase hex
// characters. A member begins after a ',' or '{': the text of a string
// (the content, a tag) cannot hold one, its quotes being escaped.
func tailEventID(tail []byte) string {
	space := func(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }
	for end := len(tail); ; {
		i := bytes.LastIndex(tail[:end], []byte(`"id"`))
		if i < 0 {
			return ""
		}
		end = i
		j := i - 1
		for j >= 0 && space(tail[j]) {
			j--
		}
		if j < 0 || tail[j] != ',' && tail[j] != '{' {
			continue
		}
		k := i + len(`"id"`)
		for k < len(tail) && space(tail[k]) {
			k++
		}
		if k >= len(tail) || tail[k] != ':' {
			continue
		}
		for k++; k < len(tail) && space(tail[k]); k++ {
		}
		if k+66 > len(tail) || tail[k] != '"' || tail[k+65] != '"' {
			continue
		}
		if id := string(tail[k+1 : k+65]); lowerhex.Valid(id, 64) {
			return id
		}
	}
}

// eventIDHint finds the id of an ["EVENT", {…}] message too large or too
// malformed to parse, so the refusal can be an OK the publisher is
// waiting for. It gives "" when the message is not an EVENT or has no
// id of 64 lowercase hex characters before what cannot be read.
func eventIDHint(b []byte) string {
	dec := eventObject(b)
	if dec == nil {
		return ""
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			return ""
		}
		if k == "id" {
			var id string
			if dec.Decode(&id) != nil || !lowerhex.Valid(id, 64) {
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
