// Package snapnostr carries SNAP over Nostr: the inbox that receives SNAP
// requests as NIP-44 sealed events and publishes the sealed answers, the
// sealing itself, Agent Card publishing and discovery, and the checkpoint
// that lets the inbox catch up on stored requests after a restart. It is
// built on package relay (the Nostr pool and event signing) and package
// snap (the messages and their handler); it knows nothing of tasks.
//
// # Inbox
//
// An Inbox subscribes, through a Transport (a *relay.Pool), to SNAP
// messages addressed to its key (kinds 21339 and 4339), opens them,
// binds the SNAP sender to the event's author and hands each to a
// snap.Handler; every answer is sealed for the requester and published as
// the request's kind, tagged p (requester) and e (request), with a NIP-40
// expiration on stored kinds. A request whose own NIP-40 expiration has
// passed, as it arrives or by its turn, is dropped unanswered. Requests
// wait in a bounded queue served by Nostr key in turn; what does not
// fit, or exceeds a key's rate limit, is refused at once (5003, 5002)
// rather than left to time out. Stored requests, those a relay sends
// before its stored events are all read (the catch-up after a start or
// an outage), wait for room in the queue instead, and for their key's
// allowance, in a bounded backlog (InboxConfig.Backlog).
//
//	pool := relay.NewPool(relay.PoolConfig{URLs: urls, Logger: log})
//	pool.Start(ctx)
//	defer pool.Close()
//	cp, err := snapnostr.OpenCheckpoint(ctx, db) // or snapnostr.NewMemoryCheckpoint()
//	…
//	in := snapnostr.NewInbox(snapnostr.InboxConfig{
//		Key: key, Transport: pool, Handler: server, Checkpoint: cp, Logger: log,
//	})
//	go in.Run(ctx) // answers until ctx ends, then finishes what it accepted
//	<-in.Ready()   // subscribed: requests published from now on are not missed
//
// The package's Example runs an inbox so on the embedded relay
// (relay/embedded) and asks it a message/send with package client.
//
// # Replicas
//
// Processes sharing one identity and one database share the requests
// out. Replicas keeps this process's beat in the database and its view of
// the others alive; as the inbox's Shares it has the inbox verify, open
// and answer only this process's share, pass over the others' before
// verifying them (relay.Gate), and take up a share whose owner stopped. A
// process takes no share of its own until every other one reports in its
// row that it counts it (the others take every request until then), so
// that no request is taken on time by two processes as one starts:
//
//	reps, err := snapnostr.OpenReplicas(ctx, db, snapnostr.ReplicasConfig{Receiving: connected})
//	…
//	go reps.Run(ctx) // beats until ctx ends, then leaves the others' view
//	in := snapnostr.NewInbox(snapnostr.InboxConfig{
//		Key: key, Transport: pool, Handler: server, Checkpoint: cp, Shares: reps,
//	})
//
// # Cards
//
// CardEvent signs an Agent Card as a kind-31337 event; DiscoverByIdentity
// and DiscoverBySkill query relays for cards and keep only those whose
// identity is the P2TR address of the event's author, counting impostors
// as rejected (the first few kept, with why), as they do expired cards
// (NIP-40) and cards dated further ahead than the timestamp window; they
// read the relays a page at a time, newest first, so that a flood of
// impostors hides no card, and a search by skill gives each relay its
// share of the agents it returns. A card event carries no expiration: it
// stands until the agent publishes a newer one:
//
//	ev, err := snapnostr.CardEvent(card, key, time.Now())
//	…
//	_, err = pool.Publish(ctx, ev)
//	d, rejected, err := snapnostr.DiscoverByIdentity(ctx, pool, "bc1p…", snapnostr.DiscoverConfig{})
//
// # Requesters
//
// A requester seals its requests with a Sealer, publishes them signed
// with relay.SignEvent, and opens the answers with the same Sealer; the
// client package does this for the command line and SDK-style peers.
package snapnostr
