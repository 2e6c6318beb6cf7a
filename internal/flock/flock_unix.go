//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package flock

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// Supported tells whether this system has flock.
const Supported = true

// TryExclusive takes an exclusive lock on f if no other open file holds
// one (else ErrHeld).
func TryExclusive(f *os.File) error { return try(f, syscall.LOCK_EX) }

// TryShared takes a shared lock on f if no other open file holds an
// exclusive one (else ErrHeld).
func TryShared(f *os.File) error { return try(f, syscall.LOCK_SH) }

func try(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			if ferr = syscall.Flock(int(fd), how|syscall.LOCK_NB); ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	switch {
	case ferr == nil:
		return nil
	case errors.Is(ferr, syscall.EWOULDBLOCK):
		return ErrHeld
	case errors.Is(ferr, syscall.ENOLCK), errors.Is(ferr, syscall.EOPNOTSUPP), errors.Is(ferr, syscall.EBADF):
		return fmt.Errorf("%w: %w", ErrNoLocks, ferr)
	}
	return fmt.Errorf("flock: %w", ferr)
}
