// Package client is a SNAP requester: it signs requests, sends them to an
// agent over Nostr or HTTP, and verifies every message that answers them
// before handing it over.
//
// A Transport is one agent reached one way: Send sends one signed request
// and returns its verified answer; Stream does the same for a streaming
// method and passes each verified event on as it arrives. Both transports
// build and sign requests, and check what answers them, with the same
// code: the answer validates (syntax, timestamp window, replay), its
// signature verifies against its from, from is the agent asked, to is the
// requester, and it is a response of the request's method (or, in a
// stream, an event of it). A SNAP error is a response too;
// snap.ResponseError finds it in the payload.
//
// Over Nostr (Nostr, through a relay pool, and Relays to find agents by
// their cards), the request travels sealed with NIP-44 to the agent's
// Nostr key, and a reply counts only when it names the request (e tag) and
// the requester (p tag), is signed by the agent's key and has not expired
// (NIP-40, by the client's clock). Replies that
// fail a check are logged and skipped, so that a forger cannot pre-empt
// the answer; when none passes before the deadline, the error lists what
// was rejected.
//
//	relays := client.DialRelays(ctx, []string{"wss://relay.example"}, logger)
//	defer relays.Close()
//	target, _, err := relays.FindAgent(ctx, agentAddress)
//	agent := relays.Nostr(key, logger).To(target, false)
//	resp, err := agent.Send(ctx, "tasks/get", []byte(`{"taskId":"t-1"}`))
//
// Over HTTP (HTTP), a request is a POST to the agent's /snap endpoint,
// streams come as server-sent events, and a ws:// or wss:// endpoint
// carries the same exchange over a WebSocket. Discover fetches and
// verifies an agent's well-known card, and Call calls a service.
//
// ToCard reaches an agent through its card as the SNAP specification's
// fallback strategy says: its endpoints in their declared order, each with
// its declared protocol and retries, then Nostr when the card names relays
// (or, FallbackConfig.NostrWithoutRelays, the caller found the card on the
// relays its Nostr transport uses), else 4001 TransportUnavailable naming what was tried. The Transport
// remembers the endpoints that failed and sets them aside for its next
// exchanges for a while (FallbackConfig.SetAside), trying each once when
// the while has passed.
//
//	agent, err := client.ToCard(card, httpClient, relays.Nostr(key, logger).To(target, false), client.FallbackConfig{})
//
// # What is sent again
//
// One rule, for HTTP and WebSocket alike, decides whether ToCard's
// Transport sends a request again, to the same endpoint or by the card's
// next transport, after an attempt failed. Each attempt is signed anew,
// with an id of its own, so an agent's replay check does not stop a
// second one; the rule asks what the failure says of whether the agent
// read the request:
//
//   - Not read: the request never reached the agent whole (a connection
//     refused, a TLS handshake that failed, the connection closed while
//     the request was being written, a WebSocket upgrade answered with an
//     error), or the agent said it did not read or act on it (an HTTP
//     status other than 500: 429, 502, 503, 504, a 4xx refusal; a
//     WebSocket close 1009, 1003 or 1001 before any answer: a snapnode
//     node that shuts down answers every request it read before it
//     closes with 1001). Sent again.
//   - Taken: the agent answered that it took the request without a SNAP
//     response (HTTP 500 or 204, an event stream that ended or went quiet
//     before its first event), as an agent of the reference SDK, which
//     keeps no idempotency keys, answers a request it took and failed.
//     Not sent again.
//   - Quiet: the request was written in full, and nothing answered it
//     within the client's time-out (HTTPConfig.IdleTimeout,
//     NetConfig.ResponseHeaderTimeout): the agent holds it, may be at
//     work on it, and may keep no keys. Not sent again, with an
//     idempotencyKey or without.
//   - Cut: the request was written in full, and the connection closed,
//     was reset or cut before any answer (an HTTP status line, the end of
//     a 200's body, a WebSocket frame): the answer may have been lost.
//     Sent again only when the request carries an idempotencyKey, which
//     an agent that keeps keys, as a node does, answers with the task the
//     first made.
//
// tasks/get, tasks/cancel and tasks/resubscribe, which SNAP calls
// idempotent, are sent again whatever the end, and a stream is never sent
// again once an event reached the caller. A request not sent again ends
// the exchange with an error wrapping ErrNotSentAgain; Taken tells the
// failures that may have been taken.
package client
