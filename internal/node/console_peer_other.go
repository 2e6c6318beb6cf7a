//go:build !linux

package node

import "net/http"

// consolePeerUser is the console's Config.PeerUser: nil where the node
// cannot tell a connection's local user, and a login link is spent by
// whoever brings it first.
func consolePeerUser() func(*http.Request) (int, error) { return nil }
