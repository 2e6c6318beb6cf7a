//go:build !unix

package node

// lockDataDir takes nothing: the system has no flock. The admin socket
// still refuses a second node, later in its start.
func lockDataDir(string) (unlock func() error, err error) { return func() error { return nil }, nil }
