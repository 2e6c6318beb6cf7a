//go:build !linux

package sqldb

import "syscall"

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not at hand: the
// keepalive alone finds a server gone, once its connection is idle.
func setUserTimeout(string, string, syscall.RawConn) error { return nil }
