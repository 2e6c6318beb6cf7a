package snaphttp

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/internal/peercap"
	"github.com/snapnode/snapnode/snap"
)

// websocket handles GET /snap: a WebSocket whose text frames each carry
// one SNAP message, as the SNAP specification's WebSocket transport and
// its reference SDK's clients expect.
//
// A connection may carry several requests. They are handled in order, one
// at a time, because responses carry nothing that names their request:
// a non-streaming method is answered by exactly one frame, its response; a
// streaming one by its events, then its response. Up to MaxPending
// requests are read ahead; beyond that the connection is not read until
// one is answered. Every request is answered, errors included; a response
// or event sent to us is not. SDK clients open one connection per request.
//
// The server pings every PingInterval and closes a peer silent (no pong,
// no message) for two intervals and a connection idle for IdleTimeout. A message waiting for its share
// of BodyMemory, or for room among the requests read ahead, is waiting on
// the node, not on the peer: that time counts neither as idle nor as
// silence. A message over MaxBody, in one frame or several, is not
// handled: once the requests before it are answered, it gets the signed
// 1004 {field: "message", constraint: "maxSize", limit} a POST over it
// gets, then the close 1009 (message too big; 1001 when shutdown began
// meanwhile); its rest is read and
// dropped first, up to MaxBody more, so that the peer, still sending it,
// reads the answer rather than a reset. A request that finds no room in AnswerMemory for its answer
// (a reservation, taken before it is handled) gets the signed busy
// refusal (5003) and is not handled; an answer larger than its
// reservation that finds no room for the rest is sent abridged (see
// outbox); the connection goes on with the next request. A binary frame is not read: once
// the requests before it are answered, it gets a signed 1005, then the
// close 1003 (unsupported data).
//
// When shutdown begins, the request being handled is answered as usual
// (within ShutdownTimeout); then the message being read, when one has
// begun (its frame half received), is read to its end if that comes
// within ShutdownReadTimeout, and nothing more is read from the socket. Each
// request read ahead but not yet handled, that one included, gets, in
// order, the signed refusal 5003 {retryAfter, reason: "shutdown"}; then
// the connection closes with 1001 (going away). A message whose rest does
// not come in time gets only the close. An upgrade after that gets 503
// with the same refusal.
func (s *Server) websocket(w http.ResponseWriter, r *http.Request) {
	if !websocket.IsWebSocketUpgrade(r) {
		w.Header().Set("Upgrade", "websocket")
		writeError(w, http.StatusUpgradeRequired, snap.CodeInvalidMessage, "GET /snap is the WebSocket endpoint: upgrade to WebSocket, or POST a SNAP message", nil)
		return
	}
	if field, reason := handshakeFault(r); field != "" {
		if field == "Sec-WebSocket-Version" {
			w.Header().Set("Sec-WebSocket-Version", "13") // RFC 6455, 4.4
		}
		writeError(w, http.StatusBadRequest, snap.CodeInvalidMessage, "the WebSocket upgrade's "+field+" header: "+reason,
			map[string]any{"field": field, "reason": reason})
		return
	}
	if !s.admit(w, r) {
		return
	}
	key := peerKey(r)
	switch st := s.conns.Acquire(key); st {
	case 0:
	case http.StatusTooManyRequests:
		w.Header().Set("Retry-After", "1")
		writeError(w, st, snap.CodeRateLimitExceeded, "too many WebSocket connections from this address",
			map[string]any{"retryAfter": 1, "limit": s.cfg.MaxConnsPerPeer, "scope": "peer"})
		return
	default:
		w.Header().Set("Retry-After", "1")
		writeError(w, st, snap.CodeServiceUnavailable, "too many WebSocket connections",
			map[string]any{"retryAfter": 1, "limit": s.cfg.MaxConns, "scope": "node"})
		return
	}
	// Counted before the upgrade, while net/http still tracks the
	// request, so that Serve, which waits for the group after
	// http.Server.Shutdown returns, cannot miss it.
	s.mu.Lock()
	select {
	case <-s.draining:
		s.mu.Unlock()
		s.conns.Release(key)
		refuseShutdown(w)
		return
	default:
	}
	s.wsGroup.Add(1)
	s.mu.Unlock()
	release := func() {
		// The slot first: once Serve returns, every slot is free.
		s.conns.Release(key)
		s.wsGroup.Done()
	}

	// From here the connection is the WebSocket's (hijacked), or closed
	// once the upgrader's refusal is written: ServeHTTP must not read what
	// is left of the request's body (discardBody) after a hijack.
	w.Header().Set("Connection", "close")
	hj := &countingHijacker{ResponseWriter: w, onRead: s.socketRead}
	c, err := s.upgrader.Upgrade(hj, r, http.Header{"SNAP-Version": {snap.ProtocolVersion}})
	if err != nil {
		release()
		return // the upgrader answered with an HTTP error
	}
	wc := &wsConn{s: s, c: c, sock: hj.conn, key: key, remote: r.RemoteAddr, waited: make(chan struct{}, 1)}
	wc.ctx, wc.cancel = context.WithCancel(s.base)
	wc.readCtx, wc.stopWaiting = context.WithCancel(wc.ctx)
	s.mu.Lock()
	s.ws[wc] = struct{}{}
	s.mu.Unlock()
	// Served from a goroutine of its own, so that this one returns and
	// net/http lets go of what it keeps for a request until its handler
	// returns (a 4 KiB write buffer, the request, the handler's grown
	// stack): an idle WebSocket holds none of it.
	go func() {
		defer release()
		defer func() {
			s.mu.Lock()
			delete(s.ws, wc)
			s.mu.Unlock()
		}()
		defer wc.cancel()
		defer recoverConn(s.cfg.Logger, c.NetConn(), wc.remote)
		wc.serve()
	}()
}

// handshakeFault names the header of a WebSocket upgrade that the upgrader
// would refuse and what it must hold ("" when none is at fault), so that
// the refusal names its field and rule as every other one does: the
// upgrader's own says so only in its message.
func handshakeFault(r *http.Request) (field, reason string) {
	version := false
	for _, v := range r.Header.Values("Sec-WebSocket-Version") {
		for t := range strings.SplitSeq(v, ",") {
			version = version || strings.TrimSpace(t) == "13"
		}
	}
	if !version {
		return "Sec-WebSocket-Version", "want 13, RFC 6455's version"
	}
	if key, err := base64.StdEncoding.DecodeString(r.Header.Get("Sec-WebSocket-Key")); err != nil || len(key) != 16 {
		return "Sec-WebSocket-Key", "want 16 bytes in base64"
	}
	return "", ""
}

// recoverConn, deferred by a WebSocket's goroutine, logs a panic and
// closes the connection, as net/http does for a panic in a handler's
// goroutine, where the connection was served before.
func recoverConn(log *slog.Logger, c net.Conn, remote string) {
	if v := recover(); v != nil {
		log.Error("snaphttp: panic serving a WebSocket", "remote", remote, "panic", v, "stack", string(debug.Stack()))
		c.Close()
	}
}

// closeAllWS cuts every WebSocket connection (forced shutdown).
func (s *Server) closeAllWS() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for wc := range s.ws {
		// Closed before its requests are cancelled: a handler that returns
		// on the cancel finds no connection to answer on.
		wc.c.NetConn().Close()
		wc.cancel()
	}
}

// wsConn is one WebSocket connection.
type wsConn struct {
	s      *Server
	c      *websocket.Conn
	key    netip.Addr
	remote string
	ctx    context.Context
	cancel context.CancelFunc
	// binary is set by the reader when it stopped at a binary frame,
	// and tooLarge when it stopped at a message over MaxBody, before it
	// closes its channel of requests.
	binary   bool
	tooLarge bool
	// waiting is set while the reader waits for a message's share of
	// BodyMemory, and waited takes a token when that wait ends: the
	// peer is not idle then, whatever the time since its last request.
	waiting atomic.Bool
	waited  chan struct{}
	// readCtx ends when the reader is stopped (stopReading), at
	// shutdown, or with ctx: a wait for BodyMemory ends with it.
	readCtx     context.Context
	stopWaiting context.CancelFunc
	// sock is the socket under c: it counts the reads that brought
	// bytes, so that the reader, once stopped, knows whether the header
	// of a message it begins came before the stop (still in its buffer)
	// or after.
	sock *countingConn
	// deadline guards the read deadline: once stopped is set (shutdown
	// began), the deadline is finishBy while the reader is in a message
	// it finishes (finish: one it was in when stopped, or one whose
	// header was in its buffer then), so that it reads that message to
	// its end, and in the past otherwise: the reader reads nothing more
	// from the socket.
	deadline    sync.Mutex
	stopped     bool
	inMessage   bool
	finish      bool
	finishBy    time.Time
	readsAtStop uint64
}

// countingConn counts the reads of its Conn that brought bytes.
type countingConn struct {
	net.Conn
	reads atomic.Uint64
	// onRead, when set (by tests), is called after each read that
	// brought bytes (n), once it is counted.
	onRead func(n int)
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.reads.Add(1)
		if c.onRead != nil {
			c.onRead(n)
		}
	}
	return n, err
}

// countingHijacker is a ResponseWriter whose Hijack, which the upgrader
// calls, returns the connection as a countingConn (conn, once hijacked).
// The WebSocket reads through it because the upgrader has a
// ReadBufferSize (wsReadBuffer) of its own: without one it would reuse
// net/http's reader, on the connection underneath.
//
// A peer that sent data after its upgrade request, before the upgrade was
// answered (RFC 6455, 4.1: a client waits for the server's answer), is
// refused here: the upgrader would close the connection without a word.
// Hijack answers it 400 with the SNAP error naming the rule (early), closes
// the connection and fails, and the upgrader's Error answers nothing more.
type countingHijacker struct {
	http.ResponseWriter
	conn   *countingConn
	onRead func(n int) // countingConn's
	early  bool
}

func (h *countingHijacker) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, brw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	if brw.Reader.Buffered() > 0 {
		h.early = true
		hd := make(http.Header, 4)
		hd.Set("Content-Type", "application/json")
		hd.Set("Cache-Control", "no-store")
		hd.Set("SNAP-Version", snap.ProtocolVersion)
		peercap.WriteRefusal(c, http.StatusBadRequest, hd, errorBody(http.StatusBadRequest, snap.CodeInvalidMessage,
			"data came after the WebSocket upgrade request before it was answered: a client waits for the 101 before it sends (RFC 6455, 4.1)",
			map[string]any{"field": "message", "reason": "sent before the upgrade was answered"}))
		c.Close()
		return nil, nil, errEarlyData
	}
	h.conn = &countingConn{Conn: c, onRead: h.onRead}
	return h.conn, brw, nil
}

// errEarlyData fails the Hijack of an upgrade whose peer sent data before
// it was answered (see countingHijacker).
var errEarlyData = errors.New("snaphttp: data before the WebSocket upgrade was answered")

func (h *countingHijacker) Unwrap() http.ResponseWriter { return h.ResponseWriter }

// shutdownRetryAfter is the retryAfter, in seconds, of the refusals sent
// once shutdown began: a node that is restarted is back within seconds.
const shutdownRetryAfter = 5

// shutdownRefusal is the error answering a request the node will not
// handle because it is shutting down: over WebSocket, each request read
// ahead but not yet handled when shutdown begins (signed, before the
// close 1001); over HTTP, a POST or an upgrade that comes after (see
// refuseShutdown).
func shutdownRefusal() *snap.Error {
	return &snap.Error{Code: snap.CodeServiceUnavailable,
		Message: "the node is shutting down: the request was not handled; retry later",
		Data:    map[string]any{"retryAfter": shutdownRetryAfter, "reason": "shutdown"}}
}

// refuseShutdown answers an HTTP request that comes once shutdown began:
// 503 with Retry-After and the shutdown's refusal; its connection then
// closes (keep-alives are off).
func refuseShutdown(w http.ResponseWriter) {
	e := shutdownRefusal()
	w.Header().Set("Retry-After", fmt.Sprint(shutdownRetryAfter))
	writeError(w, http.StatusServiceUnavailable, e.Code, e.Message, e.Data)
}

// binaryRefusal is the error answering a binary frame: SNAP messages are
// JSON text, one a text frame. The code is SNAP's for an unsupported
// media type, its data the spec's {provided, supported}, as the HTTP
// transport's 415 answers a body of another Content-Type.
func binaryRefusal() *snap.Error {
	return &snap.Error{Code: snap.CodeContentTypeNotSupported,
		Message: "a binary WebSocket frame: SNAP messages are JSON in text frames",
		Data:    map[string]any{"provided": "binary", "supported": []string{"text"}}}
}

// closeUnsupported is the text of the close 1003 after a binary frame.
const closeUnsupported = "binary frame: SNAP messages are JSON text frames"

// tooLargeRefusal is the error answering a message over limit (MaxBody):
// the code and data of the validator's refusal of a message over its size
// (1004, field "message", constraint "maxSize"), and the limit, as a POST
// over it is answered with its 413. what names the message: "the body",
// "the message".
func tooLargeRefusal(what string, limit int64) *snap.Error {
	return &snap.Error{Code: snap.CodeInvalidPayload, Message: fmt.Sprintf("%s exceeds the limit of %d bytes", what, limit),
		Data: map[string]any{"field": "message", "constraint": "maxSize", "limit": limit}}
}

// closeTooBig is the text of the close 1009 after a message over MaxBody.
const closeTooBig = "message over the size limit"

// errTooLarge is the reader's failure on a message over MaxBody.
var errTooLarge = errors.New("snaphttp: WebSocket message over the size limit")

func (wc *wsConn) serve() {
	s, c := wc.s, wc.c
	log := s.cfg.Logger.With("remote", wc.remote)
	// No read limit of the WebSocket's own: it would close 1009 at once,
	// before the requests read ahead are answered and without a SNAP
	// answer. readMessage bounds each message (errTooLarge).

	reqs := make(chan []byte, s.cfg.MaxPending)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		defer close(reqs)
		wc.read(reqs, log)
	}()

	o := s.newOutbox(wc.ctx, wc.key, messageJSON, func() {
		wc.cancel()
		c.NetConn().Close() // unblocks a write in progress; the reader stops too
	}, nil)
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		wc.write(o)
	}()

	code, text := websocket.CloseNormalClosure, ""
	returned := false // false in the deferred function: a panic
	// Deferred, so that a panic answering a request (recovered by the
	// connection's goroutine) still ends the writer and gives back the
	// messages read ahead: kept, they would hold their share of
	// BodyMemory for ever.
	defer func() {
		if !returned {
			code, text = websocket.CloseInternalServerErr, "internal error"
		}
		o.close()
		<-writerDone
		if o.failed() == nil {
			_ = c.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(code, text), time.Now().Add(time.Second))
		}
		wc.cancel()
		c.Close()
		<-readerDone
		for raw := range reqs { // read, never answered
			s.bodies.release(wc.key, int64(len(raw)))
		}
		if err := o.failed(); err != nil && !errors.Is(err, context.Canceled) {
			log.Debug("snaphttp: WebSocket closed", "err", err)
		}
	}()
	idle := time.NewTimer(s.cfg.IdleTimeout)
	defer idle.Stop()
loop:
	for {
		select {
		case <-s.draining:
			// Before any request read ahead is taken: the request
			// being handled when shutdown began was answered, the
			// others are refused.
			wc.refuseReadAhead(o, reqs)
			code, text = websocket.CloseGoingAway, "server shutting down"
			break loop
		default:
		}
		select {
		case raw, ok := <-reqs:
			if !ok {
				// The peer closed, went silent, or sent a binary frame
				// or a message over MaxBody.
				switch {
				case wc.binary:
					o.final(wc.ctx, s.cfg.Handler.Refuse(binaryRefusal()))
					code, text = websocket.CloseUnsupportedData, closeUnsupported
				case wc.tooLarge:
					o.final(wc.ctx, s.cfg.Handler.Refuse(tooLargeRefusal("the message", s.cfg.MaxBody)))
					code, text = websocket.CloseMessageTooBig, closeTooBig
				}
				break loop
			}
			wc.handle(o, raw)
			if o.failed() != nil {
				break loop
			}
			// A request refused for want of AnswerMemory got the busy
			// refusal: the exchange is over, and the next request is
			// answered as any other (the requests read ahead are not
			// dropped with the connection).
			o.unbusy()
			idle.Reset(s.cfg.IdleTimeout)
		case <-wc.waited:
			// The reader waited for memory, not for the peer: the peer's
			// time starts again.
			idle.Reset(s.cfg.IdleTimeout)
		case <-idle.C:
			if len(reqs) > 0 || wc.waiting.Load() || len(wc.waited) > 0 {
				// A message came as the time ran out, or waits for its
				// share of BodyMemory (or just got it): it is answered,
				// not dropped with the connection.
				select {
				case <-wc.waited:
				default:
				}
				idle.Reset(s.cfg.IdleTimeout)
				continue
			}
			text = "idle"
			break loop
		case <-s.draining:
			continue // refused above
		case <-wc.ctx.Done():
			break loop
		}
	}
	returned = true
}

// read passes the peer's messages to reqs until the connection fails or
// the peer sends a binary frame (wc.binary; nothing after it is read) or
// a message over MaxBody (wc.tooLarge; its rest is read and dropped, up
// to MaxBody more, nothing after it). A pong or any message extends the
// peer's time to 2 × PingInterval.
func (wc *wsConn) read(reqs chan<- []byte, log *slog.Logger) {
	c := wc.c
	wait := 2 * wc.s.cfg.PingInterval
	wc.extendRead(wait)
	c.SetPongHandler(func(string) error { wc.extendRead(wait); return nil })
	for {
		data, binary, err := wc.readMessage()
		if binary {
			log.Debug("snaphttp: a binary WebSocket frame; answered 1005 and closed with 1003")
			wc.binary = true
			return
		}
		if err != nil {
			if errors.Is(err, errTooLarge) {
				// Refused by the serve loop, at shutdown too (see
				// refuseReadAhead).
				log.Debug("snaphttp: WebSocket message over the limit; answered 1004 and closed", "limit", wc.s.cfg.MaxBody)
				wc.tooLarge = true
				return
			}
			if wc.readStopped() {
				return // shutdown: the serve loop refuses what was read
			}
			if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
				log.Debug("snaphttp: WebSocket peer silent; closing", "timeout", wait)
			}
			wc.cancel()
			return
		}
		select {
		case reqs <- data:
		case <-wc.ctx.Done():
			wc.s.bodies.release(wc.key, int64(len(data)))
			return
		}
		// The peer's time runs from now: while the queue was full
		// nothing was read, its pongs included.
		wc.extendRead(wait)
	}
}

// extendRead sets the read deadline d from now, unless the reader was
// stopped.
func (wc *wsConn) extendRead(d time.Duration) {
	wc.deadline.Lock()
	defer wc.deadline.Unlock()
	if !wc.stopped {
		_ = wc.c.SetReadDeadline(time.Now().Add(d))
	}
}

// stopReading stops the reader at shutdown: it reads the message it has
// begun to its end, within ShutdownReadTimeout (a wait for its share of
// BodyMemory ends, and it is read and dropped), and no more from the
// socket after it (the frames its buffer already holds whole are still
// read); then it closes its channel of requests without cancelling the
// connection, whose requests read ahead are refused.
func (wc *wsConn) stopReading() {
	wc.deadline.Lock()
	wc.stopped = true
	wc.finishBy = time.Now().Add(wc.s.cfg.ShutdownReadTimeout)
	wc.readsAtStop = wc.sock.reads.Load()
	wc.finish = wc.inMessage
	wc.setStoppedDeadline()
	wc.deadline.Unlock()
	wc.stopWaiting()
}

// setStoppedDeadline sets the read deadline of a stopped reader: finishBy
// in a message it finishes, else in the past. The caller holds
// wc.deadline.
func (wc *wsConn) setStoppedDeadline() {
	if wc.inMessage && wc.finish {
		_ = wc.c.SetReadDeadline(wc.finishBy)
	} else {
		_ = wc.c.SetReadDeadline(time.Unix(1, 0))
	}
}

// beginMessage and endMessage tell when the reader is in a message: once
// its first frame's header is read, until the message is read whole (or
// its read failed). A stopped reader reads to its end, by finishBy, a
// message whose header it had received (into its buffer) before the
// stop, whether the stop came before or after it took that header from
// its buffer; then nothing more from the socket. A frame whose header
// had only partly come is not waited for, nor one whose header came with
// a read from the socket after the stop (the rest of a message it
// finished brought it): a peer that goes on sending is not read on until
// finishBy.
func (wc *wsConn) beginMessage() { wc.markMessage(true) }
func (wc *wsConn) endMessage()   { wc.markMessage(false) }

func (wc *wsConn) markMessage(in bool) {
	wc.deadline.Lock()
	defer wc.deadline.Unlock()
	wc.inMessage = in
	if wc.stopped {
		wc.finish = in && wc.sock.reads.Load() == wc.readsAtStop
		wc.setStoppedDeadline()
	}
}

func (wc *wsConn) readStopped() bool {
	wc.deadline.Lock()
	defer wc.deadline.Unlock()
	return wc.stopped
}

// refuseReadAhead answers, once shutdown began, each request read ahead
// and not yet handled, and the one the reader finishes (see stopReading),
// in order, by the signed shutdown refusal (5003 {retryAfter, reason:
// "shutdown"}), and a binary frame or a message over MaxBody that
// stopped the reader by its own refusal: every request the node read
// gets an answer before the close 1001. The refusals are written as any answer is,
// within the shutdown's time (ShutdownTimeout).
func (wc *wsConn) refuseReadAhead(o *outbox, reqs <-chan []byte) {
	s := wc.s
	wc.stopReading()
	for raw := range reqs { // closed once the reader stopped
		s.bodies.release(wc.key, int64(len(raw)))
		if o.failed() != nil {
			continue
		}
		o.final(wc.ctx, s.cfg.Handler.Refuse(shutdownRefusal()))
		o.unbusy()
	}
	switch {
	case wc.binary:
		o.final(wc.ctx, s.cfg.Handler.Refuse(binaryRefusal()))
	case wc.tooLarge:
		o.final(wc.ctx, s.cfg.Handler.Refuse(tooLargeRefusal("the message", s.cfg.MaxBody)))
	}
}

// readMessage reads the peer's next text message, once its share of
// BodyMemory is free: it holds MaxBody of it while reading, then keeps
// the message's length. The caller releases that once the message is
// answered. Waiting leaves the message in the socket, which slows only
// this peer. A binary message is reported (binary) and left unread.
//
// A message over MaxBody fails with errTooLarge once MaxBody+1 bytes of
// it are read; its rest is read and dropped first, up to MaxBody more
// bytes, so that a peer still sending it can read the refusal and the
// close rather than a reset.
//
// Once the reader is stopped (shutdown), a message waiting for its share
// is read and dropped instead: it will be refused, not handled. It is
// returned empty, holding no bytes (but counted among the peer's
// messages, as the caller releases it).
func (wc *wsConn) readMessage() (data []byte, binary bool, err error) {
	s := wc.s
	typ, r, err := wc.c.NextReader()
	if err != nil {
		return nil, false, err
	}
	if typ == websocket.BinaryMessage {
		return nil, true, nil
	}
	wc.beginMessage()
	defer wc.endMessage()
	if s.bodies.tryAcquire(wc.key, s.cfg.MaxBody) != "" {
		if err := wc.awaitMemory(); err != nil {
			if !wc.readStopped() {
				return nil, false, err
			}
			// Within MaxBody and finishBy.
			if n, err := io.Copy(io.Discard, io.LimitReader(r, pastLimit(s.cfg.MaxBody))); err != nil {
				return nil, false, err
			} else if n > s.cfg.MaxBody {
				return nil, false, errTooLarge
			}
			s.bodies.ref(wc.key)
			return []byte{}, false, nil
		}
	}
	data, err = s.readWebSocket(r)
	if err != nil {
		s.bodies.release(wc.key, s.cfg.MaxBody)
		if errors.Is(err, errTooLarge) {
			// Its rest, within bounds: the peer, still sending it, may
			// not read the answer until it is sent.
			if _, derr := io.CopyN(io.Discard, r, s.cfg.MaxBody); derr != nil && !errors.Is(derr, io.EOF) {
				return nil, false, derr
			}
		}
		return nil, false, err
	}
	s.bodies.shrink(wc.key, s.cfg.MaxBody-int64(len(data)))
	return data, false, nil
}

// awaitMemory waits for a message's share of BodyMemory (MaxBody) while
// the serve loop knows it (waiting, then waited). The wait is the
// node's, not the peer's: nothing is read meanwhile, the peer's pongs
// included, so its time to send the rest and the idle time-out start
// again once the memory is free.
func (wc *wsConn) awaitMemory() error {
	s := wc.s
	wc.waiting.Store(true)
	// Cleared once waited holds its token, so that the serve loop, when
	// its idle time-out runs out, sees one or the other.
	defer wc.waiting.Store(false)
	if err := s.bodies.acquire(wc.readCtx, wc.key, s.cfg.MaxBody); err != nil {
		return err
	}
	wc.extendRead(2 * s.cfg.PingInterval)
	select {
	case wc.waited <- struct{}{}:
	default:
	}
	return nil
}

// readWebSocket reads a WebSocket message of at most MaxBody bytes
// (errTooLarge past that, once MaxBody+1 bytes are read) into
// a buffer of wsMessageBuffer bytes borrowed for the read, and returns a
// copy of its own length, which the request keeps (queued, then given to
// the Handler); a longer message is read on into a buffer of its own, as
// readAll reads. Before, each message was read into a buffer with room
// for MaxBody (256 KiB by default), then copied: a quarter of a MiB
// allocated for every request, however small. An idle WebSocket holds no
// buffer: it is borrowed once a message has come.
func (s *Server) readWebSocket(r io.Reader) ([]byte, error) {
	bp := s.wsReads.Get(wsMessageBuffer)
	defer s.wsReads.Put(bp)
	lent := (*bp)[:0:min(int64(len(*bp)), pastLimit(s.cfg.MaxBody))]
	// Bounded as a POST's body is: the read fails once past MaxBody,
	// the buffer still within MaxBody+1 bytes. A reader that ended there
	// instead (io.LimitReader) would have readInto double its full
	// buffer to look for more.
	b, err := readInto(http.MaxBytesReader(nil, io.NopCloser(r), s.cfg.MaxBody), s.cfg.MaxBody, lent)
	if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
		return nil, errTooLarge
	}
	if err != nil {
		return nil, err
	}
	if cap(b) <= cap(lent) { // still the lent buffer: it grows only larger
		return bytes.Clone(b), nil
	}
	return fit(b, nil)
}

// wsMessageBuffer is the size of the buffers the WebSocket readers borrow
// to read a message (see readWebSocket): a small request's whole.
const wsMessageBuffer = 4096

// write writes the queued frames and the pings until the queue closes.
// After a failure it only drains the queue.
func (wc *wsConn) write(o *outbox) {
	c, cfg := wc.c, &wc.s.cfg
	ping := time.NewTicker(cfg.PingInterval)
	defer ping.Stop()
	for {
		select {
		case f, ok := <-o.ch:
			if !ok {
				return
			}
			if o.failed() != nil {
				o.taken(f)
				continue
			}
			o.write(func() error {
				_ = c.SetWriteDeadline(time.Now().Add(cfg.WriteTimeout))
				return c.WriteMessage(websocket.TextMessage, f.b)
			})
			o.taken(f)
		case <-ping.C:
			if o.failed() != nil {
				continue
			}
			o.write(func() error { return c.WriteControl(websocket.PingMessage, nil, time.Now().Add(cfg.WriteTimeout)) })
		}
	}
}

// handle answers one request: it waits for the peer's rate-limit token,
// then runs the Handler, whose events and response are queued on o. It
// gives back raw's share of BodyMemory, even when the Handler panics.
func (wc *wsConn) handle(o *outbox, raw []byte) {
	s := wc.s
	defer s.bodies.release(wc.key, int64(len(raw)))
	for {
		ok, wait := s.limits.Allow(wc.key.String())
		if ok {
			break
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-wc.ctx.Done():
			t.Stop()
			o.fail(wc.ctx.Err())
			return
		}
	}
	// Room for the answer is reserved before the request is handled, as
	// a POST's is: refused for want of it, the request was not handled.
	if scope := o.begin(wc.ctx, s.answers.reservation(len(raw))); scope != "" {
		if wc.ctx.Err() != nil {
			o.fail(wc.ctx.Err())
			return
		}
		o.refuseBusy(scope)
		return
	}
	defer o.end()
	s.active.Add(1)
	defer s.active.Add(-1)
	ctx, cancel := s.streamContext(wc.ctx, snap.IsStreamRequest(raw))
	defer cancel()
	send := func(m *snap.Message) error { return o.send(ctx, m) }
	o.final(wc.ctx, s.cfg.Handler.Serve(ctx, snap.Inbound{Raw: raw, Transport: "ws", MaxSize: s.cfg.MaxResponse}, send))
}

// wsReadBuffer is the size of a WebSocket's read buffer, which it holds
// while idle: room for a frame's header and a control frame (at most 125
// bytes), and a small message whole.
const wsReadBuffer = 512
