//go:build !linux

package loadgen

import (
	"context"
	"errors"
)

// SocketPID is only available on Linux, where peer credentials give the
// process at the other end of a Unix socket.
func SocketPID(ctx context.Context, path string) (int, error) {
	return 0, errors.New("loadgen: the node's pid is read from the admin socket on Linux only; give --pid")
}
