package client

import (
	"context"
	"errors"
	"fmt"
	"net/http"
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
}

// ToCard returns the Transport to the agent of card that follows the SNAP
// specification's fallback strategy. Each exchange tries the card's
// endpoints in their declared order, each with the protocol the card
// declares for it (an "http" endpoint is posted to, its streams coming as
// server-sent events; a "wss" one is a WebSocket), and each with Retries;
// then, when every endpoint failed and the card names Nostr relays, nostr
// (nil: none); a protocol the card does not declare is never used. The
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
// A stream that failed after an event reached onEvent is not sent again:
// its error is returned. Each attempt is a request signed anew (an
// exchange over another transport is another message): a message/send
// that must make one task whichever attempt arrives carries an
// idempotencyKey.
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
	return &cardAgent{card: card, h: h, nostr: nostr, cfg: cfg}, nil
}

type cardAgent struct {
	card  *snap.Card
	h     *HTTP
	nostr Transport
	cfg   FallbackConfig
}

func (a *cardAgent) Send(ctx context.Context, method string, payload []byte) (*snap.Message, error) {
	return a.exchange(ctx, func(t Transport) (*snap.Message, error) { return t.Send(ctx, method, payload) }, nil)
}

func (a *cardAgent) Stream(ctx context.Context, method string, payload []byte, onEvent func(*snap.Message) error) (*snap.Message, error) {
	if onEvent == nil {
		onEvent = func(*snap.Message) error { return nil }
	}
	st := &streamState{onEvent: onEvent}
	return a.exchange(ctx, func(t Transport) (*snap.Message, error) { return t.Stream(ctx, method, payload, st.event) }, st)
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

// exchange runs try on each transport of the card in turn (see ToCard).
func (a *cardAgent) exchange(ctx context.Context, try func(Transport) (*snap.Message, error), st *streamState) (*snap.Message, error) {
	var (
		tried  []string
		failed []error
	)
	ended := func(err error) error {
		return fmt.Errorf("client: %w: %w", context.Cause(ctx), err)
	}
	// The card's endpoints, each with its retries, then Nostr once.
	type target struct {
		name    string
		t       Transport
		retries int
	}
	targets := make([]target, 0, len(a.card.Endpoints)+1)
	for _, ep := range a.card.Endpoints {
		targets = append(targets, target{ep.URL, a.endpoint(ep), a.cfg.Retries})
	}
	if a.nostr != nil && len(a.card.NostrRelays) > 0 {
		targets = append(targets, target{"nostr", a.nostr, 0})
	}
	for _, tg := range targets {
		tried = append(tried, tg.name)
		wait := a.cfg.Backoff
		for attempt := 0; ; attempt++ {
			resp, err := try(tg.t)
			if err == nil {
				after, limited := rateLimited(resp)
				if !limited || attempt >= tg.retries || after > a.cfg.MaxWait || (st != nil && st.delivered) {
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
			err = fmt.Errorf("%s: %w", tg.name, err)
			retry, after := retryable(err)
			if !retry || attempt >= tg.retries || after > a.cfg.MaxWait {
				failed = append(failed, err)
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

// endpoint is the Transport of ep with its declared protocol, whatever its
// URL's scheme says: "wss" is a WebSocket, "http" a POST.
func (a *cardAgent) endpoint(ep snap.Endpoint) Transport {
	if ep.Protocol == "wss" {
		return httpAgent{c: a.h, url: ep.URL, to: a.card.Identity, ws: true}
	}
	return httpAgent{c: a.h, url: httpURL(ep.URL), to: a.card.Identity}
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
	secs, ok := e.Data["retryAfter"].(float64)
	if !ok || secs <= 0 {
		return 0, false
	}
	return time.Duration(min(secs, maxRetryAfter) * float64(time.Second)), true
}
