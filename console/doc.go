// Package console is the operator's web console: server-rendered pages,
// served by the node on its HTTP listener under /console, that show the
// tasks (a live list with filters, each task's messages, artifacts, held
// actions with their descriptor, diff and risk — a diff longer than the
// page shows is said to be cut next to Approve, and downloads whole as a
// plain-text attachment of the bytes Approve names —, the agent's job step by
// step, the task's audit trail), the audit log with its verification
// status, checked against the node's record of its last seal, and its
// last seal (audit.Log.VerifyWithRecord and audit.SealStatusOf, as
// `snapnode audit verify` checks and prints them) and the node's
// metrics, and that approve or deny held actions.
//
// Nobody reaches a page without a session. A session starts from a
// one-time login URL that the host asks the running node for through its
// admin socket (`snapnode console-url`): the token in it is consumed at
// the first use — by a connection of the local user the link was issued
// for, where Config.PeerUser tells a connection's user (the node does on
// Linux), so that a link leaked to another user of the machine logs
// nobody in; a second use is refused and ends the session of the first —
// the browser gets a session cookie (HttpOnly,
// SameSite=Strict, Secure when served over TLS, bounded lifetime) and is
// redirected to a URL without the token: the session's task list, at
// /console/s/<segment>/. Each session's pages are under such a prefix of
// its own, a random value bound to the session (not the cookie's), and its
// cookie's path is that prefix: browsers send a host's cookies to all its
// ports, and a cookie for /console would reach another local user's server
// on another port at its /console/…. Outside the session's prefix nobody
// is logged in. Every POST carries the session's CSRF token. By default only clients on the node's machine are served (on
// loopback, or connecting from the listener's own address to it; a reverse
// proxy on the same machine is one); Config.AllowRemote lifts that.
//
// The console decides nothing itself: Approve and Deny call the Decider,
// the node's one decision path, with the operator identity of the session.
//
//	c, err := console.New(console.Config{Source: src, Decider: dec})
//	…
//	mux.Handle("/console/", c)
//	link, expires, err := c.LoginURL("http://127.0.0.1:7448", executor.Host, uid) // what console-url prints
//
// The package's Example does so with a Source over a task service alone:
// the link opens the session's task list, and is refused (401) when used
// again.
package console
