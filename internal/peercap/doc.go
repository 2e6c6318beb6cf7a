// Package peercap counts a server's connections by peer, so that no one
// address takes them all: the node's HTTP transport and its embedded
// relay share it.
//
// A peer is an address as Key groups it: an IPv4 address (IPv4-mapped
// IPv6 included) as itself, an IPv6 address by its /64, the block one
// host is usually given, so that a host cannot take a fresh address for
// each connection.
//
// Use:
//
//	conns := peercap.New(64, 4096, nil)
//	key := peercap.Key(req.RemoteAddr)
//	if status := conns.Acquire(key); status != 0 {
//		http.Error(w, "too many connections", status)
//		return
//	}
//	defer conns.Release(key)
//
// A Listener counts the connections a listener accepts in the same way,
// from their accept to their close, whatever is done with them; an
// http.Server serving it reports through its ConnState hook which are
// idle, to be closed to make room:
//
//	capped := peercap.NewListener(ln, peercap.ListenerConfig{Total: 4096, PerPeer: 64})
//	srv := &http.Server{Handler: h, ConnState: capped.ConnState}
//	err := srv.Serve(capped)
package peercap
