//go:build !unix

package node

import "log/slog"

// lockDataDir takes nothing: the system has no flock. The admin socket
// still refuses a second node, later in its start.
func lockDataDir(string, *slog.Logger) (unlock func() error, err error) {
	return func() error { return nil }, nil
}
