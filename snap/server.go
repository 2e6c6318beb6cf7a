package snap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/logcap"
)

// HandlerFunc handles a verified request. It returns the response payload
// (any value that marshals to a JSON object, typically {"task": …}) or an
// error; an *Error is sent to the requester as it is, any other error as
// 5001 Internal without its text.
type HandlerFunc func(ctx context.Context, req *Verified) (any, error)

// Router maps methods to handlers. Handlers are registered before serving;
// Handle panics on a method name SNAP does not allow, a streaming method
// or a second registration, which are programming errors.
type Router struct {
	mu      sync.RWMutex
	m       map[string]HandlerFunc
	streams map[string]StreamHandlerFunc
}

// NewRouter returns an empty Router.
func NewRouter() *Router {
	return &Router{m: make(map[string]HandlerFunc), streams: make(map[string]StreamHandlerFunc)}
}

// Handle registers h for method. A streaming method (IsStreamMethod)
// takes HandleStream: Handle panics on one.
func (r *Router) Handle(method string, h func(ctx context.Context, req *Verified) (any, error)) {
	if IsStreamMethod(method) {
		panic("snap: " + method + " streams; register it with HandleStream")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.checkNew(method)
	r.m[method] = h
}

// checkNew panics on a method name SNAP does not allow or one already
// registered, as a plain or a streaming method; r.mu is held.
func (r *Router) checkNew(method string) {
	if checkMethod(method) != nil {
		panic("snap: invalid method name " + method)
	}
	_, dup := r.m[method]
	_, dupStream := r.streams[method]
	if dup || dupStream {
		panic("snap: second handler for " + method)
	}
}

// Lookup returns the handler of method. For a streaming method it is the
// stream handler with its events discarded: it returns the final response
// payload only.
func (r *Router) Lookup(method string) (HandlerFunc, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	if h, ok := r.m[method]; ok {
		return h, true
	}
	sh, ok := r.streams[method]
	if !ok {
		return nil, false
	}
	return func(ctx context.Context, req *Verified) (any, error) {
		return sh(ctx, req, func(any) error { return nil })
	}, true
}

// Methods returns the registered methods, plain and streaming, sorted.
func (r *Router) Methods() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.m)+len(r.streams))
	for m := range r.m {
		out = append(out, m)
	}
	for m := range r.streams {
		out = append(out, m)
	}
	slices.Sort(out)
	return out
}

// Shrinker is implemented by response payloads that can be made smaller
// when a transport cannot carry them whole, a task by dropping its oldest
// history. Shrink returns false when nothing more can go.
type Shrinker interface {
	Shrink() bool
}

// TaskCarrier is implemented by response payloads that carry one task
// (tasks' responses to message/send, tasks/get and tasks/cancel): the
// task's id and state. When such an answer is too large for its
// transport, the 5001 that replaces it names the task in data.taskId, so
// that the requester can read it with tasks/get over a transport that
// carries it; the log line of an answer names the task and its state
// without decoding the response again.
type TaskCarrier interface {
	TaskID() string
	TaskState() string
}

// ServerConfig configures a Server.
type ServerConfig struct {
	Key       *identity.Key
	Network   identity.Network // of the address responses are sent from
	Validator *Validator       // its Config.Self should be the server's address
	Router    *Router
	Logger    *slog.Logger
	Now       func() time.Time
	// MaxResponseSize bounds each serialized response and stream event
	// of a transport that declares no bound of its own (Inbound.MaxSize);
	// 0: none.
	MaxResponseSize int
	// Results keeps message/send results to answer a retried request
	// with the original result (default: a MemoryResultStore of 10,000).
	Results ResultStore
	// Observer, when set, is told of every message answered (metrics).
	Observer Observer
	// RequestTimeout, when above 0, bounds the handling of a request that
	// does not stream, its validation included, up to its answer: past
	// it the handler's context ends (the database calls waiting are
	// abandoned) and a handler that fails for it is answered 5003 with
	// retryAfter (ErrTimedOut's answer), its claim settled as any 5003's.
	// A streaming method has bounds of its own.
	RequestTimeout time.Duration
	// SelfBounded lists the methods whose handlers bound their own time,
	// as service/call's services do, each by its own bound: RequestTimeout
	// bounds their validation, not their handler.
	SelfBounded []string
}

// Observer is told of each answered message: the method answered (as the
// response echoes it), the SNAP error code of the answer (0 for a
// result), the time validation took and the time the handler took (0 when
// none ran). It must be safe for concurrent use and quick.
type Observer interface {
	Observe(method string, code int, verify, handle time.Duration)
}

// Server answers SNAP requests: it validates each inbound message, routes
// requests to their handler, and always returns a signed response, errors
// included, so a peer never waits for a time-out because its message was
// bad. Responses and events that arrive are never routed: they get no
// answer. Streaming methods (Router.HandleStream) send their events
// through Stream before the final response. A Server is transport-neutral
// and safe for concurrent use.
type Server struct {
	cfg     ServerConfig
	addr    string
	refused refusals
	// The lines of requests whose handler panicked or failed with an
	// error that is not SNAP's, bounded: a peer decides how many
	// requests it sends.
	panicLog, streamPanicLog, failedLog logcap.Limiter
}

// NewServer returns a Server for cfg.
func NewServer(cfg ServerConfig) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Results == nil {
		cfg.Results = NewMemoryResultStore(10_000)
	}
	return &Server{cfg: cfg, addr: cfg.Key.Address(cfg.Network), refused: refusals{counts: make(map[int]int64)}}
}

// Address returns the address the server answers from.
func (s *Server) Address() string { return s.addr }

// Inbound is a message as a transport received it.
type Inbound struct {
	Raw []byte
	// Signer, when set, is the x-only key the transport authenticated
	// the sender with (a Nostr event's pubkey); from must be its P2TR
	// address, else 2003.
	Signer *[32]byte
	// Via, when set, names this delivery uniquely and unforgeably (the id
	// of a Nostr event whose signature the transport verified). The
	// replay record keeps it, so that the same delivery arriving again —
	// at this process or at a replica sharing the replay store — is
	// recognized and not answered twice (see ErrRedelivered), while the
	// same message in a new delivery, a peer's retry, is answered.
	Via string
	// Transport names the way the message came, for the log and for the
	// error of an answer too large for it: "nostr", "http", "ws".
	Transport string
	// Late marks a delivery that another process may have answered
	// already without recording it (a Nostr request a replica took up
	// because no replay record named it): it is answered only if it is
	// recorded here, and a failure before that (its validation, its
	// sender's rate) gets no answer, since its owner would have sent the
	// same one.
	Late bool
	// MaxSize is the largest serialized response or stream event the
	// transport carries (NIP-44's 65,535 bytes of plaintext on Nostr, a
	// configured cap on HTTP and WebSocket); 0 takes the server's
	// MaxResponseSize. A larger answer is shrunk (Shrinker) or replaced
	// by 5001 naming the size and the limit.
	MaxSize int
}

// limit is the size bound of the answers to in.
func (s *Server) limit(in Inbound) limit {
	n := in.MaxSize
	if n <= 0 {
		n = s.cfg.MaxResponseSize
	}
	return limit{size: n, transport: in.Transport}
}

// limit is the transport's bound on one answer, and its name for errors.
type limit struct {
	size      int
	transport string
}

// Respond is Serve for a caller that takes no events: it returns the
// signed response to send back, or nil when the message claims to be a
// response or an event, which is never answered, or when its delivery
// was already taken (ErrRedelivered).
func (s *Server) Respond(ctx context.Context, in Inbound) *Message {
	return s.observed(ctx, in, nil)
}

// observed is serve, told to the Observer and to the log (answered).
func (s *Server) observed(ctx context.Context, in Inbound, send func(*Message) error) *Message {
	var tm timing
	start := time.Now()
	resp := s.serve(ctx, in, send, &tm)
	if resp == nil {
		return nil
	}
	code := int(resp.ErrorCode())
	if s.cfg.Observer != nil {
		handle := time.Duration(0)
		if !tm.handled.IsZero() {
			handle = time.Since(tm.handled)
		}
		s.cfg.Observer.Observe(resp.Method, code, tm.verified.Sub(start), handle)
	}
	s.answered(ctx, in, resp, code, &tm, time.Since(start))
	return resp
}

// timing marks when validation ended and a handler started, and what the
// request said of itself once it verified.
type timing struct {
	verified, handled time.Time
	id                string // the request's id, once verified
	task, state       string // of the task a TaskCarrier result carries
}

// result notes the task a handler's result carries, for the log.
func (tm *timing) result(payload any) {
	if tc, ok := payload.(TaskCarrier); ok && tm != nil {
		tm.task, tm.state = tc.TaskID(), tc.TaskState()
	}
}

// refusalWindow is how often refusals are logged: the first of a window
// at once, the others counted and summed up with the first of the next.
const refusalWindow = 10 * time.Second

// refusals counts the refusals not logged yet, by SNAP code.
type refusals struct {
	mu     sync.Mutex
	last   time.Time     // when a refusal was last logged
	counts map[int]int64 // bounded: SNAP codes are a few dozen
	held   int64
}

// answered logs one line per answer: at info for a request that was
// served (method, requester, request and task ids, transport, time,
// outcome); at warn for refusals, at most one line per refusalWindow with
// the count of those in between, so a flood cannot fill the log.
func (s *Server) answered(ctx context.Context, in Inbound, resp *Message, code int, tm *timing, took time.Duration) {
	log := s.cfg.Logger
	transport := in.Transport
	if transport == "" {
		transport = "direct"
	}
	if code == 0 {
		if !log.Enabled(ctx, slog.LevelInfo) {
			return
		}
		taskID, state := tm.task, tm.state
		if taskID == "" {
			taskID, state, _ = ResultTask(resp.Payload)
		}
		attrs := []any{"method", resp.Method, "from", resp.To, "id", tm.id, "transport", transport, "took", took.Round(time.Microsecond)}
		if taskID != "" {
			attrs = append(attrs, "task", taskID, "state", state)
		}
		log.Info("request answered", attrs...)
		return
	}
	r := &s.refused
	now := s.cfg.Now()
	r.mu.Lock()
	if !r.last.IsZero() && now.Sub(r.last) < refusalWindow {
		if len(r.counts) < 64 {
			r.counts[code]++
		}
		r.held++
		r.mu.Unlock()
		return
	}
	before, held := r.counts, r.held
	r.last, r.counts, r.held = now, make(map[int]int64), 0
	r.mu.Unlock()
	attrs := []any{"method", resp.Method, "to", resp.To, "transport", transport, "code", code}
	if held > 0 {
		attrs = append(attrs, "refused_since_last", held, "refused_by_code", fmt.Sprint(before))
	}
	log.Warn("request refused", attrs...)
}

// ResultTask returns the id, state and status message of the task a
// result payload carries ({"task": {…}} for message/send, the task itself
// for tasks/get and tasks/cancel), or three "" when it carries none (no id
// or no state).
func ResultTask(payload []byte) (id, state, message string) {
	if !bytes.Contains(payload, []byte(`"status"`)) {
		return "", "", ""
	}
	type task struct {
		ID     string `json:"id"`
		Status struct {
			State   string `json:"state"`
			Message string `json:"message"`
		} `json:"status"`
	}
	var p struct {
		task
		Task *task `json:"task"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return "", "", ""
	}
	t := p.task
	if p.Task != nil {
		t = *p.Task
	}
	if t.ID == "" || t.Status.State == "" {
		return "", "", ""
	}
	return t.ID, t.Status.State, t.Status.Message
}

// serve is Respond and Stream: events of a streaming method go to send,
// or nowhere when send is nil. tm, when set, gets the times.
func (s *Server) serve(ctx context.Context, in Inbound, send func(*Message) error, tm *timing) *Message {
	whole := ctx
	if s.cfg.RequestTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, s.cfg.RequestTimeout, errRequestTimedOut)
		defer cancel()
	}
	v, env, err := s.cfg.Validator.validate(ctx, in.Raw, in.Signer, in.Via, true)
	if tm != nil {
		tm.verified = time.Now()
	}
	if errors.Is(err, ErrRedelivered) {
		s.cfg.Logger.Debug("snap: delivery already taken", "via", in.Via)
		return nil
	}
	lim := s.limit(in)
	if err != nil {
		if in.Late {
			s.cfg.Logger.Debug("snap: a late delivery failed before it was recorded; not answered", "via", in.Via, "err", err)
			return nil
		}
		return s.fail(ctx, env, s.timedOut(ctx, err), lim)
	}
	if v.Type != TypeRequest {
		return nil
	}
	if tm != nil {
		tm.handled, tm.id = time.Now(), v.ID
	}
	sh, streams := s.cfg.Router.LookupStream(v.Method)
	h, ok := s.cfg.Router.Lookup(v.Method)
	if !streams && !ok {
		// No handler settles the claim: the record is written first,
		// as validation writes it.
		if resp, replaced := s.settleClaim(ctx, in, env, v, nil, lim); replaced {
			return resp
		}
	}
	if streams {
		// A stream is bounded by its handler (its longest duration), not
		// by the request time-out.
		return s.stream(whole, sh, v, send, lim, tm, func(err error) (*Message, bool) {
			return s.settleClaim(whole, in, env, v, err, lim)
		})
	}
	if !ok {
		return s.reply(v.From, v.Method, nil, &Error{Code: CodeMethodNotFound,
			Message: "method not found: " + v.Method, Data: map[string]any{"method": v.Method}}, lim)
	}
	if slices.Contains(s.cfg.SelfBounded, v.Method) {
		// Its handler bounds its own time; the request time-out bounded
		// its validation.
		ctx = whole
	}
	kept := &keptResult{}
	if v.Method == "message/send" {
		ctx = context.WithValue(ctx, keptKey{}, kept)
	}
	payload, err := s.call(ctx, h, v)
	err = s.timedOut(ctx, err)
	if resp, replaced := s.settleClaim(ctx, in, env, v, err, lim); replaced {
		return resp
	}
	if err != nil {
		if retryable(err) && !v.recorded.IsZero() {
			// Validation spent the id (service/call): the retry SNAP
			// would have the requester send is refused as a duplicate.
			if errors.Is(context.Cause(ctx), errRequestTimedOut) {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
				defer cancel()
				err = &Error{Code: CodeServiceUnavailable,
					Message: fmt.Sprintf("not finished within the node's request time-out (%v)", s.cfg.RequestTimeout)}
			}
			return s.spent(ctx, v, err, lim)
		}
		return s.reply(v.From, v.Method, nil, err, lim)
	}
	tm.result(payload)
	resp := s.reply(v.From, v.Method, payload, nil, lim)
	if v.Method == "message/send" && resp.Sig != "" {
		// A result the handler kept in its own write (ResultKept) is
		// not written again.
		if p, ok := isResult(resp.Payload); ok && !bytes.Equal(p, kept.payload) {
			// Kept before the answer leaves, so that a retry can never
			// outrun it; a failure costs only the retry's result.
			if err := s.cfg.Results.SaveResult(ctx, v.From, v.ID, p, s.cfg.Now().Add(s.cfg.Validator.retention)); err != nil {
				s.cfg.Logger.Warn("snap: message/send result not kept for retries", "from", v.From, "id", v.ID, "err", err)
			}
		}
	}
	return resp
}

// settleClaim writes the replay record of v's claim (Verified.Claim) if
// its handler left it pending — a handler that failed, or did nothing
// durable, before it wrote the record — and reports whether the claim
// failed, with the answer that then replaces the handler's: a duplicate's
// exactly as validation answers it (2006, the kept result of a
// message/send, or none for the same delivery), or the replay store's
// failure; none for a Late delivery.
//
// A handler that failed (failed) with 5001, 5002 or 5003 — the answers
// SNAP tells a requester to retry, the message not processed — and left
// its claim pending had no effect: its write carrying the record, if
// any, failed (the database busy, a connection lost). Its record is then
// looked up, not written: none found, the id stays unspent, and the
// handler's error answers (a Late delivery, none), so that the
// requester's retry of the same message is processed. No id is
// processed twice: every effect of a claiming handler is written with
// the record or after it, and the record's key admits one.
//
// A request whose id its own record spent is never told to retry, on
// any transport: the retry would be refused as a duplicate. Such is a
// handler that failed so once its record was written (with its effect,
// or before it), and one whose write carrying the record committed
// though its result was lost (ReplayClaim.Writing), whatever it then
// returned. It is answered by spent.
func (s *Server) settleClaim(ctx context.Context, in Inbound, env *envelope, v *Verified, failed error, lim limit) (*Message, bool) {
	c := v.Claim
	if c == nil {
		return nil, false
	}
	// The request time-out ended ctx: the store's answers (was the
	// record written? what result was kept?) are asked for all the same,
	// briefly, or a write that committed as the time-out passed would be
	// told to retry what its retry finds spent.
	timed := ctx
	if errors.Is(context.Cause(ctx), errRequestTimedOut) {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
		defer cancel()
	}
	var err error
	if retryable(failed) && c.Pending() {
		if err = c.look(ctx); err != nil && !errors.Is(err, ErrClaimTaken) {
			// The store fails still: the handler's error answers.
			s.cfg.Logger.Debug("snap: replay record of a failed request not read", "from", v.From, "id", v.ID, "err", err)
			err = nil
		}
		if err == nil && c.Pending() && in.Late {
			s.cfg.Logger.Debug("snap: a late delivery failed before it was recorded; not answered", "via", in.Via, "err", failed)
			return nil, true
		}
	} else {
		err = c.Remember(ctx)
	}
	if failed != nil && (c.lost() || retryable(failed) && c.mine()) {
		return s.spent(ctx, v, failed, lim), true
	}
	if err == nil {
		return nil, false
	}
	if dup := c.duplicate(); dup != nil {
		err = dup
	}
	switch {
	case errors.Is(err, ErrRedelivered):
		s.cfg.Logger.Debug("snap: delivery already taken", "via", in.Via)
		return nil, true
	case in.Late:
		s.cfg.Logger.Debug("snap: a late delivery failed before it was recorded; not answered", "via", in.Via, "err", err)
		return nil, true
	}
	return s.fail(ctx, env, s.timedOut(timed, err), lim), true
}

// settleTimeout bounds settleClaim's calls to the replay and result
// stores once the request time-out passed.
const settleTimeout = 2 * time.Second

// spent answers a request whose own replay record holds its id but whose
// handler failed (failed) with an error SNAP tells a requester to retry:
// with the result kept for it (a message/send's, marked deduplicated, as
// its retry would get), else with 2006 saying that the id is spent —
// never with failed, which SNAP's retryable codes would have the
// requester send again, only to be refused as a duplicate. The record is
// the handler's (Verified.Claim: what the request did stands, to be read
// with tasks/get) or validation's (a service/call, recorded before its
// service ran: the call may have acted, and is sent again only as a new
// request with a new id; data.cause is failed as an error object, less
// its retryAfter, which would read as an invitation to send it again).
// A Late delivery is answered too: the record is its own.
func (s *Server) spent(ctx context.Context, v *Verified, failed error, lim limit) *Message {
	s.cfg.Logger.Warn("snap: a request failed once its replay record was written; answered as done, not to be retried",
		"method", v.Method, "from", v.From, "id", v.ID, "err", failed)
	if resp, ok := s.kept(ctx, v.From, v.Method, v.ID, lim); ok {
		return resp
	}
	if v.Claim != nil {
		return s.reply(v.From, v.Method, nil, &Error{
			Code: CodeDuplicateMessage,
			Message: "message id spent: the request was recorded, then failed, and what it did stands; " +
				"do not send it again: read its task (tasks/get), or send a new message with a new id",
			Data: map[string]any{"id": v.ID, "firstSeen": v.Claim.Record.FirstSeen.Unix()},
		}, lim)
	}
	cause := &Error{Code: CodeInternal, Message: "internal error"}
	var se *Error
	if errors.As(failed, &se) {
		cause = &Error{Code: se.Code, Message: se.Message}
		for k, x := range se.Data {
			if k != "retryAfter" {
				if cause.Data == nil {
					cause.Data = make(map[string]any, len(se.Data))
				}
				cause.Data[k] = x
			}
		}
	}
	why, data := cause.Message, map[string]any{"id": v.ID, "firstSeen": v.recorded.Unix(), "cause": cause}
	return s.reply(v.From, v.Method, nil, &Error{
		Code: CodeDuplicateMessage,
		Message: "message id spent: the request was recorded before it was handled, then failed (" + why +
			"), and may have acted; do not send it again: send a new request with a new id",
		Data: data,
	}, lim)
}

// errRequestTimedOut is the cause of a request's context ended by
// ServerConfig.RequestTimeout.
var errRequestTimedOut = errors.New("snap: the request time-out passed")

// timedOut returns err, or, when err is one SNAP tells the requester to
// retry (or no SNAP error) and ctx ended for the request time-out, the
// 5003 that says so: the node did not finish in time (its database slow
// or not answering), and the request may be sent again a little later.
func (s *Server) timedOut(ctx context.Context, err error) error {
	if err == nil || !retryable(err) || !errors.Is(context.Cause(ctx), errRequestTimedOut) ||
		errors.Is(err, ErrRedelivered) || errors.Is(err, ErrClaimTaken) {
		return err
	}
	s.cfg.Logger.Warn("snap: a request did not finish within the request time-out; answered 5003",
		"timeout", s.cfg.RequestTimeout, "err", err)
	return &Error{Code: CodeServiceUnavailable,
		Message: fmt.Sprintf("the request did not finish within the node's request time-out (%v); send it again shortly", s.cfg.RequestTimeout),
		Data:    map[string]any{"retryAfter": timedOutRetryAfter, "timeout": s.cfg.RequestTimeout.Seconds()}}
}

// timedOutRetryAfter is the retryAfter, in seconds, of a request that
// did not finish within the request time-out.
const timedOutRetryAfter = 5

// retryable reports whether a handler's error is one SNAP tells the
// requester to retry, the message not processed: a 5xxx code of
// Code.Retryable's table (5001, 5002, 5003), or an error that is not a
// SNAP error, which is answered 5001.
func retryable(err error) bool {
	if err == nil {
		return false
	}
	c := CodeOf(err)
	return c == 0 || c >= 5000 && c.Retryable()
}

// call runs h, turning a panic into 5001 so that one bad handler cannot
// take a transport down.
func (s *Server) call(ctx context.Context, h HandlerFunc, v *Verified) (payload any, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.panicLog.Log(ctx, s.cfg.Logger, s.cfg.Now(), slog.LevelError, "snap handler panicked", "method", v.Method, "from", v.From, "panic", r)
			payload, err = nil, &Error{Code: CodeInternal, Message: "internal error"}
		}
	}()
	return h(ctx, v)
}

// fail answers a message that failed validation. A duplicate message/send
// gets the original result marked deduplicated.
func (s *Server) fail(ctx context.Context, env *envelope, err error, lim limit) *Message {
	from, method, typ := peek(env)
	if typ == TypeResponse || typ == TypeEvent {
		return nil
	}
	if !s.sameNetwork(from) {
		// Named in `to`, a requester on the other network would get an
		// answer that mixes networks, which its own checks refuse: it
		// would never learn why it was refused.
		from = ""
	}
	var se *Error
	if errors.As(err, &se) && se.Code == CodeDuplicateMessage {
		id, _ := se.Data["id"].(string)
		if resp, ok := s.kept(ctx, from, method, id, lim); ok {
			return resp
		}
	}
	return s.reply(from, method, nil, err, lim)
}

// sameNetwork reports whether addr, a valid address or "", is on the
// server's own network ("" is).
func (s *Server) sameNetwork(addr string) bool {
	if addr == "" {
		return true
	}
	a, err1 := identity.ParseAddress(addr)
	self, err2 := identity.ParseAddress(s.addr)
	return err1 != nil || err2 != nil || a.Network == self.Network
}

// kept answers a message/send whose result is kept with that result,
// marked deduplicated; it reports false for another method or when no
// result is kept.
func (s *Server) kept(ctx context.Context, from, method, id string, lim limit) (*Message, bool) {
	if method != "message/send" {
		return nil, false
	}
	p, ok, err := s.cfg.Results.LoadResult(ctx, from, id, s.cfg.Now())
	if err != nil {
		s.cfg.Logger.Warn("snap: message/send result not read", "from", from, "id", id, "err", err)
	}
	if !ok {
		return nil, false
	}
	return s.reply(from, method, json.RawMessage(withDeduplicated(p)), nil, lim), true
}

// peek reads what an error response needs from an envelope that failed
// validation: whom to answer, the method to echo, the declared type. Each
// is used only when it is well formed.
func peek(env *envelope) (from, method string, typ Type) {
	method = "snap/error"
	if env == nil {
		return "", method, ""
	}
	str := func(i int) string {
		if !env.f[i].present || env.f[i].kind != '"' {
			return ""
		}
		b, err := jsontext.AppendUnquote(nil, env.f[i].val)
		if err != nil {
			return ""
		}
		return string(b)
	}
	if f := str(fFrom); identity.CheckAddressSyntax(f) == nil {
		if _, err := identity.ParseAddress(f); err == nil {
			from = f
		}
	}
	if m := str(fMethod); checkMethod(m) == nil {
		method = m
	}
	return from, method, Type(str(fType))
}

// reply builds and signs a response to `to` (omitted when unknown) with
// either payload or err. A payload too large for the transport's limit is
// shrunk (Shrinker), else replaced by a 5001 error naming the size, the
// limit and the transport.
func (s *Server) reply(to, method string, payload any, err error, lim limit) *Message {
	if err != nil {
		var se *Error
		if !errors.As(err, &se) {
			s.failedLog.Log(context.Background(), s.cfg.Logger, s.cfg.Now(), slog.LevelError, "snap request failed", "method", method, "from", to, "err", err)
			se = &Error{Code: CodeInternal, Message: "internal error"}
		}
		payload = map[string]any{"error": se}
	}
	m, err := s.sign(TypeResponse, to, method, payload, lim.size)
	if err == nil {
		return m
	}
	var tl *tooLargeError
	if errors.As(err, &tl) {
		data := map[string]any{"reason": "response exceeds the transport's size limit", "size": tl.size, "limit": tl.limit}
		if lim.transport != "" {
			data["transport"] = lim.transport
		}
		if tc, ok := payload.(TaskCarrier); ok && tc.TaskID() != "" {
			data["taskId"] = tc.TaskID()
		}
		payload = map[string]any{"error": &Error{Code: CodeInternal,
			Message: "response too large for the transport", Data: data}}
	} else {
		s.cfg.Logger.Error("snap response does not marshal", "method", method, "err", err)
		payload = map[string]any{"error": &Error{Code: CodeInternal, Message: "internal error"}}
	}
	// A short error: it fits any transport worth the name.
	m, _ = s.sign(TypeResponse, to, method, payload, 0)
	return m
}

// tooLargeError reports a message over the size limit that could not be
// shrunk to fit.
type tooLargeError struct{ size, limit int }

func (e *tooLargeError) Error() string {
	return "snap: message of " + strconv.Itoa(e.size) + " bytes exceeds the limit of " + strconv.Itoa(e.limit)
}

// sign builds and signs a message of type typ carrying payload, from the
// server to `to` (omitted when empty). When limit > 0 a larger message has
// its payload shrunk (Shrinker) until it fits, else sign fails with a
// *tooLargeError. A payload that does not marshal is an error too.
func (s *Server) sign(typ Type, to, method string, payload any, limit int) (*Message, error) {
	m := &Message{
		ID: NewID(), Version: ProtocolVersion, From: s.addr, To: to,
		Type: typ, Method: method, Timestamp: s.cfg.Now().Unix(),
	}
	for {
		if err := setPayload(m, payload); err != nil {
			return nil, err
		}
		if err := m.Sign(s.cfg.Key); err != nil {
			// Only a broken key gets here; the message goes unsigned
			// and the requester will reject it.
			s.cfg.Logger.Error("snap message not signed", "type", typ, "err", err)
			return m, nil
		}
		if limit <= 0 {
			return m, nil
		}
		size := m.size()
		if size <= limit {
			return m, nil
		}
		if sh, ok := payload.(Shrinker); ok && sh.Shrink() {
			continue
		}
		return nil, &tooLargeError{size: size, limit: limit}
	}
}

// setPayload sets m's payload to payload's JSON form: written in
// canonical form at once by a CanonicalAppender, else marshaled by
// reflection, for Sign to canonicalize.
func setPayload(m *Message, payload any) error {
	if ca, ok := payload.(CanonicalAppender); ok {
		if b, err := ca.AppendCanonicalJSON(make([]byte, 0, 1024)); err == nil {
			m.setCanonical(b)
			return nil
		}
	}
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	m.Payload = b
	return nil
}

// size is the length of the message's JSON form.
func (m *Message) size() int {
	var buf [4096]byte // most answers: measured without an allocation
	b, _ := m.AppendJSON(buf[:0])
	return len(b)
}

// isResult reports whether a response payload is a result (no error), and
// returns it for the dedup cache.
func isResult(payload []byte) ([]byte, bool) {
	if bytes.HasPrefix(payload, []byte(`{"error":`)) {
		return nil, false
	}
	return payload, true
}

// withDeduplicated adds "deduplicated": true to a canonical JSON object.
func withDeduplicated(obj []byte) []byte {
	if len(obj) <= 2 {
		return []byte(`{"deduplicated":true}`)
	}
	out := make([]byte, 0, len(obj)+20)
	out = append(out, obj[:len(obj)-1]...)
	return append(out, `,"deduplicated":true}`...)
}

// Refuse returns a signed error response for a message the transport could
// not even open (an undecryptable payload, a full queue), addressed to no
// one and echoing no method.
func (s *Server) Refuse(err *Error) *Message {
	return s.reply("", "snap/error", nil, err, limit{})
}
