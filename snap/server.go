package snap

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/snapnode/snapnode/identity"
)

// HandlerFunc handles a verified request. It returns the response payload
// (any value that marshals to a JSON object, typically {"task": …}) or an
// error; an *Error is sent to the requester as it is, any other error as
// 5001 Internal without its text.
type HandlerFunc func(ctx context.Context, req *Verified) (any, error)

// Router maps methods to handlers. Handlers are registered before serving;
// Handle panics on a method name SNAP does not allow or a second
// registration, which are programming errors.
type Router struct {
	mu sync.RWMutex
	m  map[string]HandlerFunc
}

// NewRouter returns an empty Router.
func NewRouter() *Router { return &Router{m: make(map[string]HandlerFunc)} }

// Handle registers h for method.
func (r *Router) Handle(method string, h func(ctx context.Context, req *Verified) (any, error)) {
	if checkMethod(method) != nil {
		panic("snap: invalid method name " + method)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.m[method]; dup {
		panic("snap: second handler for " + method)
	}
	r.m[method] = h
}

// Lookup returns the handler of method.
func (r *Router) Lookup(method string) (HandlerFunc, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	h, ok := r.m[method]
	return h, ok
}

// Methods returns the registered methods, sorted.
func (r *Router) Methods() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	out := make([]string, 0, len(r.m))
	for m := range r.m {
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

// ServerConfig configures a Server.
type ServerConfig struct {
	Key       *identity.Key
	Network   identity.Network // of the address responses are sent from
	Validator *Validator       // its Config.Self should be the server's address
	Router    *Router
	Logger    *slog.Logger
	Now       func() time.Time
	// MaxResponseSize bounds the serialized response (0: none). Nostr's
	// NIP-44 carries at most 65,535 bytes.
	MaxResponseSize int
	// Results keeps message/send results to answer a retried request
	// with the original result (default: a MemoryResultStore of 10,000).
	Results ResultStore
}

// Server answers SNAP requests: it validates each inbound message, routes
// requests to their handler, and always returns a signed response, errors
// included, so a peer never waits for a time-out because its message was
// bad. Responses and events that arrive are never routed: they get no
// answer. A Server is transport-neutral and safe for concurrent use.
type Server struct {
	cfg  ServerConfig
	addr string
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
	return &Server{cfg: cfg, addr: cfg.Key.Address(cfg.Network)}
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
}

// Respond handles one inbound message. It returns the signed response to
// send back, or nil when the message claims to be a response or an event,
// which is never answered, or when its delivery was already taken
// (ErrRedelivered).
func (s *Server) Respond(ctx context.Context, in Inbound) *Message {
	v, env, err := s.cfg.Validator.validate(ctx, in.Raw, in.Signer, in.Via)
	if errors.Is(err, ErrRedelivered) {
		s.cfg.Logger.Debug("snap: delivery already taken", "via", in.Via)
		return nil
	}
	if err != nil {
		return s.fail(ctx, env, err)
	}
	if v.Type != TypeRequest {
		return nil
	}
	h, ok := s.cfg.Router.Lookup(v.Method)
	if !ok {
		return s.reply(v.From, v.Method, nil, &Error{Code: CodeMethodNotFound,
			Message: "method not found: " + v.Method, Data: map[string]any{"method": v.Method}})
	}
	payload, err := s.call(ctx, h, v)
	if err != nil {
		return s.reply(v.From, v.Method, nil, err)
	}
	resp := s.reply(v.From, v.Method, payload, nil)
	if v.Method == "message/send" && resp.Sig != "" {
		if p, ok := isResult(resp.Payload); ok {
			// Kept before the answer leaves, so that a retry can never
			// outrun it; a failure costs only the retry's result.
			if err := s.cfg.Results.SaveResult(ctx, v.From, v.ID, p, s.cfg.Now().Add(s.cfg.Validator.retention)); err != nil {
				s.cfg.Logger.Warn("snap: message/send result not kept for retries", "from", v.From, "id", v.ID, "err", err)
			}
		}
	}
	return resp
}

// call runs h, turning a panic into 5001 so that one bad handler cannot
// take a transport down.
func (s *Server) call(ctx context.Context, h HandlerFunc, v *Verified) (payload any, err error) {
	defer func() {
		if r := recover(); r != nil {
			s.cfg.Logger.Error("snap handler panicked", "method", v.Method, "from", v.From, "panic", r)
			payload, err = nil, &Error{Code: CodeInternal, Message: "internal error"}
		}
	}()
	return h(ctx, v)
}

// fail answers a message that failed validation. A duplicate message/send
// gets the original result marked deduplicated.
func (s *Server) fail(ctx context.Context, env *envelope, err error) *Message {
	from, method, typ := peek(env)
	if typ == TypeResponse || typ == TypeEvent {
		return nil
	}
	var se *Error
	if errors.As(err, &se) && se.Code == CodeDuplicateMessage && method == "message/send" {
		id, _ := se.Data["id"].(string)
		p, ok, lerr := s.cfg.Results.LoadResult(ctx, from, id, s.cfg.Now())
		if lerr != nil {
			s.cfg.Logger.Warn("snap: message/send result not read", "from", from, "id", id, "err", lerr)
		}
		if ok {
			return s.reply(from, method, json.RawMessage(withDeduplicated(p)), nil)
		}
	}
	return s.reply(from, method, nil, err)
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
// either payload or err.
func (s *Server) reply(to, method string, payload any, err error) *Message {
	if err != nil {
		var se *Error
		if !errors.As(err, &se) {
			s.cfg.Logger.Error("snap handler failed", "method", method, "from", to, "err", err)
			se = &Error{Code: CodeInternal, Message: "internal error"}
		}
		payload = map[string]any{"error": se}
	}
	m := &Message{
		ID: NewID(), Version: ProtocolVersion, From: s.addr, To: to,
		Type: TypeResponse, Method: method, Timestamp: s.cfg.Now().Unix(),
	}
	for {
		b, merr := json.Marshal(payload)
		if merr != nil {
			s.cfg.Logger.Error("snap response does not marshal", "method", method, "err", merr)
			b, _ = json.Marshal(map[string]any{"error": &Error{Code: CodeInternal, Message: "internal error"}})
		}
		m.Payload = b
		if err := m.Sign(s.cfg.Key); err != nil {
			// Only a broken key gets here; the response goes unsigned
			// and the requester will reject it.
			s.cfg.Logger.Error("snap response not signed", "err", err)
			return m
		}
		if s.cfg.MaxResponseSize <= 0 {
			return m
		}
		size := m.size()
		if size <= s.cfg.MaxResponseSize {
			return m
		}
		if sh, ok := payload.(Shrinker); ok && sh.Shrink() {
			continue
		}
		payload = map[string]any{"error": &Error{Code: CodeInternal,
			Message: "response too large for the transport",
			Data:    map[string]any{"reason": "response exceeds the transport's size limit", "size": size, "limit": s.cfg.MaxResponseSize}}}
	}
}

// size is the length of the message's JSON form.
func (m *Message) size() int {
	b, _ := m.AppendJSON(nil)
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
	return s.reply("", "snap/error", nil, err)
}
