package flock

import "errors"

var (
	// ErrHeld: another open file holds a lock that excludes this one.
	ErrHeld = errors.New("flock: held by another")
	// ErrNoLocks: the system, or the file system the file is on, keeps
	// no such locks (ENOLCK, EOPNOTSUPP; EBADF on NFS, which emulates
	// flock with POSIX locks, for a file opened only for reading).
	ErrNoLocks = errors.New("flock: the file system keeps no locks")
)
