//go:build !(linux || darwin || dragonfly || freebsd || netbsd || openbsd)

package flock

import "os"

// Supported tells whether this system has flock.
const Supported = false

// TryExclusive takes no lock here: ErrNoLocks.
func TryExclusive(*os.File) error { return ErrNoLocks }

// TryShared takes no lock here: ErrNoLocks.
func TryShared(*os.File) error { return ErrNoLocks }
