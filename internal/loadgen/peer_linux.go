package loadgen

import (
	"context"
	"fmt"
	"net"
	"syscall"
)

// SocketPID returns the process id of the process listening on the Unix
// socket at path (the node's admin socket), from the peer credentials of a
// connection to it. The connection is closed without a request.
func SocketPID(ctx context.Context, path string) (int, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", path)
	if err != nil {
		return 0, fmt.Errorf("loadgen: node pid: %w", err)
	}
	defer c.Close()
	raw, err := c.(*net.UnixConn).SyscallConn()
	if err != nil {
		return 0, fmt.Errorf("loadgen: node pid: %w", err)
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, fmt.Errorf("loadgen: node pid: %w", err)
	}
	if cerr != nil {
		return 0, fmt.Errorf("loadgen: node pid: peer credentials of %s: %w", path, cerr)
	}
	return int(cred.Pid), nil
}
