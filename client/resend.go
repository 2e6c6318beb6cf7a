package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
)

// errQuiet and errCut are wrapped by the failure of an exchange, over
// HTTP or WebSocket, whose request was written in full and that ended
// before anything answered it (an HTTP status line, or the body of a 200
// it began; a WebSocket frame): the agent may have read the request and
// acted on it, or not. errQuiet: nothing came for the client's time-out
// (IdleTimeout, NetConfig.ResponseHeaderTimeout). errCut: the connection
// was closed, cut or reset.
var (
	errQuiet = errors.New("(the request was sent in full, and nothing answered it before the time-out)")
	errCut   = errors.New("(the request was sent in full, and the connection closed before an answer)")
)

// ending is what the failure of one attempt of an exchange says of
// whether the agent read the request (see endingOf); resend decides on
// it.
type ending int

const (
	// endNotRead: the request never reached the agent whole (a
	// connection refused, a TLS handshake that failed, a connection
	// closed while the request was written, a WebSocket upgrade
	// answered with an error), or the agent said it did not read it or
	// act on it: an HTTP status other than 500 (429, 502, 503, 504, a
	// 4xx refusal), a WebSocket close 1009, 1003 or 1001 before any
	// answer.
	endNotRead ending = iota
	// endCut: written in full, then the connection closed, was cut or
	// reset before any answer (errCut): the answer may have been lost.
	endCut
	// endQuiet: written in full, then nothing came back within the
	// client's time-out (errQuiet).
	endQuiet
	// endTook: the agent answered that it took the request, with no SNAP
	// response: HTTP 500 or 204, an event stream that brought no event.
	endTook
)

// endingOf classifies err, the failure of one attempt of an exchange
// (see ending).
func endingOf(err error) ending {
	switch {
	case errors.Is(err, errQuiet):
		return endQuiet
	case errors.Is(err, errCut):
		return endCut
	case errors.Is(err, errNoContent), errors.Is(err, errStreamBegun):
		return endTook
	case errors.Is(err, errUpgrade):
		return endNotRead // the request goes after the upgrade
	}
	if st, ok := errors.AsType[*StatusError](err); ok && st.StatusCode == http.StatusInternalServerError {
		return endTook
	}
	return endNotRead
}

// resend is the one rule, for HTTP and WebSocket alike, of whether a
// request of method whose attempt ended so (end) may be sent again, to
// the same endpoint or by the card's next transport; keyed: it carries an
// idempotencyKey. Each attempt is signed anew, with an id of its own, so
// an agent's replay check does not stop a second one: what the agent
// may have taken is sent again only when that cannot make a second task.
//
//   - A method SNAP calls idempotent (repeatable) is sent again whatever
//     the end.
//   - A request the agent did not read (endNotRead) is sent again.
//   - One it answered as taken without a SNAP response (endTook: HTTP 500
//     or 204, an event stream with no event, how an agent of the
//     reference SDK answers a request it took and failed) is not.
//   - One written in full that then brought nothing within the time-out
//     (endQuiet) is not: the agent holds it, may be at work on it, and
//     may keep no idempotency keys (an agent of the reference SDK leaves
//     a WebSocket quiet when it fails).
//   - One written in full whose connection then closed or was cut before
//     any answer (endCut) may be an answer lost on the way: it is sent
//     again only with an idempotencyKey, which an agent that keeps keys
//     (a node does) answers with the task the first made.
func resend(method string, end ending, keyed bool) bool {
	switch {
	case repeatable(method), end == endNotRead:
		return true
	case end == endCut:
		return keyed
	}
	return false
}

// keyed reports whether payload, a message/send's or message/stream's,
// carries an idempotencyKey.
func keyed(payload []byte) bool {
	var p struct {
		Key string `json:"idempotencyKey"`
	}
	return json.Unmarshal(payload, &p) == nil && p.Key != ""
}

// repeatable reports whether a request of method may be sent again
// whatever became of it: the SNAP specification's idempotent methods. A
// message/send or message/stream makes a task each time it is taken
// unless the agent keeps idempotency keys, which SNAP v0.1 makes
// optional and the reference SDK does not do; a service/call acts as its
// service does; an unknown method may do anything.
func repeatable(method string) bool {
	switch method {
	case "tasks/get", "tasks/cancel", "tasks/resubscribe":
		return true
	}
	return false
}

// unanswered marks err, the failure of an exchange whose request was
// written in full before anything answered it, with errQuiet (ctx ended
// with ErrIdleTimeout, or err is a time-out) or errCut (any other end of
// the connection). A failure after ctx ended otherwise (the caller's end)
// is returned as it is.
func unanswered(ctx context.Context, err error) error {
	cause := context.Cause(ctx)
	var ne net.Error
	switch {
	case errors.Is(cause, ErrIdleTimeout):
		return fmt.Errorf("%w %w", ErrIdleTimeout, errQuiet)
	case cause != nil:
		return err
	case errors.Is(err, ErrIdleTimeout), errors.As(err, &ne) && ne.Timeout():
		return fmt.Errorf("%w %w", err, errQuiet)
	}
	return fmt.Errorf("%w %w", err, errCut)
}
