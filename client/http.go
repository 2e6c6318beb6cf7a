package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/snapnode/snapnode/identity"
	"github.com/snapnode/snapnode/internal/defaults"
	"github.com/snapnode/snapnode/internal/retryafter"
	"github.com/snapnode/snapnode/internal/wshandshake"
	"github.com/snapnode/snapnode/snap"
	"github.com/snapnode/snapnode/snaphttp"
)

// Errors of the HTTP client.
var (
	// ErrNoAnswer: the exchange ended without a final response (202, a
	// stream or connection that ended early).
	ErrNoAnswer = errors.New("client: no response")
	// ErrIdleTimeout: a stream sent nothing for the client's IdleTimeout.
	ErrIdleTimeout = errors.New("client: stream idle for too long")
)

// errNoContent is an HTTP 204: the server took the message and has no
// answer to it (an agent of the reference SDK whose handler returned
// nothing).
var errNoContent = errors.New("HTTP 204")

// errStreamBegun is a stream that the server began (HTTP 200,
// text/event-stream) and that ended, or went quiet, before its first
// event: the server took the request. An agent of the reference SDK
// writes the headers before its handler runs, and on the handler's
// failure ends nothing.
var errStreamBegun = errors.New("(the agent began its event stream, and sent no event)")

// errUpgrade is wrapped by the StatusError of a WebSocket upgrade that
// failed: the request, which goes after the upgrade, was not sent.
var errUpgrade = errors.New("(the answer to the WebSocket upgrade: the request was not sent)")

// StatusError is an HTTP answer other than 200 (or 202): the server did
// not take the message as a SNAP exchange.
type StatusError struct {
	StatusCode int
	// RetryAfter is the wait the Retry-After header of a 429 or 503
	// asks for, given in seconds or as an HTTP-date, else the one the
	// error's data.retryAfter gives in seconds, or 0.
	RetryAfter time.Duration
	// Body is the start of the response body.
	Body string
	// Err is the SNAP error the body carries ({"error": …}), if any: a
	// service's refusal of a service/call, for one.
	Err *snap.Error
}

// Unwrap returns the SNAP error of the body, if any.
func (e *StatusError) Unwrap() error {
	if e.Err == nil {
		return nil
	}
	return e.Err
}

func (e *StatusError) Error() string {
	s := fmt.Sprintf("client: HTTP %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	if e.RetryAfter > 0 {
		s += fmt.Sprintf(" (retry after %v)", e.RetryAfter)
	}
	if e.Body != "" {
		s += ": " + e.Body
	}
	return s
}

// HTTP client defaults.
const (
	DefaultIdleTimeout = 30 * time.Second
	maxErrorBody       = 512
)

// HTTPConfig configures an HTTP client.
type HTTPConfig struct {
	// Key signs requests given unsigned; nil: requests must come signed.
	Key *identity.Key
	// HTTP sends the requests; nil: a client made after Net, the context
	// bounding each call besides.
	HTTP *http.Client
	// Dialer opens WebSocket connections; nil: one made after Net.
	Dialer *websocket.Dialer
	// Net is how the client and the dialer NewHTTP makes connect: their
	// time-outs, redirects and the addresses refused.
	Net NetConfig
	// Now and MaxDrift are the timestamp check of what is received.
	Now      func() time.Time
	MaxDrift time.Duration
	// IdleTimeout ends a stream, SSE or WebSocket, that sends nothing for
	// that long (default 30 s, as SDK peers do).
	IdleTimeout time.Duration
	// MaxMessage bounds one received message (default snap.MaxMessageSize).
	MaxMessage int
}

// HTTP sends SNAP requests over HTTP, SSE and WebSocket and verifies every
// message received with the checks every transport shares (see
// Transport). It is safe for concurrent use.
type HTTP struct {
	requester
	cfg HTTPConfig
}

// followRedirect is the redirect rule of the client NewHTTP makes unless
// NetConfig.NoRedirects: a request is signed for one agent, so it goes only where it
// was sent. The one redirect followed is the same host's move from http to
// https, on the same port or from the default one to the default one (80
// to 443); any other (another host or port, or https down to http, which
// would carry the request in the clear) fails the exchange, naming where
// it led.
func followRedirect(req *http.Request, via []*http.Request) error {
	prev := via[len(via)-1].URL
	// A 301, 302 or 303 turns the POST into a GET without its body: only
	// a redirect that keeps the method (307, 308) can carry the request.
	if len(via) < 3 && req.Method == via[0].Method && prev.Scheme == "http" && req.URL.Scheme == "https" &&
		strings.EqualFold(prev.Hostname(), req.URL.Hostname()) && samePort(prev.Port(), req.URL.Port()) {
		return nil
	}
	return fmt.Errorf("client: the agent redirected to %s; only a move of the same host and port from http to https is followed", req.URL.Redacted())
}

// samePort reports whether an https URL's port (https, "" for the default)
// is the one of the http URL it moves to (http): the same, or the default
// of each scheme.
func samePort(http, https string) bool {
	return http == https || (http == "" || http == "80") && (https == "" || https == "443")
}

// NewHTTP returns an HTTP client.
func NewHTTP(cfg HTTPConfig) *HTTP {
	hc, ws := newNet(cfg.Net)
	if cfg.HTTP == nil {
		cfg.HTTP = hc
	}
	if cfg.Dialer == nil {
		cfg.Dialer = ws
	}
	defaults.Positive(&cfg.IdleTimeout, DefaultIdleTimeout)
	defaults.Positive(&cfg.MaxMessage, snap.MaxMessageSize)
	return &HTTP{requester: newRequester(cfg.Key, cfg.Now, cfg.MaxDrift, nil), cfg: cfg}
}

// To returns the Transport to the agent address served at endpoint, its
// SNAP URL: http(s) posts (streams over SSE), ws(s) uses WebSocket.
func (c *HTTP) To(endpoint, address string) Transport {
	return httpAgent{c: c, url: endpoint, to: address,
		ws: strings.HasPrefix(endpoint, "ws://") || strings.HasPrefix(endpoint, "wss://")}
}

type httpAgent struct {
	c       *HTTP
	url, to string
	ws      bool
}

func (a httpAgent) Send(ctx context.Context, method string, payload []byte) (*snap.Message, error) {
	m := &snap.Message{To: a.to, Method: method, Payload: payload}
	if a.ws {
		return a.c.SendWS(ctx, a.url, m)
	}
	return a.c.Send(ctx, a.url, m)
}

func (a httpAgent) Stream(ctx context.Context, method string, payload []byte, onEvent func(*snap.Message) error) (*snap.Message, error) {
	m := &snap.Message{To: a.to, Method: method, Payload: payload}
	if a.ws {
		return a.c.StreamWS(ctx, a.url, m, onEvent)
	}
	return a.c.Stream(ctx, a.url, m, onEvent)
}

func (c *HTTP) post(ctx context.Context, url string, x *exchange, accept string) (*http.Response, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(x.body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("SNAP-Version", snap.ProtocolVersion)
	if accept != "" {
		hreq.Header.Set("Accept", accept)
	}
	// written tells whether the last request written (a redirect's or
	// net/http's own retry is another) went out in full.
	var written atomic.Bool
	hreq = hreq.WithContext(httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		GetConn:      func(string) { written.Store(false) },
		WroteRequest: func(i httptrace.WroteRequestInfo) { written.Store(i.Err == nil) },
	}))
	resp, err := c.cfg.HTTP.Do(hreq)
	if err != nil {
		// A response comes with an error only when the client refused
		// to follow the redirect it is (http.Client.Do): the agent
		// answered, and did not take the request there.
		if resp == nil && written.Load() {
			// No status line came: the agent may have taken it.
			return nil, unanswered(ctx, err)
		}
		return nil, err
	}
	switch resp.StatusCode {
	case http.StatusOK:
		return resp, nil
	case http.StatusNoContent:
		resp.Body.Close()
		return nil, fmt.Errorf("%w: %w", ErrNoAnswer, errNoContent)
	case http.StatusAccepted:
		resp.Body.Close()
		return nil, fmt.Errorf("%w: HTTP %d", ErrNoAnswer, resp.StatusCode)
	}
	defer resp.Body.Close()
	return nil, c.statusError(resp)
}

func (c *HTTP) statusError(resp *http.Response) *StatusError {
	e := &StatusError{StatusCode: resp.StatusCode}
	e.RetryAfter = min(retryafter.Parse(resp.Header.Get("Retry-After"), c.now()), maxRetryAfter)
	if resp.Body != nil {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		e.Body = strings.TrimSpace(string(b))
		if se := snap.ResponseError(b); se != nil && se.Code != 0 {
			e.Err = se
			if e.RetryAfter == 0 {
				e.RetryAfter = dataRetryAfter(se)
			}
		}
	}
	return e
}

// maxRetryAfter bounds the wait a Retry-After or a retryAfter asks for:
// over 34 years is as good as never.
const maxRetryAfter = (1 << 30) * time.Second

// dataRetryAfter is the wait a SNAP error's data.retryAfter asks for (in
// seconds), at most maxRetryAfter; 0 when it gives none.
func dataRetryAfter(e *snap.Error) time.Duration {
	secs, _ := e.Data["retryAfter"].(float64)
	return min(retryafter.Seconds(secs), maxRetryAfter)
}

// postRead posts x to url (post) and reads the body of the answer
// (readAll).
func (c *HTTP) postRead(ctx context.Context, url string, x *exchange) ([]byte, error) {
	resp, err := c.post(ctx, url, x, "")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := c.readAll(resp.Body)
	if err != nil && !errors.Is(err, ErrInvalidResponse) {
		// The agent began its answer: it took the request.
		return nil, unanswered(ctx, err)
	}
	return b, err
}

// readAll reads at most MaxMessage bytes of r.
func (c *HTTP) readAll(r io.Reader) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, int64(c.cfg.MaxMessage)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > c.cfg.MaxMessage {
		return nil, fmt.Errorf("%w: over %d bytes", ErrInvalidResponse, c.cfg.MaxMessage)
	}
	return b, nil
}

// Send posts req to url (an agent's /snap endpoint) and returns its
// verified response; SNAP errors are responses too (see snap.ResponseError).
// An unsigned req is signed with the client's key, in place.
func (c *HTTP) Send(ctx context.Context, url string, req *snap.Message) (*snap.Message, error) {
	x, err := c.prepare(req)
	if err != nil {
		return nil, err
	}
	raw, err := c.postRead(ctx, url, x)
	if err != nil {
		return nil, err
	}
	got, err := x.check(ctx, raw, nil, false)
	if err != nil {
		return nil, err
	}
	return got.Message, nil
}

// Stream posts req to url asking for server-sent events, passes each
// verified event to fn as it arrives, and returns the verified final
// response. A server that answers with plain JSON gives the response
// alone. Any message that fails verification, an error from fn, a stream
// idle for IdleTimeout, or the end of the body before the response ends
// the call with an error. A nil fn ignores the events. An unsigned req is
// signed in place, as by Send.
func (c *HTTP) Stream(ctx context.Context, url string, req *snap.Message, fn func(*snap.Message) error) (*snap.Message, error) {
	x, err := c.prepare(req)
	if err != nil {
		return nil, err
	}
	if fn == nil {
		fn = func(*snap.Message) error { return nil }
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	idle := time.AfterFunc(c.cfg.IdleTimeout, func() { cancel(ErrIdleTimeout) })
	defer idle.Stop()
	resp, err := c.post(ctx, url, x, "text/event-stream")
	if err != nil {
		return nil, streamErr(ctx, err)
	}
	defer resp.Body.Close()
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "text/event-stream":
	case "application/json":
		raw, err := c.readAll(resp.Body)
		if err != nil && !errors.Is(err, ErrInvalidResponse) {
			// The agent began its answer: it took the request.
			err = unanswered(ctx, err)
		}
		if err != nil {
			return nil, streamErr(ctx, err)
		}
		got, err := x.check(ctx, raw, nil, false)
		if err != nil {
			return nil, err
		}
		return got.Message, nil
	default:
		return nil, fmt.Errorf("%w: Content-Type %q", ErrInvalidResponse, resp.Header.Get("Content-Type"))
	}
	rd := newSSEReader(resp.Body, c.cfg.MaxMessage)
	for events := 0; ; events++ {
		data, err := rd.next()
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: the stream ended before the final response", ErrNoAnswer)
		} else if err != nil {
			err = streamErr(ctx, err)
		}
		if err != nil {
			if events == 0 && !errors.Is(err, ErrEventTooLarge) {
				// The agent took the request (see took).
				err = fmt.Errorf("%w %w", err, errStreamBegun)
			}
			return nil, err
		}
		idle.Reset(c.cfg.IdleTimeout)
		got, err := x.check(ctx, data, nil, true)
		if err != nil {
			return nil, err
		}
		if got.Type == snap.TypeResponse {
			return got.Message, nil
		}
		if err := fn(got.Message); err != nil {
			return nil, err
		}
	}
}

// streamErr prefers the cause of ctx's end (ErrIdleTimeout) to the read
// error it provoked, save in a failure post marked (see unanswered).
func streamErr(ctx context.Context, err error) error {
	if errors.Is(err, errQuiet) || errors.Is(err, errCut) {
		return err
	}
	if cause := context.Cause(ctx); cause != nil {
		if errors.Is(cause, ErrIdleTimeout) {
			return ErrIdleTimeout
		}
		return cause
	}
	return err
}

// SendWS sends req over a new WebSocket connection to url and returns the
// one frame that answers it, verified. An event is refused: a
// non-streaming method is answered by exactly one response.
func (c *HTTP) SendWS(ctx context.Context, url string, req *snap.Message) (*snap.Message, error) {
	return c.ws(ctx, url, req, nil)
}

// StreamWS sends req over a new WebSocket connection to url, passes each
// verified event to fn (nil: ignored), and returns the verified final
// response.
func (c *HTTP) StreamWS(ctx context.Context, url string, req *snap.Message, fn func(*snap.Message) error) (*snap.Message, error) {
	if fn == nil {
		fn = func(*snap.Message) error { return nil }
	}
	return c.ws(ctx, url, req, fn)
}

// schemes pairs the web and WebSocket schemes of one endpoint.
var schemes = [][2]string{{"http://", "ws://"}, {"https://", "wss://"}}

// wsURL turns an http(s) URL into the ws(s) one of the same endpoint.
func wsURL(u string) string { return swapScheme(u, 0, 1) }

// httpURL turns a ws(s) URL into the http(s) one of the same endpoint.
func httpURL(u string) string { return swapScheme(u, 1, 0) }

// swapScheme returns u with the scheme at index from of its pair in
// schemes replaced by the one at index to; u when it has neither.
func swapScheme(u string, from, to int) string {
	for _, p := range schemes {
		if rest, ok := strings.CutPrefix(u, p[from]); ok {
			return p[to] + rest
		}
	}
	return u
}

func (c *HTTP) ws(ctx context.Context, url string, req *snap.Message, fn func(*snap.Message) error) (*snap.Message, error) {
	x, err := c.prepare(req)
	if err != nil {
		return nil, err
	}
	// The agent's answer to the upgrade is read within wshandshake.Max.
	d, handshake := wshandshake.Bounded(c.cfg.Dialer)
	conn, resp, err := d.DialContext(ctx, wsURL(url), http.Header{"SNAP-Version": {snap.ProtocolVersion}})
	handshake.Done()
	if err != nil {
		if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
			defer resp.Body.Close()
			return nil, fmt.Errorf("%w %w", c.statusError(resp), errUpgrade)
		}
		return nil, err
	}
	defer conn.Close()
	// Ending ctx unblocks the reads.
	stop := context.AfterFunc(ctx, func() { conn.NetConn().SetDeadline(time.Now()) })
	defer stop()
	conn.SetReadLimit(int64(c.cfg.MaxMessage))
	_ = conn.SetWriteDeadline(time.Now().Add(c.cfg.IdleTimeout))
	if err := conn.WriteMessage(websocket.TextMessage, x.body); err != nil {
		return nil, wsErr(ctx, err)
	}
	for frames := 0; ; frames++ {
		_ = conn.SetReadDeadline(time.Now().Add(c.cfg.IdleTimeout))
		_, data, err := conn.ReadMessage()
		if err != nil {
			if frames > 0 || wsNotRead(err) {
				return nil, wsErr(ctx, err)
			}
			// The request went out in full and nothing answered it:
			// the agent may have taken it.
			return nil, unanswered(ctx, wsErr(ctx, err))
		}
		got, err := x.check(ctx, data, nil, fn != nil)
		if err != nil {
			return nil, err
		}
		if got.Type == snap.TypeResponse {
			_ = conn.WriteControl(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, ""), time.Now().Add(time.Second))
			return got.Message, nil
		}
		if err := fn(got.Message); err != nil {
			return nil, err
		}
	}
}

// wsNotRead reports whether err, the end of a WebSocket before any frame
// answered the request, is a close that says the agent did not read the
// request: 1009, the message too big for it; 1003, data of a kind it
// does not take; 1001 (going away), as a snapnode node closes once its
// shutdown began, after it answered every request it read (those it read
// ahead and will not handle with the signed 5003).
func wsNotRead(err error) bool {
	return websocket.IsCloseError(err, websocket.CloseMessageTooBig, websocket.CloseUnsupportedData, websocket.CloseGoingAway)
}

func wsErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return ErrIdleTimeout
	}
	if _, ok := err.(*websocket.CloseError); ok {
		return fmt.Errorf("%w: %w", ErrNoAnswer, err)
	}
	return err
}

// Discover fetches the well-known card of the agent at baseURL (one
// trailing slash is dropped, then /.well-known/snap-agent.json appended,
// as SDK peers do) and verifies it: the card is valid, the signature over
// JCS(card) ‖ "|" ‖ timestamp verifies against publicKey, and publicKey is
// the output key of the card's identity.
func (c *HTTP) Discover(ctx context.Context, baseURL string) (*snap.Card, *snap.SignedCard, error) {
	u := strings.TrimSuffix(baseURL, "/") + snaphttp.WellKnownPath
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, nil, err
	}
	hreq.Header.Set("Accept", "application/json")
	resp, err := c.cfg.HTTP.Do(hreq)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, nil, c.statusError(resp)
	}
	// The card is at most 64 KB; the signature, key and timestamp add
	// little.
	const limit = snap.MaxCardSize + 4096
	raw, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, nil, err
	}
	if len(raw) > limit {
		return nil, nil, fmt.Errorf("client: the well-known card is over %d bytes", limit)
	}
	return snap.VerifySignedCard(raw)
}
