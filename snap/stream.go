package snap

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
)

// StreamHandlerFunc handles a verified streaming request (message/stream,
// tasks/resubscribe). It calls emit with each event payload, in order, and
// returns the final response payload or an error (as HandlerFunc). emit
// returns an error (wrapping ErrStreamClosed) once the transport is gone;
// the handler then returns. emit is safe to call from one goroutine at a
// time, and only until the handler returns.
//
// emit may wait for the peer, as a write to a connection does: over SSE
// and WebSocket, while the stream's queue is full, up to the transport's
// write timeout (a peer that takes nothing for that long is cut off and
// emit fails), or until ctx ends; over Nostr, while the event is
// published. So a handler feeds its stream from its own goroutine (the
// handler's), never from one that feeds other streams too, and holds no
// lock that others wait for while it calls emit: a slow peer then slows
// only its own stream. Events shared between streams reach each through
// a queue of its own that the publisher never waits on (tasks.Broker
// drops a subscriber that falls a whole queue behind).
type StreamHandlerFunc func(ctx context.Context, req *Verified, emit func(payload any) error) (any, error)

// ErrStreamClosed is what emit returns once the stream's transport failed
// or its handler returned.
var ErrStreamClosed = errors.New("snap: stream closed")

// HandleStream registers h for a streaming method, one IsStreamMethod
// names: the set every transport routes by. It panics like Handle, and on
// a method that does not stream.
func (r *Router) HandleStream(method string, h StreamHandlerFunc) {
	if !IsStreamMethod(method) {
		panic("snap: " + method + " is not a streaming method")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checkNew(method)
	r.streams[method] = h
}

// IsStream reports whether method was registered with HandleStream.
func (r *Router) IsStream(method string) bool {
	_, ok := r.LookupStream(method)
	return ok
}

// LookupStream returns the stream handler of method.
func (r *Router) LookupStream(method string) (StreamHandlerFunc, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.streams[method]
	return h, ok
}

// Serve implements Handler: it handles one inbound message as Respond
// does. For a streaming method each event payload the handler emits is
// sent through send as a signed Message (type "event", the method echoed,
// to = the requester, from = the node), in order, before the final
// response is returned. For any other method it is Respond. send is called from one goroutine at a
// time, and may wait for the peer (see StreamHandlerFunc); when it fails,
// the handler's ctx is canceled and Stream still returns the final
// response (the caller may drop it). It returns nil when
// Respond would.
//
// Every event is kept within the transport's limit (Inbound.MaxSize, else
// MaxResponseSize): a payload that is a
// Shrinker is shrunk until it fits; one that still does not fit is not
// sent (and logged), since the final response carries the whole task.
// Responses to streaming methods are never kept for retries, as
// message/send results are.
func (s *Server) Serve(ctx context.Context, in Inbound, send func(*Message) error) *Message {
	return s.observed(ctx, in, send)
}

// stream runs a stream handler; events go to send, or nowhere when send
// is nil. settle settles the request's claim once the handler returned
// with err (see Server.settleClaim), and may replace its answer: a
// handler whose request's record is left to it (Config.ClaimMethods)
// writes it with its first effect, before its first event.
func (s *Server) stream(ctx context.Context, h StreamHandlerFunc, v *Verified, send func(*Message) error, lim limit, tm *timing,
	settle func(err error) (*Message, bool)) *Message {
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	e := &emitter{s: s, v: v, send: send, cancel: cancel, limit: lim.size}
	payload, err := s.callStream(sctx, h, v, e.emit)
	e.close()
	if resp, replaced := settle(err); replaced {
		return resp
	}
	if err != nil {
		return s.reply(v.From, v.Method, nil, err, lim)
	}
	tm.result(payload)
	return s.reply(v.From, v.Method, payload, nil, lim)
}

// callStream runs h as call does: a panic becomes 5001.
func (s *Server) callStream(ctx context.Context, h StreamHandlerFunc, v *Verified, emit func(any) error) (payload any, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.streamPanicLog.Log(ctx, s.cfg.Logger, s.cfg.Now(), slog.LevelError, "snap stream handler panicked", "method", v.Method, "from", v.From, "panic", r)
			payload, err = nil, &Error{Code: CodeInternal, Message: "internal error"}
		}
	}()
	return h(ctx, v, emit)
}

// emitter turns a handler's event payloads into signed event messages.
type emitter struct {
	s      *Server
	v      *Verified
	send   func(*Message) error // nil: events are discarded
	cancel context.CancelFunc
	limit  int // of the transport, bytes of one event (0: none)

	mu     sync.Mutex
	err    error // the first failure of send, or ErrStreamClosed
	closed bool
}

func (e *emitter) emit(payload any) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	switch {
	case e.err != nil:
		return e.err
	case e.closed:
		return ErrStreamClosed
	case e.send == nil:
		return nil
	}
	m, err := e.s.sign(TypeEvent, e.v.From, e.v.Method, payload, e.limit)
	if err != nil {
		// The event is lost, not the stream: the final response holds
		// the whole task.
		e.s.cfg.Logger.Warn("snap stream event not sent", "method", e.v.Method, "to", e.v.From, "err", err)
		return nil
	}
	if err := e.send(m); err != nil {
		e.err = fmt.Errorf("%w: %w", ErrStreamClosed, err)
		e.cancel()
		return e.err
	}
	return nil
}

// close makes later calls of emit fail: the handler has returned.
func (e *emitter) close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.closed = true
}
