// Package embedded is a small, complete NIP-01 Nostr relay that snapnode runs
// by default (on loopback) and that tests start on 127.0.0.1:0. It can also
// run alone as "snapnode relay".
//
// It speaks NIP-01 over WebSocket (EVENT, REQ, CLOSE; OK, EVENT, EOSE,
// CLOSED, NOTICE), answers NIP-11 information requests on the same URL,
// honours the kind classes of NIP-01 (regular, replaceable, ephemeral,
// addressable; formerly NIP-16 and NIP-33) and NIP-40 expiration, and keeps
// events in SQLite with their tags in a side table, so that tag filters,
// single-letter or not ("#p", "#skill"), are index lookups.
//
// Every resource is bounded: message size, subscriptions per connection,
// filters per REQ, values per filter, subscription id length, the limit of a
// query, the memory the open subscriptions of one address hold, the stored
// events one address's requests have loaded and not yet sent, the queries
// one address runs at once and the time one request's queries take
// (Config.MaxQueriesPerIP, QueryTimeout), the REQs of one connection a
// second (ReqsPerSecond), the clients
// connected, each connection's outbound queue, and the
// database itself (Config.StoreMaxEvents, StoreMaxBytes: past either, the
// oldest stored events make room; StorePeerShare: past its share of them,
// a peer's own oldest do). A client that reads too slowly to drain
// its queue is disconnected; it never slows down the publisher or the other
// subscribers.
//
// Use:
//
//	r, err := embedded.New(embedded.Config{DBPath: filepath.Join(dataDir, "relay.db")})
//	if err != nil {
//		return err
//	}
//	defer r.Close()
//	ln, err := net.Listen("tcp", "127.0.0.1:0")
//	if err != nil {
//		return err
//	}
//	fmt.Println("relay at", embedded.WebSocketURL(ln.Addr()))
//	return r.Serve(ctx, ln) // returns when ctx is cancelled
//
// A program that runs the relay and a relay.Pool can connect them in-process
// with Relay.LocalConn (as PoolConfig.Dial for the relay's URL): the pool's
// connection is then served like any WebSocket client — same checks,
// storage, subscriptions, queues and limits — without a socket or JSON in
// between. The connection is a relay.InProcessConn: the pool takes each
// live event in the goroutine that handled its publication, and does not
// check again what the relay checked.
//
// A Relay is also an http.Handler, so it can be mounted in another server
// (or httptest.NewServer); then call Sweep now and then to delete expired
// events, which Serve otherwise does every Config.SweepInterval.
package embedded
