package snap

import "context"

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
// send, so a transport that cannot stream may pass a send that discards.
// It returns nil when the message gets no answer: a response or an event
// sent to us, or a delivery already taken. When send returns an error
// the reader is gone or too slow: Serve stops the handler and returns
// soon. Every failure, bad input and internal fault alike, is a signed
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
