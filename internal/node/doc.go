// Package node assembles a running snapnode from its parts: the identity,
// the embedded relay (when no relay is configured), the relay pool, the
// task service behind a snap.Server, the Nostr inbox, and the agent card.
// cmd/snapnode's `run` is this package plus flags and signals; tests start
// real nodes with it.
//
//	n, err := node.Start(ctx, cfg, logger)
//	if err != nil { … }
//	fmt.Println(n.Address(), n.RelayURLs())
//	<-ctx.Done()
//	err = n.Wait() // finishes in-flight requests, closes everything
package node
