package snaphttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/snapnode/snapnode/internal/textcut"
	"io"
	"math"
	"mime"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/snapnode/snapnode/snap"
)

// post handles POST /snap: one SNAP message in the body. The response is
// the signed SNAP response with HTTP 200, SNAP errors included (they are
// in payload.error); with Accept: text/event-stream it is an SSE stream of
// the events, then the response. HTTP errors are only for what is not a
// SNAP exchange: 429 when the peer is rate limited or the bodies held at
// once would exceed BodyMemory (before the body is read), 413 for a body
// that is too large, 400 for one that is unreadable or not JSON, 403 for
// one a browser page of another origin sent (Config.AllowedOrigins), 415
// for one whose Content-Type names another format (see jsonContentType),
// 503 with Retry-After once shutdown began (the shutdown's 5003, see
// refuseShutdown; a request whose handling began before is answered),
// and 503 with Retry-After when AnswerMemory has no room for the
// answer's reservation (see answerBudget.reservation), before the
// request is handled (see refuseAnswer): a 503 always means the request
// was not handled. The answer is then serialized, the response let go,
// and the serialized form holds its share of AnswerMemory until it is
// written or its write times out; one larger than its reservation that
// finds no room for the rest is sent abridged (see Server.abridge), or,
// for a service/call, as 500 with 5001 {limit: "answer_memory",
// handled: true}.
//
// A message that gets no answer — a response or an event posted to us,
// which SDK peers never do — gets 202 Accepted with an empty body.
//
// A service/call is answered as a service answers (the SNAP specification
// makes a service's answer its own, not a SNAP message): the
// reply object itself, or {"error": …} with 401, 403, 404, 400, 429 or
// 5xx (see serviceStatus), not a SNAP message. Over WebSocket it is a
// signed SNAP response like any other.
func (s *Server) post(w http.ResponseWriter, r *http.Request) {
	if !s.pageAllowed(r) {
		s.refuseOrigin(w, r)
		return
	}
	s.allowPage(w, r)
	select {
	case <-s.draining:
		refuseShutdown(w)
		return
	default:
	}
	if ct := r.Header.Get("Content-Type"); !jsonContentType(ct) {
		writeError(w, http.StatusUnsupportedMediaType, snap.CodeContentTypeNotSupported,
			"a SNAP message is posted as Content-Type: application/json",
			map[string]any{"provided": textcut.Prefix(ct, 256), "supported": []string{"application/json"}})
		return
	}
	if ce := r.Header.Values("Content-Encoding"); !identityCoding(ce) {
		// RFC 9110 §15.5.16: a content coding the server does not take
		// is 415, naming those it takes in Accept-Encoding.
		w.Header().Set("Accept-Encoding", "identity")
		writeError(w, http.StatusUnsupportedMediaType, snap.CodeContentTypeNotSupported,
			"a SNAP message is posted as it is, in no content coding (gzip, deflate, …)",
			map[string]any{"field": "Content-Encoding", "provided": textcut.Prefix(strings.Join(ce, ", "), 256), "supported": []string{"identity"}})
		return
	}
	if !s.admit(w, r) {
		return
	}
	body, release, ok := s.readBody(w, r)
	if !ok {
		return
	}
	defer release()
	key := peerKey(r)
	// Room for the answer is reserved before the request is handled: a
	// request refused for want of it was not handled, and its peer may
	// send it again. Refused after, a message/send would have made its
	// task, and the peer, told to retry, a second.
	held := s.answers.reservation(len(body))
	if scope := s.answers.take(r.Context(), key, held); scope != "" {
		refuseAnswer(w, scope)
		return
	}
	defer func() { s.answers.release(key, held) }()
	s.active.Add(1)
	defer s.active.Add(-1)
	in := snap.Inbound{Raw: body, Transport: "http", MaxSize: s.cfg.MaxResponse}
	if acceptsEventStream(r.Header.Values("Accept")) {
		s.postSSE(w, r, in, held)
		held = 0 // the stream's, given back by it
		return
	}
	// A plain POST of a streaming method gets its final response alone,
	// as the spec lets a server without SSE answer.
	resp := s.cfg.Handler.Serve(r.Context(), in, nil) // no events made
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	if resp == nil {
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var whole bool
	if resp.Method == snap.MethodServiceCall && resp.Type == snap.TypeResponse {
		if held, whole = s.answers.grow(r.Context(), key, held, s.answers.size(len(resp.Payload)), func() {}); !whole {
			writeUnsent(w)
			return
		}
		writeServiceReply(w, resp)
		return
	}
	b, err := messageJSON(resp)
	if err != nil {
		s.cfg.Logger.Error("snaphttp: response does not serialize", "err", err)
		writeError(w, http.StatusInternalServerError, snap.CodeInternal, "the response could not be serialized", nil)
		return
	}
	closing := forged(resp)
	// An answer larger than its reservation waits for room for the rest;
	// meanwhile its serialized form is what it holds (the response let
	// go), and without room it is sent abridged, made before the wait.
	var brief []byte
	held, whole = s.answers.grow(r.Context(), key, held, s.answers.size(cap(b)), func() {
		if m := s.abridge(resp); m != nil {
			if brief, err = messageJSON(m); err != nil {
				s.cfg.Logger.Error("snaphttp: abridged response does not serialize", "err", err)
			}
		}
		resp = nil
	})
	resp = nil
	if !whole {
		if b = brief; b == nil {
			writeUnsent(w)
			return
		}
	}
	brief = nil
	// The peer's time to take it runs from now, not from before it was
	// serialized or waited for its room.
	_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	if closing {
		h.Set("Connection", "close")
	}
	w.Write(b)
}

// jsonContentType reports whether a POST of Content-Type ct may carry a
// SNAP message: application/json, as the SNAP specification's HTTP
// transport posts and SDK peers send, or a type of JSON's own (+json,
// RFC 6839); none at all, which RFC 9110 lets the server read as it
// finds (a peer that sends none was served before this check); and
// text/plain, which a browser page's fetch sends without a CORS
// preflight (a page of Config.AllowedOrigins may also send
// application/json after the preflight /snap answers for it). A charset, when given, is UTF-8, JSON's (RFC 8259).
// The body must still be JSON (400 if not).
func jsonContentType(ct string) bool {
	if ct == "" {
		return true
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return false
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return false
	}
	return mt == "application/json" || mt == "text/plain" ||
		strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// identityCoding reports whether the Content-Encoding values name no
// coding but identity: the body is read as it comes, never inflated.
func identityCoding(values []string) bool {
	for _, v := range values {
		for c := range strings.SplitSeq(v, ",") {
			if c = strings.TrimSpace(c); c != "" && !strings.EqualFold(c, "identity") {
				return false
			}
		}
	}
	return true
}

// forged reports whether resp answers a request whose signature did not
// verify (2001): its sender is not the peer it names, and its connection
// is closed once it has the answer, so that a forger holds no idle
// connection (a goroutine and 8 KiB of buffers) between forgeries. Under
// 10,000 forged POSTs from 100 addresses the flood's idle connections
// held about 3 MB of the node's memory until their idle timeout.
func forged(resp *snap.Message) bool {
	return resp.Type == snap.TypeResponse && resp.ErrorCode() == snap.CodeSignatureInvalid
}

// readBody reads a posted message of at most MaxBody bytes within
// ReadTimeout, answering 413 when it is larger, 400 when it cannot be
// read, and 429 with Retry-After,
// before reading, when the bodies held at once would go over BodyMemory
// or the peer's share of it.
// release gives back the body's share of BodyMemory; the caller calls it
// once the body is no longer used.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) (body []byte, release func(), ok bool) {
	size := r.ContentLength
	switch {
	case size > s.cfg.MaxBody:
		s.refuseTooLarge(w)
		return nil, nil, false
	case size < 0:
		size = s.cfg.MaxBody
	}
	key := peerKey(r)
	if scope := s.bodies.tryAcquire(key, size); scope != "" {
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, snap.CodeServiceUnavailable, "too many messages are being read at once; retry later",
			map[string]any{"retryAfter": 1, "limit": "body_memory", "scope": scope})
		return nil, nil, false
	}
	release = func() { s.bodies.release(key, size) }
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.cfg.ReadTimeout))
	body, err := readAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBody), size)
	// A refusal of the body is written within WriteTimeout of now,
	// however long the body took.
	_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		s.refuseTooLarge(w)
	case err != nil:
		// The body ended early, never came in ReadTimeout, or was
		// malformed (chunked): what is left of it cannot be told from a
		// next request. The connection closes once the 400 is written;
		// kept, net/http would first read the rest of the body to
		// discard it, and wait for ever for bytes that never come.
		w.Header().Set("Connection", "close")
		data := map[string]any{"field": "message", "reason": "incomplete"}
		if ne, ok := errors.AsType[net.Error](err); ok && ne.Timeout() {
			data["reason"], data["readTimeout"] = "timeout", s.cfg.ReadTimeout.Seconds()
		}
		writeError(w, http.StatusBadRequest, snap.CodeInvalidMessage, "the body could not be read: "+readFault(err), data)
	case !json.Valid(body):
		msg, data := notJSON(body)
		writeError(w, http.StatusBadRequest, snap.CodeInvalidMessage, msg, data)
	default:
		// Streams outlast any read deadline; the server's background
		// read must not time out while one runs.
		_ = rc.SetReadDeadline(time.Time{})
		if n := int64(len(body)); n < size {
			// A body of unknown length held MaxBody while it was read;
			// it keeps its own length only.
			s.bodies.shrink(key, size-n)
			size = n
		}
		return body, release, true
	}
	release()
	return nil, nil, false
}

// readFault is what the refusal of a body whose read failed says of
// the failure: the error's own words, without the sockets a
// *net.OpError names ("read tcp 10.0.0.5:7448->…: i/o timeout"): the
// node's own address, behind NAT or in a container one its peers do not
// know, is none of theirs.
func readFault(err error) string {
	if oe, ok := errors.AsType[*net.OpError](err); ok && oe.Err != nil {
		return oe.Err.Error()
	}
	return err.Error()
}

// notJSON is the message and data of the 400 answering a body that is
// not JSON: the validator's syntax refusal, naming the field where the
// body goes wrong ("message" for the whole) and the reason, as a
// WebSocket peer's signed answer to the same bytes says.
func notJSON(body []byte) (msg string, data map[string]any) {
	reason := "not JSON"
	data = map[string]any{"field": "message", "reason": reason}
	var e *snap.Error
	if _, err := snap.ParseThrough(body, snap.StageSyntax); errors.As(err, &e) && e.Data != nil {
		if r, ok := e.Data["reason"].(string); ok {
			reason = strings.TrimPrefix(r, "not JSON: ")
		}
		data = e.Data
	}
	return "the body is not JSON: " + reason, data
}

// refuseTooLarge answers a body over MaxBody: 413, as the SNAP
// specification's security practices say, with the code and data of the
// validator's refusal of a message over its size (1004, field "message",
// constraint "maxSize"), and the limit.
func (s *Server) refuseTooLarge(w http.ResponseWriter) {
	// The rest of the body is not read: the connection closes.
	w.Header().Set("Connection", "close")
	e := tooLargeRefusal("the body", s.cfg.MaxBody)
	writeError(w, http.StatusRequestEntityTooLarge, e.Code, e.Message, e.Data)
}

// readAll reads r to its end. Its buffer starts with room for size bytes
// and at most doubles past that, never beyond size+1 bytes of capacity
// while r stays within size, so that a body holds no more memory than
// its share of BodyMemory (io.ReadAll's growth can overshoot it). What it
// returns holds little more than its length: a message of unknown length,
// read with room for the largest (size is MaxBody), keeps only its own
// length of BodyMemory once read, and so must hold no more memory.
func readAll(r io.Reader, size int64) ([]byte, error) {
	return fit(readInto(r, size, nil))
}

// fit is b, or a copy of it when its buffer holds much more than its
// length (see readAll).
func fit(b []byte, err error) ([]byte, error) {
	if err == nil && cap(b)-len(b) > len(b)/8+64 {
		b = bytes.Clone(b)
	}
	return b, err
}

// readInto reads r to its end into b, from its start, and past its
// capacity into a buffer that grows as readAll's; a nil b is first a
// buffer with room for size bytes (up to 512 KiB).
func readInto(r io.Reader, size int64, b []byte) ([]byte, error) {
	if b == nil {
		b = make([]byte, 0, min(size, 512<<10)+1)
	}
	b = b[:0]
	for {
		if len(b) == cap(b) {
			grown := make([]byte, len(b), min(2*int64(cap(b)), pastLimit(size)))
			if cap(grown) == cap(b) {
				grown = make([]byte, len(b), 2*cap(b)) // r went past size
			}
			copy(grown, b)
			b = grown
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}

// pastLimit is size+1, the room that tells a body over size, or size
// when that is as large as an int64 goes (size+1 would wrap around to a
// negative capacity: a panic on the first read).
func pastLimit(size int64) int64 {
	if size == math.MaxInt64 {
		return size
	}
	return size + 1
}

// acceptsEventStream reports whether the Accept header values name
// text/event-stream (parameters and case aside) with a weight above 0: a
// weight of 0 says the type is not acceptable (RFC 9110, section 12.4.2).
func acceptsEventStream(values []string) bool {
	for _, v := range values {
		for part := range strings.SplitSeq(v, ",") {
			mt, params, err := mime.ParseMediaType(strings.TrimSpace(part))
			if err == nil && mt == "text/event-stream" {
				if q, err := strconv.ParseFloat(params["q"], 64); err == nil && q == 0 {
					continue
				}
				return true
			}
		}
	}
	return false
}

// messageJSON is m's one-line JSON form. A serialized message never holds
// a raw line break (strings escape them, the payload is canonical), which
// SSE framing relies on; one that did would be a bug, refused here. Its
// buffer is sized for m at once (answerCap), so that it holds little more
// than its length: its capacity is what it holds of AnswerMemory.
func messageJSON(m *snap.Message) ([]byte, error) {
	return appendMessage(make([]byte, 0, answerCap(m)), m)
}

// answerCap is room for m serialized: its payload and what goes around
// it (id, addresses, method, timestamp, signature: about 450 bytes).
func answerCap(m *snap.Message) int { return len(m.Payload) + 1024 }

// appendMessage appends messageJSON(m) to b.
func appendMessage(b []byte, m *snap.Message) ([]byte, error) {
	start := len(b)
	b, err := m.AppendJSON(b)
	if err != nil {
		return nil, err
	}
	if bytes.ContainsAny(b[start:], "\r\n") {
		return nil, errors.New("snaphttp: a serialized message holds a line break")
	}
	return b, nil
}

// sseFrame is m as one SSE event: "data: <JSON>\n\n", LF only.
func sseFrame(m *snap.Message) ([]byte, error) {
	out := make([]byte, 0, answerCap(m)+8)
	out = append(out, "data: "...)
	out, err := appendMessage(out, m)
	if err != nil {
		return nil, err
	}
	return append(out, "\n\n"...), nil
}

// postSSE streams the answer to in as server-sent events: each event
// message, then the final response, each flushed at once, then the body
// ends. A stream request (snap.IsStreamRequest) has its headers written
// and flushed at once, before its handler runs (a message/stream's
// proposals run first, and a proxy must not take the silence for a dead
// peer); any other message's go with its first frame, and one with no
// answer gets 202 Accepted.
//
// held is what the request reserved of AnswerMemory before it was
// handled: the outbox's, given back once its last frame is written.
func (s *Server) postSSE(w http.ResponseWriter, r *http.Request, in snap.Inbound, held int64) {
	rc := http.NewResponseController(w)
	stream := snap.IsStreamRequest(in.Raw)
	ctx, cancel := s.streamContext(r.Context(), stream)
	defer cancel()
	o := s.newOutbox(r.Context(), peerKey(r), sseFrame, func() {
		cancel()
		_ = rc.SetWriteDeadline(time.Now()) // unblocks a write in progress
	}, cancel)
	o.hold(held)
	started := false
	start := func() {
		started = true
		h := w.Header()
		h.Set("Content-Type", "text/event-stream")
		h.Set("Cache-Control", "no-cache")
		h.Set("Connection", "keep-alive")
		h.Set("X-Accel-Buffering", "no")
		w.WriteHeader(http.StatusOK)
	}
	if stream {
		start()
		o.write(func() error { return s.writeFlush(w, rc, nil) })
	}
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		defer o.close()
		defer o.end()
		send := func(m *snap.Message) error { return o.send(ctx, m) }
		o.final(r.Context(), s.cfg.Handler.Serve(ctx, in, send))
	}()
	for f := range o.ch {
		if o.failed() != nil {
			o.taken(f)
			continue // drain, so that the producer never waits
		}
		if !started {
			start()
		}
		o.write(func() error { return s.writeFlush(w, rc, f.b) })
		o.taken(f)
	}
	<-produced
	if err := o.failed(); err != nil && !errors.Is(err, context.Canceled) {
		s.cfg.Logger.Debug("snaphttp: SSE stream ended early", "remote", r.RemoteAddr, "err", err)
	}
	if !started && o.failed() == nil {
		_ = rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
		w.WriteHeader(http.StatusAccepted)
	}
}

// writeFlush writes frame (none: only the headers) within WriteTimeout
// and flushes it.
func (s *Server) writeFlush(w http.ResponseWriter, rc *http.ResponseController, frame []byte) error {
	if err := rc.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		return err
	}
	if len(frame) > 0 {
		if _, err := w.Write(frame); err != nil {
			return err
		}
	}
	return rc.Flush()
}
