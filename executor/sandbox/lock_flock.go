//go:build linux || darwin || dragonfly || freebsd || netbsd || openbsd

package sandbox

import (
	"errors"
	"os"
	"syscall"
)

// flock applies how (syscall.LOCK_EX or LOCK_SH, never waiting) to f.
func flock(f *os.File, how int) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var ferr error
	if err := rc.Control(func(fd uintptr) {
		for {
			ferr = syscall.Flock(int(fd), how|syscall.LOCK_NB)
			if ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return ferr
}

// lockTemp takes the writer's lock of the temporary file f, which it
// holds until the file is renamed or removed (or its process ends):
// Sweep, in any process, leaves a locked file alone. errTempTaken: a
// sweep holds it now (it removes it); the writer takes another name. A
// folder whose file system keeps no locks is written all the same.
func lockTemp(f *os.File) error {
	err := flock(f, syscall.LOCK_EX)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return errTempTaken
	}
	return nil
}

// abandoned reports whether no writer holds the temporary file f: true
// once Sweep holds it (until f is closed), false while a writer does or
// when the file system cannot tell.
func abandoned(f *os.File) bool {
	return flock(f, syscall.LOCK_SH) == nil
}

// folderLocks: the folder lock (lockFolder) is taken here.
const folderLocks = true

// tryLockFolder takes the folder lock on f, the lock file, if no other
// open file holds it: held false while one does. An error: the file
// system keeps no locks.
func tryLockFolder(f *os.File) (held bool, err error) {
	err = flock(f, syscall.LOCK_EX)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	return err == nil, err
}
