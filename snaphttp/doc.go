// Package snaphttp carries SNAP over HTTP, server-sent events and
// WebSocket, as SDK peers speak them: a
// server in front of a snap.Handler (*snap.Server). The requester's side, a
// client that verifies everything it receives, is package client.
//
// Serving:
//
//	srv, err := snaphttp.New(snaphttp.Config{
//		Handler:   server,          // a *snap.Server
//		Key:       key,             // signs the well-known card
//		Card:      node.Card,       // func() *snap.Card
//		Address:   server.Address(),
//	})
//	ln, err := net.Listen("tcp", "127.0.0.1:7448")
//	err = srv.Serve(ctx, ln) // returns after a graceful stop once ctx ends
//
// The Server is an http.Handler too, which the package's examples serve on
// an httptest server: a peer posts a signed message to /snap and reads the
// signed response, and reads the signed card at WellKnownPath.
//
// On the wire:
//   - POST /snap: the signed response with HTTP 200, SNAP errors included
//     (payload.error); a response over MaxResponse (4 MiB by default)
//     is 5001 naming the limit; 413 for a body that is too large (MaxBody,
//     256 KiB by default), 400 for one that is not JSON (1003, data
//     naming the field and reason, as the validator's syntax stage
//     does), 415 (1005) for
//     a Content-Type of another format than JSON, text/plain or none;
//     429 with Retry-After when the peer
//     is over its rate or the messages held at once would exceed
//     BodyMemory, before the body is read; 503 with Retry-After (5003,
//     limit "answer_memory") when AnswerMemory, the answers being
//     written at once, has no room for the answer's reservation, before
//     the request is handled (an answer that outgrows its reservation
//     and finds no room is sent abridged, never 503); 202 with no body
//     for a response or event posted to us, which is never answered.
//     SNAP-Version is sent on every response and never required.
//   - POST /snap with Accept: text/event-stream: 200, each message a
//     "data: <one-line JSON>\n\n" frame flushed at once, events then the
//     one final response, then the body ends. A stream request's headers
//     are flushed before its handler runs, so that the stream shows as
//     open while its first event is made.
//   - SSE and WebSocket streams apply backpressure: a stream's handler
//     waits in emit while its queue (StreamBuffer frames,
//     StreamBufferBytes bytes) is full, so a burst
//     reaches a peer that reads steadily whole; a peer that takes nothing
//     for WriteTimeout is too slow (ErrSlowReader): its stream ends and
//     its connection is closed.
//   - GET /snap upgraded to WebSocket: one text frame per message; exactly
//     one frame answers a non-streaming method; requests on one connection
//     are answered in order, one at a time. A binary frame is not read:
//     it gets a signed 1005 {provided: "binary", supported: ["text"]},
//     then the close 1003.
//   - GET /.well-known/snap-agent.json: the SignedAgentCard, signed afresh
//     when the card changes and every CardResign.
//   - GET /healthz, and /metrics when Config.Metrics is set, each peer
//     limited to Config.MonitorRate apart from its SNAP allowance (429
//     with Retry-After past it); /metrics answers clients on loopback
//     only, others the 404 of no metrics, unless Config.MetricsPublic.
//     Monitor limits a /metrics served on a
//     listener of its own the same way, and a MonitorServer serves it
//     there with the host names and connection caps of this list.
//   - The operator console under /console when Config.Console is set.
//   - Connections are capped in all and per peer (MaxTCPConns,
//     MaxTCPConnsPerPeer): over a cap the longest-idle connection is
//     closed to make room, or the new one is answered 503 or 429 and
//     closed.
package snaphttp
