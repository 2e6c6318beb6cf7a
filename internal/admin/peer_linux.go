package admin

import (
	"fmt"
	"net"
	"os"
	"syscall"
)

// samePeer refuses a peer that does not run as the node's user (root
// excepted): the socket's mode already keeps others out, this holds even
// if the folder's modes are loosened. It returns the peer's uid.
func samePeer(c *net.UnixConn) (int, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return 0, err
	}
	var cred *syscall.Ucred
	var cerr error
	if err := raw.Control(func(fd uintptr) {
		cred, cerr = syscall.GetsockoptUcred(int(fd), syscall.SOL_SOCKET, syscall.SO_PEERCRED)
	}); err != nil {
		return 0, err
	}
	if cerr != nil {
		return 0, fmt.Errorf("peer credentials: %w", cerr)
	}
	if uid := uint32(os.Getuid()); cred.Uid != uid && cred.Uid != 0 {
		return 0, fmt.Errorf("peer runs as uid %d, the node as %d", cred.Uid, uid)
	}
	return int(cred.Uid), nil
}
