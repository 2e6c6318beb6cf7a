//go:build !linux

package admin

import "net"

// samePeer relies on the socket's mode (0600) where peer credentials are
// not read.
func samePeer(*net.UnixConn) error { return nil }
