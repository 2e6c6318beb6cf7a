package servicecall

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/logcap"
	"github.com/snapnode/snapnode/snap"
)

// Method is the SNAP method of agent-to-service calls.
const Method = snap.MethodServiceCall

// MaxNameLen bounds a service's name.
const MaxNameLen = 64

// namePattern is what a service's name may be: lowercase words joined by
// '.', '_' or '-', as method names are.
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9]*([._-][a-z0-9]+)*$`)

// CheckName reports whether name may name a service.
func CheckName(name string) error {
	if len(name) == 0 || len(name) > MaxNameLen || !namePattern.MatchString(name) {
		return fmt.Errorf("service: invalid name %q: want 1–%d characters matching %s", name, MaxNameLen, namePattern)
	}
	return nil
}

// Call is one verified service call.
type Call struct {
	// From is the caller's address; its signature verified and it is on
	// the allowlist.
	From string
	// Name is the service called.
	Name string
	// Arguments is the arguments object as sent, or nil when left out.
	Arguments json.RawMessage
}

// Bind decodes the arguments into v, refusing fields v does not have. A
// failure is a 1004 *snap.Error naming the argument (payload.arguments…)
// and the rule. Left-out arguments decode as {}.
func (c *Call) Bind(v any) error {
	args := c.Arguments
	if len(args) == 0 {
		args = []byte("{}")
	}
	dec := json.NewDecoder(bytes.NewReader(args))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		return nil
	}
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te):
		field := "payload.arguments"
		if te.Field != "" {
			field += "." + te.Field
		}
		return snap.FieldError(field, "type", te.Type.String(), te.Value)
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return snap.FieldError("payload.arguments."+name, "additionalProperties", "a known argument", name)
	default:
		return snap.FieldError("payload.arguments", "format", "arguments this service takes", err.Error())
	}
}

// Handler answers one call. Its reply must marshal to a JSON object: it
// is the payload of the SNAP response, and the body of an HTTP answer.
// A *snap.Error it returns reaches the caller; any other error is logged
// and answered with 5001. A Handler must be safe for concurrent use.
type Handler func(ctx context.Context, c *Call) (any, error)

// Config configures a Registry.
type Config struct {
	// Allow lists the identities (P2TR addresses) that may call. Nobody
	// may call when it is empty.
	Allow []string
	// Logger receives handler failures (default slog.Default()): each kind
	// at most 10 lines a minute, the next line counting those not logged
	// as not_logged_before, since a caller decides how often a service
	// fails.
	Logger *slog.Logger
	// Timeout bounds each call of a service registered with Handle
	// (HandleTimeout gives a service its own); 0: none. A call still
	// running when it passes has its context ended and is answered 5003
	// naming the service and the time-out, unless the handler returns a
	// *snap.Error of its own.
	Timeout time.Duration
}

// Registry routes service calls by name. Handlers may be added while it
// serves; it is safe for concurrent use.
type Registry struct {
	logger  *slog.Logger
	timeout time.Duration
	allow   atomic.Pointer[map[[32]byte]bool] // by the caller's key: an address on either network

	mu       sync.RWMutex
	handlers map[string]service

	// The lines of failed calls, bounded: a caller decides how often a
	// service fails, or is called while it is slow.
	failedLog, timedOutLog, notObjectLog logcap.Limiter
}

// service is a registered handler and the bound of its calls (0: none).
type service struct {
	h       Handler
	timeout time.Duration
}

// errTimedOut is the cause of a call's context ended by its service's
// time-out.
var errTimedOut = errors.New("service: the service's time-out passed")

// New returns a Registry with no services for cfg. It fails when an
// allowed identity is not a valid P2TR address, naming it.
func New(cfg Config) (*Registry, error) {
	r := &Registry{logger: cfg.Logger, timeout: cfg.Timeout, handlers: map[string]service{}}
	if r.logger == nil {
		r.logger = slog.Default()
	}
	if err := r.SetAllow(cfg.Allow); err != nil {
		return nil, err
	}
	return r, nil
}

// Handle registers h as the service name, its calls bounded by
// Config.Timeout. It panics when name is not a valid name (CheckName) or
// is taken, as registering a method twice does: both are mistakes in the
// program.
func (r *Registry) Handle(name string, h Handler) {
	r.HandleTimeout(name, r.timeout, h)
}

// HandleTimeout registers h as the service name, as Handle does, each
// call bounded by timeout (0: none) in place of Config.Timeout: a
// service that may take long declares so.
func (r *Registry) HandleTimeout(name string, timeout time.Duration, h Handler) {
	if err := CheckName(name); err != nil {
		panic(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.handlers[name]; dup {
		panic("service: second handler for " + name)
	}
	r.handlers[name] = service{h, timeout}
}

// Names returns the registered services, sorted.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	names := make([]string, 0, len(r.handlers))
	for n := range r.handlers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// SetAllow replaces the identities that may call (Config.Allow) while
// the Registry serves: every later call is judged by the new list. It
// fails, changing nothing, when an identity is not a valid P2TR address.
func (r *Registry) SetAllow(addrs []string) error {
	allow := make(map[[32]byte]bool, len(addrs))
	for _, a := range addrs {
		addr, err := identity.ParseAddress(a)
		if err != nil {
			return fmt.Errorf("service: allowed caller: %w", err)
		}
		allow[addr.Key] = true
	}
	r.allow.Store(&allow)
	return nil
}

// Allowed reports whether the identity with the x-only key key may call.
func (r *Registry) Allowed(key [32]byte) bool { return (*r.allow.Load())[key] }

// Serve answers a verified service/call request; it is a
// snap.HandlerFunc, registered as router.Handle(servicecall.Method, r.Serve).
func (r *Registry) Serve(ctx context.Context, req *snap.Verified) (any, error) {
	if !r.Allowed(req.Sender.Key) {
		return nil, &snap.Error{Code: snap.CodeIdentityMismatch, Message: "this identity may not call services here",
			Data: map[string]any{"field": "from", "constraint": "allowlist", "received": req.From}}
	}
	call, err := parseCall(req.Payload)
	if err != nil {
		return nil, err
	}
	call.From = req.From
	r.mu.RLock()
	svc, ok := r.handlers[call.Name]
	r.mu.RUnlock()
	if !ok {
		return nil, &snap.Error{Code: snap.CodeSkillNotFound, Message: "no such service: " + call.Name,
			Data: map[string]any{"skill": call.Name, "available": r.Names()}}
	}
	if svc.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, svc.timeout, errTimedOut)
		defer cancel()
	}
	reply, err := svc.h(ctx, call)
	if err != nil {
		var se *snap.Error
		if errors.As(err, &se) {
			return nil, se
		}
		if errors.Is(context.Cause(ctx), errTimedOut) {
			r.timedOutLog.Log(ctx, r.logger, time.Now(), slog.LevelWarn, "service did not finish within its time-out", "service", call.Name, "from", call.From, "timeout", svc.timeout, "err", err)
			return nil, &snap.Error{Code: snap.CodeServiceUnavailable,
				Message: fmt.Sprintf("the service did not finish within its time-out (%v)", svc.timeout),
				Data:    map[string]any{"service": call.Name, "timeout": svc.timeout.Seconds()}}
		}
		r.failedLog.Log(ctx, r.logger, time.Now(), slog.LevelError, "service failed", "service", call.Name, "from", call.From, "err", err)
		return nil, &snap.Error{Code: snap.CodeInternal, Message: "the service failed", Data: map[string]any{"service": call.Name}}
	}
	b, err := json.Marshal(reply)
	if err != nil || len(b) == 0 || b[0] != '{' {
		r.notObjectLog.Log(ctx, r.logger, time.Now(), slog.LevelError, "service reply is not a JSON object", "service", call.Name, "err", err)
		return nil, &snap.Error{Code: snap.CodeInternal, Message: "the service's reply is not a JSON object", Data: map[string]any{"service": call.Name}}
	}
	return json.RawMessage(b), nil
}

// parseCall reads the payload {"name": string, "arguments"?: object}.
func parseCall(payload []byte) (*Call, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(payload, &fields); err != nil {
		return nil, snap.FieldError("payload", "type", "object", "not an object")
	}
	for k := range fields {
		if k != "name" && k != "arguments" {
			return nil, snap.FieldError("payload."+k, "additionalProperties", "name or arguments", k)
		}
	}
	raw, ok := fields["name"]
	if !ok {
		return nil, snap.FieldError("payload.name", "required", "the service's name", nil)
	}
	var name string
	if err := json.Unmarshal(raw, &name); err != nil {
		return nil, snap.FieldError("payload.name", "type", "string", string(raw))
	}
	if CheckName(name) != nil {
		return nil, snap.FieldError("payload.name", "pattern", namePattern.String(), name)
	}
	c := &Call{Name: name}
	if args, ok := fields["arguments"]; ok {
		if len(args) == 0 || args[0] != '{' {
			return nil, snap.FieldError("payload.arguments", "type", "object", string(args))
		}
		c.Arguments = args
	}
	return c, nil
}
