// Package admin is the node's local administration channel: a Unix socket
// in the data folder (0600, in a 0700 folder) through which the operator of
// the machine lists held actions (`snapnode held`), approves or denies
// them and rolls promoted ones back (`snapnode approve|deny|rollback`),
// and asks for a one-time login URL to
// the operator web console (`snapnode console-url`). Whoever can open the socket acts as
// the host; the server also checks, on Linux, that the peer runs as the
// node's own user.
//
//	srv, err := admin.Listen(filepath.Join(dataDir, admin.SocketName), handler, logger)
//	go srv.Serve(ctx)
//	…
//	resp, err := admin.Call(ctx, filepath.Join(dataDir, admin.SocketName), admin.Request{Op: "approve", Task: id})
//
// The protocol is one JSON request per connection, at most MaxMessage
// bytes, answered by one JSON response, at most MaxResponse bytes. A
// request with a member the node does not know is refused, naming it, and
// nothing is carried out. At most MaxConns connections are served at
// once; one past them is answered that the socket is busy, with nothing
// carried out.
package admin
