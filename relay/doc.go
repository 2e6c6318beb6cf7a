// Package relay is everything Nostr in snapnode: the client-side relay
// pool, the inbox and outbox that carry SNAP messages as NIP-44 sealed
// events, Agent Card publishing and discovery, and (in relay/embedded) the
// relay server that runs by default. It must not know task semantics.
//
// # Pool
//
// A Pool keeps one connection to each configured relay and offers them as
// one. Start connects in the background; each relay has a single goroutine
// that dials, reads, and after a drop waits out a capped, jittered
// exponential backoff (500 ms to 30 s by default) before dialing again.
// Close stops them all and waits.
//
//	p := relay.NewPool(relay.PoolConfig{URLs: urls, Logger: log})
//	p.Start(ctx)
//	defer p.Close()
//	sub, err := p.Subscribe(ctx, nostr.Filter{Kinds: []int{relay.KindEphemeral, relay.KindMessage},
//		Tags: nostr.TagMap{"p": {myPubKey}}, Since: &since})
//	…
//	for ev := range sub.Events() { … } // verified, filtered, each event once
//
// Subscriptions are the pool's own, built on single-relay connections
// (go-nostr's pool would restart them at "now" after a reconnect and lose
// what was published during the gap). Every event is checked before it is
// delivered: its id must be the hash of its content, its signature the
// author's, and it must match the subscription's filter (some relays
// ignore multi-letter tag filters). Events are deduplicated per
// subscription across relays and reconnects, in a set bounded in size and
// age. When a connection comes back, each subscription that relay had
// already served (EOSE) is sent again with since = max(original since,
// last seen created_at − ResubscribeSkew), so events published during the
// gap arrive, once.
//
// Everything is bounded: the dedupe set, each connection's queues, and
// each subscription's buffer. A subscription whose reader lets its buffer
// fill is given SlowConsumerTimeout to make room, then ended alone with
// ErrSlowConsumer; the others are held up at most that long.
//
// Publish sends an event to every connected relay and succeeds when one
// answers OK true, returning each relay's outcome. Query collects stored
// events until every relay has sent EOSE. Health reports each relay's
// state, last error, reconnections and event counts.
//
// # Messages, cards, embedded relay
//
// The inbox subscribes for events addressed to the node, opens them
// (NIP-44 v2, conversation keys cached per peer), binds the SNAP sender to
// the event's author and hands requests to the SNAP router; the outbox
// seals and publishes the replies with the request's kind and the p and e
// tags SDK peers expect. Cards are published as kind-31337 events and
// discovered by identity or skill, checking that the card's identity is
// the P2TR address of the event's author. The embedded relay in
// relay/embedded is what snapnode connects to when no relay is configured,
// and what integration tests start.
package relay
