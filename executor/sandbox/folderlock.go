package sandbox

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"time"

	"github.com/snapnode/snapnode/internal/flock"
)

// LockFile is the name of the folder lock, a file in the root of the
// workspace folder that the sandbox creates and never removes. Like the
// temporary files, no proposal can name it (ReservedPrefix), List does
// not show it, the counts leave it out, and Sweep leaves it alone.
const LockFile = ReservedPrefix + "lock"

// The folder lock is polled (flock has no time-out): first after
// lockPollMin, then twice as long each time, up to lockPollMax.
const (
	lockPollMin = time.Millisecond
	lockPollMax = 50 * time.Millisecond
)

// lockFolder takes the folder lock, which Promote, Rollback and Recover
// hold, in every process that opened the folder, from their check of the
// paths' current state until their last step: two replicas of a node
// sharing their workspace never check and change it at the same time. It
// waits while another process holds it, until ctx ends (its cause, a
// *LimitError for MaxDuration, is returned). The caller holds core.mu
// (or, to keep a count, nothing) and calls the returned function to
// release the lock. A file system that keeps no locks (and a platform
// without flock) gets no lock, held false: the promotion goes ahead as
// before, and the count is no longer shared (CountFile).
func (s *Sandbox) lockFolder(ctx context.Context) (unlock func(), held bool, _ error) {
	if !folderLocks {
		return func() {}, false, nil
	}
	wait := lockPollMin
	var timer *time.Timer
	defer func() {
		if timer != nil {
			timer.Stop()
		}
	}()
	for {
		f, err := s.openLock()
		if err != nil {
			return nil, false, err
		}
		for {
			held, err := tryLockFolder(f)
			if errors.Is(err, flock.ErrNoLocks) { // documented: one process a folder
				f.Close()
				s.core.shared.Store(false)
				return func() {}, false, nil
			}
			if err != nil {
				f.Close()
				return nil, false, err
			}
			if held {
				break
			}
			if s.core.hooks.lockBusy != nil {
				s.core.hooks.lockBusy()
			}
			if timer == nil {
				timer = time.NewTimer(wait)
			} else {
				timer.Reset(wait)
			}
			select {
			case <-ctx.Done():
				f.Close()
				return nil, false, context.Cause(ctx)
			case <-timer.C:
			}
			wait = min(2*wait, lockPollMax)
		}
		// Held; but the name may have been removed, or replaced, since it
		// was opened: then the lock held is on a file no other process
		// will open. Take the one now there.
		same, err := s.lockNamed(f)
		if err != nil {
			f.Close()
			return nil, false, err
		}
		if same {
			s.core.shared.Store(true)
			return func() { f.Close() }, true, nil
		}
		f.Close()
	}
}

// openLock opens the lock file in the root of the folder, creating it,
// for reading and writing: NFS emulates flock with POSIX locks, which
// need the file open for writing to lock it exclusively (EBADF
// otherwise, which tryLockFolder takes for a file system without locks).
func (s *Sandbox) openLock() (*os.File, error) {
	root, err := s.core.ws.current()
	if err != nil {
		return nil, err
	}
	if err := checkLock(root); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	f, err := root.OpenFile(LockFile, os.O_RDWR|os.O_CREATE|openNonblock, 0o600)
	if err != nil {
		return nil, bare(err)
	}
	return f, nil
}

// checkLock refuses a lock file that is not a regular file (a symbolic
// link, which os.Root would follow, a FIFO, a directory).
func checkLock(root *os.Root) error {
	fi, err := root.Lstat(LockFile)
	if err != nil {
		return bare(err)
	}
	return plainFile(fi)
}

// lockNamed reports whether f is the file now named LockFile in the
// folder now at the workspace's path.
func (s *Sandbox) lockNamed(f *os.File) (bool, error) {
	root, err := s.core.ws.current()
	if err != nil {
		return false, err
	}
	fi, err := root.Lstat(LockFile)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, bare(err)
	}
	got, err := f.Stat()
	if err != nil {
		return false, bare(err)
	}
	return os.SameFile(fi, got), nil
}
