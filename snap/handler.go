package snap

import (
	"context"

	"github.com/snapnode/snapnode/internal/jsondec"
)

// Handler answers the SNAP messages a transport receives: the relay
// inbox (Nostr), POST /snap (HTTP and SSE) and the WebSocket all serve
// one Handler, *Server.
//
// Serve is given one inbound message as the transport received it (raw
// bytes, the signer the transport authenticated, the delivery's name,
// the transport's name and the largest answer it carries, in.MaxSize).
// For a streaming method (IsStreamMethod) it passes each signed event to
// send, in order, one at a time, then returns the signed final response;
// for any other method it returns the signed response and never calls
// send. send may be nil: a streaming method's events are then not made,
// and its final response alone is returned.
// It returns nil when the message gets no answer: a response or an event
// sent to us, or a delivery already taken. send may wait for the peer, as
// a write to a connection does (bounded by the transport's write timeout
// and by ctx): the handler's emit waits with it. When send returns an
// error the reader is gone or too slow: Serve stops the handler and
// returns soon. Every failure, bad input and internal fault alike, is a signed
// response carrying a *Error (internal faults as 5001 without their
// text), never a Go error, so a peer always gets an answer. Serve ends
// its stream when ctx ends, and is safe for concurrent use.
//
// Refuse returns a signed error response for a message the transport
// could not even open (an undecryptable payload, a full queue), addressed
// to no one and echoing no method.
type Handler interface {
	Serve(ctx context.Context, in Inbound, send func(*Message) error) *Message
	Refuse(err *Error) *Message
}

var _ Handler = (*Server)(nil)

// The SNAP methods that answer with events before their final response.
// A transport routes them apart (they may last minutes) and a Router
// accepts only these as streaming handlers.
const (
	MethodMessageStream    = "message/stream"
	MethodTasksResubscribe = "tasks/resubscribe"
)

// IsStreamMethod reports whether method answers with a stream of events
// before its final response: message/stream and tasks/resubscribe.
func IsStreamMethod(method string) bool {
	return method == MethodMessageStream || method == MethodTasksResubscribe
}

// IsStreamRequest reports whether raw, a serialized message not yet
// validated, claims to be a request of a streaming method, so that a
// transport can route it before Serve validates it. It reads the
// top-level members once, without decoding the payload into values, and
// stops at the first that settles it; anything malformed is not a
// stream request (Serve answers it).
func IsStreamRequest(raw []byte) bool {
	dec := jsondec.Get(raw)
	defer jsondec.Put(dec)
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return false
	}
	var typ, method string
	for dec.PeekKind() != '}' {
		tok, err := dec.ReadToken()
		if err != nil {
			return false
		}
		switch name := tok.String(); name {
		case "type", "method":
			v, err := dec.ReadToken()
			if err != nil || v.Kind() != '"' {
				return false
			}
			if name == "type" {
				typ = v.String()
			} else {
				method = v.String()
			}
			if typ != "" && method != "" {
				return Type(typ) == TypeRequest && IsStreamMethod(method)
			}
		default:
			if dec.SkipValue() != nil {
				return false
			}
		}
	}
	return false
}
