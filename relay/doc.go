// Package relay is snapnode's Nostr layer: the client-side relay pool, the
// event verifier and signer, and (in relay/embedded) the relay server that
// runs by default. It knows Nostr events, not what they carry: SNAP over
// Nostr (the inbox, sealed replies, Agent Cards, the inbox checkpoint)
// lives in package snapnostr, built on this one.
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
// delivered: it must match the subscription's filter (some relays
// ignore multi-letter tag filters; checked first, before any hashing),
// its id must be the hash of its content and its signature the author's.
// A copy that fails is not marked seen, so the genuine event from another
// relay is still taken. Events are deduplicated per
// subscription across relays and reconnects, in a set bounded in size and
// age. When a connection comes back, each subscription that relay had
// already served (EOSE) is sent again with since = max(original since,
// the last created_at that relay brought − ResubscribeSkew), so events
// published during the gap arrive, once. Each relay resumes from its own
// last event, not from the newest any relay brought: a relay that was
// away may hold events, published to it alone, older than those the
// others delivered meanwhile. Its point moves only with the events it
// brought before its EOSE once that EOSE comes (stored events come newest
// first: a connection that drops part way through them is asked for the
// older ones again). Relays cap the stored events one REQ returns, so a
// relay whose REQ (one with a since and no limit) brought stored events is
// asked for those before the oldest it brought, a page at a time (until,
// inclusive, under a subscription id of its own), until a page brings
// nothing older, at most MaxCatchUpPages; its point moves only then (see
// Subscribe). A relay that brought no event yet is asked with the
// original filter.
//
// Everything is bounded: the dedupe set, each connection's queues, each
// subscription's buffer, its resume points (one a relay) and the ids it
// keeps past the dedupe set's age for relays that may resend them
// (DedupeSize at most). A subscription whose reader lets its buffer
// fill is given SlowConsumerTimeout to make room, then ended alone with
// ErrSlowConsumer; the others are held up at most that long.
//
// Publish sends an event to every connected relay, and to each relay
// that connects while the answers are awaited, and succeeds when one
// answers OK true, returning each relay's outcome. It returns as soon as
// one relay accepted and no other has answered yet: a relay slow to
// answer, or silent, holds up no publication another took; its answer is
// still awaited in the background (a bounded number per relay) and
// logged. Query collects stored
// events until every relay has sent EOSE (it does not page). Health
// reports each relay's state, last error, reconnections, event counts and
// catch-up pages.
//
// # Embedded relay
//
// The embedded relay in relay/embedded is what snapnode connects to when
// no relay is configured, and what integration tests start.
package relay
