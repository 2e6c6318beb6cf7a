package sandbox

import (
	"errors"
	"os"

	"github.com/snapnode/snapnode/internal/flock"
)

// folderLocks: the folder lock (lockFolder) is taken here. Where the
// system has no flock, the temporary files are not locked (Sweep removes
// every one) nor is the folder: promotions and rollbacks run one at a
// time within a process only, the count the caps are checked with is
// the process's own (CountFile is not kept: the caps hold per process),
// and processes must not share a workspace folder.
const folderLocks = flock.Supported

// lockTemp takes the writer's lock of the temporary file f, which it
// holds until the file is renamed or removed (or its process ends):
// Sweep, in any process, leaves a locked file alone. errTempTaken: a
// sweep holds it now (it removes it); the writer takes another name. A
// folder whose file system keeps no locks is written all the same.
func lockTemp(f *os.File) error {
	if errors.Is(flock.TryExclusive(f), flock.ErrHeld) {
		return errTempTaken
	}
	return nil
}

// abandoned reports whether no writer holds the temporary file f: true
// once Sweep holds it (until f is closed), and where the system has no
// flock; false while a writer does or when the file system cannot tell.
func abandoned(f *os.File) bool {
	if !flock.Supported {
		return true
	}
	return flock.TryShared(f) == nil
}

// tryLockFolder takes the folder lock on f, the lock file, if no other
// open file holds it: held false while one does. An error: the file
// system keeps no locks. Where the system has no flock it holds at once.
func tryLockFolder(f *os.File) (held bool, err error) {
	if !flock.Supported {
		return true, nil
	}
	err = flock.TryExclusive(f)
	if errors.Is(err, flock.ErrHeld) {
		return false, nil
	}
	return err == nil, err
}
