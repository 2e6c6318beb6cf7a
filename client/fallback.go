package client

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/snapnode/snapnode/internal/defaults"
	"github.com/snapnode/snapnode/internal/periodic"
	"github.com/snapnode/snapnode/snap"
)

// Defaults of FallbackConfig: an endpoint is tried again three times, after
// 1, 2 and 4 s, as the SNAP specification's transport notes suggest.
const (
	DefaultRetries = 3
	DefaultBackoff = time.Second
	DefaultMaxWait = 30 * time.Second
)

// Defaults of FallbackConfig's setting aside of an endpoint that failed.
const (
	DefaultSetAside    = 30 * time.Second
	DefaultMaxSetAside = 5 * time.Minute
)

// FallbackConfig configures the Transport ToCard returns.
type FallbackConfig struct {
	// Retries is how many times an endpoint is tried again after a failure
	// that may pass (a connection that fails, an HTTP 429 or 5xx, no
	// answer) before the next is tried; 0 takes DefaultRetries, a negative
	// value none.
	Retries int
	// Backoff is the wait before the first retry, doubled before each
	// next one; a Retry-After the endpoint sent is waited for if longer.
	// 0 takes DefaultBackoff.
	Backoff time.Duration
	// MaxWait is the longest wait before a retry: an endpoint that asks
	// for longer (its Retry-After) is left for the next one. 0 takes
	// DefaultMaxWait.
	MaxWait time.Duration
	// SetAside is how long an endpoint that failed an exchange (a
	// connection that failed, an HTTP 5xx or no answer, after its
	// retries) is left out of the next exchanges of the same Transport,
	// which go to the card's next transport at once. Once that while has
	// passed, the next exchange tries the endpoint once, without retries:
	// an answer brings it back, a failure sets it aside for twice as long,
	// up to MaxSetAside. A Retry-After longer than SetAside is waited
	// instead, up to MaxSetAside. When every endpoint is set aside and
	// Nostr does not follow them, each is tried once. 0 takes
	// DefaultSetAside, a negative value sets none aside.
	SetAside time.Duration
	// MaxSetAside bounds how long an endpoint is set aside; 0 takes
	// DefaultMaxSetAside.
	MaxSetAside time.Duration
	// NostrWithoutRelays has the nostr Transport follow the endpoints
	// even when the card names no relay: for a caller that found the card
	// on the relays that Transport uses, where the agent published it.
	// Without it, Nostr follows only a card that names relays, as the
	// SNAP fallback strategy reads.
	NostrWithoutRelays bool
	// Now is the clock of SetAside; nil: time.Now.
	Now func() time.Time
	// Logger is told, at info, when an endpoint is set aside and when it
	// answers again; nil: nothing is logged.
	Logger *slog.Logger
	// OnRefused, when set, is called, before the card's next transport
	// is tried, with each endpoint the HTTP client refused to connect to
	// (every address its name resolved to is one it refuses:
	// NetConfig.RefusePrivate) and that failure, which wraps
	// ErrPrivateAddress.
	OnRefused func(endpoint string, err error)
}

// ToCard returns the Transport to the agent of card that follows the SNAP
// specification's fallback strategy. Each exchange tries the card's
// endpoints in their declared order, each with the protocol the card
// declares for it (an "http" endpoint is posted to, its streams coming as
// server-sent events; a "wss" one is a WebSocket), and each with Retries;
// then, when every endpoint failed and the card names Nostr relays (or
// NostrWithoutRelays is set), nostr (nil: none); a protocol the card does not declare is never used. The
// first verified answer ends the exchange, a SNAP error included (the
// agent was reached), save a 5002 RateLimitExceeded whose data gives
// retryAfter: that wait, when no longer than MaxWait, is waited for and
// the request sent again to the same endpoint, counted in its Retries
// (Nostr has none). A 5002 without retryAfter, or asking for longer, is
// the answer. When nothing answered, the error is a 4001
// TransportUnavailable *snap.Error with data {"tried": the endpoints'
// URLs and "nostr", in order, "endpoint": the last tried}, wrapping each
// attempt's failure; when ctx ends first, it wraps ctx's cause.
//
// The Transport remembers, for its next exchanges, the endpoints that
// failed one after their retries (a connection that failed, an HTTP 5xx,
// no answer; not a refusal of the request nor a SNAP error answer): each
// is set aside, skipped for the card's next transport, until its while
// (SetAside) has passed; then one exchange tries it once, without retries,
// and an answer brings it back. An endpoint set aside is not in the
// 4001's tried. A Transport's first exchange, a one-shot caller's only
// one, has none set aside.
//
// A stream that failed after an event reached onEvent is not sent again:
// its error is returned. A request of a method SNAP does not call
// idempotent (message/send, message/stream, service/call…) that the agent
// may have taken is sent again only as the package's resend rule says
// (see "What is sent again" in the package documentation): one the rule
// keeps is not sent again, to that endpoint or any other transport, and
// its error, wrapping ErrNotSentAgain and saying how to look before
// sending a message again, is returned. Each attempt is a request signed
// anew (an exchange over another transport is another message): a
// message/send that must make one task whichever attempt arrives carries
// an idempotencyKey.
func ToCard(card *snap.Card, h *HTTP, nostr Transport, cfg FallbackConfig) (Transport, error) {
	if err := card.Validate(); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	if h == nil && len(card.Endpoints) > 0 {
		return nil, errors.New("client: the card declares endpoints and no HTTP client is given")
	}
	switch {
	case cfg.Retries == 0:
		cfg.Retries = DefaultRetries
	case cfg.Retries < 0:
		cfg.Retries = 0
	}
	defaults.Positive(&cfg.Backoff, DefaultBackoff)
	defaults.Positive(&cfg.MaxWait, DefaultMaxWait)
	if cfg.SetAside == 0 {
		cfg.SetAside = DefaultSetAside
	}
	defaults.Positive(&cfg.MaxSetAside, DefaultMaxSetAside)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &cardAgent{card: card, h: h, nostr: nostr, cfg: cfg, aside: make(map[string]*aside, len(card.Endpoints))}, nil
}

type cardAgent struct {
	card  *snap.Card
	h     *HTTP
	nostr Transport
	cfg   FallbackConfig

	mu sync.Mutex
	// aside holds the endpoints set aside, by URL: at most the card's
	// endpoints, each removed when it answers again.
	aside map[string]*aside
}

// aside is an endpoint set aside after a failure.
type aside struct {
	until time.Time     // when it is tried again
	wait  time.Duration // how long it was last set aside
	err   error         // the failure that set it aside
}

// skip is the error of an exchange that skipped the endpoint.
func (s *aside) skip() error {
	return fmt.Errorf("set aside until %s after %v", s.until.Format(time.RFC3339), s.err)
}

func (a *cardAgent) Send(ctx context.Context, method string, payload []byte) (*snap.Message, error) {
	return a.exchange(ctx, method, keyed(payload), func(t Transport) (*snap.Message, error) { return t.Send(ctx, method, payload) }, nil)
}

func (a *cardAgent) Stream(ctx context.Context, method string, payload []byte, onEvent func(*snap.Message) error) (*snap.Message, error) {
	if onEvent == nil {
		onEvent = func(*snap.Message) error { return nil }
	}
	st := &streamState{onEvent: onEvent}
	return a.exchange(ctx, method, keyed(payload), func(t Transport) (*snap.Message, error) { return t.Stream(ctx, method, payload, st.event) }, st)
}

// streamState tells whether a stream's events reached the caller, and the
// caller's own errors from the transport's.
type streamState struct {
	onEvent   func(*snap.Message) error
	delivered bool
}

// callerError is an error of onEvent, which ends the exchange as it is.
type callerError struct{ err error }

func (e *callerError) Error() string { return e.err.Error() }
func (e *callerError) Unwrap() error { return e.err }

func (s *streamState) event(m *snap.Message) error {
	s.delivered = true
	if err := s.onEvent(m); err != nil {
		return &callerError{err}
	}
	return nil
}

// exchange runs try, an exchange of method, on each transport of the
// card in turn (see ToCard); keyed: its payload carries an
// idempotencyKey.
func (a *cardAgent) exchange(ctx context.Context, method string, keyed bool, try func(Transport) (*snap.Message, error), st *streamState) (*snap.Message, error) {
	var (
		tried  []string
		failed []error
	)
	ended := func(err error) error {
		return fmt.Errorf("client: %w: %w", context.Cause(ctx), err)
	}
	targets := a.plan()
	for _, tg := range targets {
		if tg.skip == nil && tg.probe {
			tg.skip = a.claim(tg)
		}
		if tg.skip != nil {
			failed = append(failed, tg.skip)
			continue
		}
		tried = append(tried, tg.name)
		wait := a.cfg.Backoff
		for attempt := 0; ; attempt++ {
			resp, err := try(tg.t)
			if err == nil {
				after, limited := rateLimited(resp)
				if !limited || attempt >= tg.retries || after > a.cfg.MaxWait || (st != nil && st.delivered) {
					a.answered(tg)
					return resp, nil
				}
				if err := periodic.Sleep(ctx, after); err != nil {
					return nil, ended(err)
				}
				continue
			}
			if ce, ok := errors.AsType[*callerError](err); ok {
				return nil, ce.err
			}
			if ctx.Err() != nil {
				return nil, ended(err)
			}
			if st != nil && st.delivered {
				return nil, fmt.Errorf("client: the stream from %s failed after its first events: %w", tg.name, err)
			}
			if !resend(method, endingOf(err), keyed) {
				// The endpoint took the request and acted on it, or
				// may have: sent again, anywhere, it could act twice.
				return nil, fmt.Errorf("client: %s took the %s: %w: %w%s", tg.name, method, ErrNotSentAgain, err, checkFirst(method))
			}
			if a.cfg.OnRefused != nil && errors.Is(err, ErrPrivateAddress) {
				a.cfg.OnRefused(tg.name, err)
			}
			err = fmt.Errorf("%s: %w", tg.name, err)
			retry, after := retryable(err)
			if !retry || attempt >= tg.retries || after > a.cfg.MaxWait {
				failed = append(failed, err)
				a.failed(tg, err, after)
				break
			}
			if err := periodic.Sleep(ctx, min(max(wait, after), a.cfg.MaxWait)); err != nil {
				return nil, ended(err)
			}
			wait *= 2
		}
	}
	last := ""
	if len(tried) > 0 {
		last = tried[len(tried)-1]
	}
	e := &snap.Error{Code: snap.CodeTransportUnavail, Message: "no transport the card declares reached the agent",
		Data: map[string]any{"tried": tried, "endpoint": last}}
	if len(failed) == 0 {
		return nil, fmt.Errorf("client: %s: %w", a.card.Identity, e)
	}
	return nil, fmt.Errorf("client: %s: %w: %w", a.card.Identity, e, errors.Join(failed...))
}

// target is a transport of an exchange: an endpoint of the card, or
// Nostr.
type target struct {
	name     string
	t        Transport
	retries  int
	endpoint bool  // an endpoint of the card, which may be set aside
	probe    bool  // an endpoint set aside, tried once after its while
	force    bool  // tried once though its while has not passed
	skip     error // an endpoint set aside, not tried: why
}

// plan returns the transports of an exchange in order: the card's
// endpoints, each with its retries or, set aside, skipped until its while
// has passed and then tried once, then Nostr once. When the endpoints
// are all set aside and Nostr does not follow, they are tried, once each.
func (a *cardAgent) plan() []target {
	nostr := a.nostr != nil && (len(a.card.NostrRelays) > 0 || a.cfg.NostrWithoutRelays)
	targets := make([]target, 0, len(a.card.Endpoints)+1)
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.cfg.Now()
	skipped := 0
	for _, ep := range a.card.Endpoints {
		tg := target{name: ep.URL, t: a.endpoint(ep), retries: a.cfg.Retries, endpoint: true}
		if s := a.aside[ep.URL]; s != nil {
			tg.retries, tg.probe = 0, true
			if now.Before(s.until) {
				tg.skip = s.skip()
				skipped++
			}
		}
		targets = append(targets, tg)
	}
	if skipped == len(targets) && !nostr {
		for i := range targets {
			targets[i].skip, targets[i].force = nil, true
		}
	}
	if nostr {
		targets = append(targets, target{name: "nostr", t: a.nostr})
	}
	return targets
}

// claim reports why the exchange must skip tg, an endpoint set aside
// whose while had passed when the exchange began, or claims its one try:
// the other exchanges skip it until this one's try ends (it answers or
// fails) or for its while again. nil: tg is to be tried.
func (a *cardAgent) claim(tg target) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.aside[tg.name]
	if s == nil {
		return nil // it answered another exchange meanwhile
	}
	now := a.cfg.Now()
	if now.Before(s.until) && !tg.force {
		return s.skip()
	}
	s.until = now.Add(s.wait)
	return nil
}

// answered brings back an endpoint set aside that answered.
func (a *cardAgent) answered(tg target) {
	if !tg.endpoint {
		return
	}
	a.mu.Lock()
	_, was := a.aside[tg.name]
	delete(a.aside, tg.name)
	a.mu.Unlock()
	if was {
		a.cfg.Logger.Info("client: an endpoint of the agent's card that was set aside answers again", "agent", a.card.Identity, "endpoint", tg.name)
	}
}

// failed sets aside an endpoint that failed with err, after its retries,
// when err says it is down (a transport error or an HTTP 5xx): for
// SetAside, or the endpoint's Retry-After (after) when longer, the first
// time; for twice as long as before when it failed its one try after
// that, up to MaxSetAside.
func (a *cardAgent) failed(tg target, err error, after time.Duration) {
	if !tg.endpoint || a.cfg.SetAside < 0 || !down(err) {
		return
	}
	a.mu.Lock()
	s := a.aside[tg.name]
	switch {
	case s == nil:
		s = &aside{wait: min(max(a.cfg.SetAside, after), a.cfg.MaxSetAside)}
		a.aside[tg.name] = s
	case tg.probe:
		s.wait = min(max(2*s.wait, after), a.cfg.MaxSetAside)
	default:
		// Another exchange set it aside while this one tried it.
		a.mu.Unlock()
		return
	}
	s.until, s.err = a.cfg.Now().Add(s.wait), err
	wait := s.wait
	a.mu.Unlock()
	if tg.probe {
		a.cfg.Logger.Debug("client: an endpoint of the agent's card set aside failed its try", "agent", a.card.Identity, "endpoint", tg.name, "for", wait, "error", err)
		return
	}
	a.cfg.Logger.Info("client: an endpoint of the agent's card failed and is set aside: the card's next transport is used until it is tried again",
		"agent", a.card.Identity, "endpoint", tg.name, "for", wait, "error", err)
}

// endpoint is the Transport of ep with its declared protocol, whatever its
// URL's scheme says: "wss" is a WebSocket, "http" a POST.
func (a *cardAgent) endpoint(ep snap.Endpoint) Transport {
	if ep.Protocol == "wss" {
		return httpAgent{c: a.h, url: ep.URL, to: a.card.Identity, ws: true}
	}
	return httpAgent{c: a.h, url: httpURL(ep.URL), to: a.card.Identity}
}

// ErrNotSentAgain is wrapped by the error of an exchange of ToCard's
// Transport whose request, of a method SNAP does not call idempotent, the
// agent may have taken and the resend rule does not send again (see
// "What is sent again" in the package documentation): the agent may
// have acted on the request (made or continued a task), and the request
// was not sent again, to that endpoint or any other transport. Whoever
// sends it again chooses to, knowing the agent may act twice.
var ErrNotSentAgain = errors.New("it took the request and gave no SNAP response: the agent may have acted on it, and it is not sent again")

// checkFirst says, after the error of a message/send or message/stream
// not sent again, how to learn what the agent did before sending it
// again.
func checkFirst(method string) string {
	if method != "message/send" && method != "message/stream" {
		return ""
	}
	return "; before sending it again, tasks/get shows the task it continues, if it continues one, and sent again with the same idempotencyKey " +
		"it gets the task the first made from an agent that keeps idempotency keys (one that keeps none makes another)"
}

// Taken reports whether err is the failure of an exchange whose request
// the agent may have taken (see "What is sent again" in the package
// documentation): it answered that it took it without a SNAP response
// (HTTP 500 or 204, an event stream that brought no event), or the
// request was written in full and nothing answered it before the
// connection went quiet, closed or was cut; or the error of ToCard's
// Transport that did not send such a request again (ErrNotSentAgain).
// The agent may have acted on the request.
func Taken(err error) bool {
	return errors.Is(err, ErrNotSentAgain) || endingOf(err) != endNotRead
}

// retryable reports whether an endpoint's failure may pass when tried
// again, and how long the endpoint asked to wait: a refusal of the
// request (an HTTP status other than 429 and 5xx), an answer that fails
// verification or an address the client refuses to connect to does not.
func retryable(err error) (bool, time.Duration) {
	if errors.Is(err, ErrPrivateAddress) {
		return false, 0
	}
	if st, ok := errors.AsType[*StatusError](err); ok {
		return st.StatusCode == http.StatusTooManyRequests || st.StatusCode >= 500, st.RetryAfter
	}
	return !errors.Is(err, ErrInvalidResponse), 0
}

// down reports whether an endpoint's failure says it is down: a transport
// error (a connection that fails, no answer) or an HTTP 5xx. A refusal of
// the request (another status), an answer that fails verification or an
// address the client refuses to connect to says it is up, or is not worth
// remembering.
func down(err error) bool {
	if errors.Is(err, ErrPrivateAddress) || errors.Is(err, ErrInvalidResponse) {
		return false
	}
	if st, ok := errors.AsType[*StatusError](err); ok {
		return st.StatusCode >= 500
	}
	return true
}

// rateLimited reports whether resp is a 5002 refusal whose data says when
// to come back (retryAfter, in seconds, above 0), and that wait.
func rateLimited(resp *snap.Message) (time.Duration, bool) {
	if resp.ErrorCode() != snap.CodeRateLimitExceeded {
		return 0, false
	}
	e := snap.ResponseError(resp.Payload)
	if e == nil {
		return 0, false
	}
	d := dataRetryAfter(e)
	return d, d > 0
}
