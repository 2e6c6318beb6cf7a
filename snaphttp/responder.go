package snaphttp

import (
	"context"

	"github.com/snapnode/snapnode/snap"
)

// Responder answers inbound SNAP messages; *snap.Server implements it
// once it streams.
//
// Stream handles one inbound message. For a streaming method
// (message/stream, tasks/resubscribe) it passes each signed event to send,
// in order, then returns the signed final response; for any other method it
// returns the signed response without calling send. It returns nil when the
// message gets no answer (a response or an event that was posted to us).
// When send returns an error the reader is gone or too slow: Stream should
// stop and return soon. Stream ends its stream when ctx ends. It must be
// safe for concurrent use.
type Responder interface {
	Stream(ctx context.Context, in snap.Inbound, send func(*snap.Message) error) *snap.Message
}

// UnaryResponder is a server that answers without streaming, as
// *snap.Server did before it streamed.
type UnaryResponder interface {
	Respond(ctx context.Context, in snap.Inbound) *snap.Message
}

// Unary adapts r to a Responder that never sends events: every method
// gets its single response.
func Unary(r UnaryResponder) Responder { return unary{r} }

type unary struct{ r UnaryResponder }

func (u unary) Stream(ctx context.Context, in snap.Inbound, _ func(*snap.Message) error) *snap.Message {
	return u.r.Respond(ctx, in)
}

var (
	_ UnaryResponder = (*snap.Server)(nil)
	_ Responder      = unary{}
)

// streamMethods are the SNAP methods that answer with events before their
// response (SPEC-NOTES 1.7).
var streamMethods = map[string]bool{"message/stream": true, "tasks/resubscribe": true}

// IsStreamMethod reports whether method answers with events then a final
// response: message/stream and tasks/resubscribe.
func IsStreamMethod(method string) bool { return streamMethods[method] }
