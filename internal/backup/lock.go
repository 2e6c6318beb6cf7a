package backup

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/snapnode/snapnode/internal/flock"
)

// lockBackup takes a lock on the backup folder dir for as long as it is
// used: exclusive for Run, which writes it, shared for Check and Restore,
// which read it; ErrBusy when one that excludes it is held. Where the
// file system keeps no locks, it takes none: Run then still publishes a
// backup whole (its manifest last) and removes only the files it made.
func lockBackup(dir string, exclusive bool) (unlock func(), err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	try, busy := flock.TryShared, "a backup (snapnode backup --out) is being written into it: check or restore it once that ends"
	if exclusive {
		try, busy = flock.TryExclusive, "another backup is being written into it, or a check or restore (snapnode backup --check, --restore) reads it"
	}
	switch err := try(f); {
	case err == nil, errors.Is(err, flock.ErrNoLocks):
		return func() { f.Close() }, nil
	case errors.Is(err, flock.ErrHeld):
		f.Close()
		return nil, fmt.Errorf("%w: %s: %s", ErrBusy, dir, busy)
	default:
		f.Close()
		return nil, fmt.Errorf("backup: lock the backup folder %s: %w", dir, err)
	}
}

// scratchPrefix begins the names of the private folders Check makes in
// the data folder for its copies of tasks.db and of the record of the
// last seal. A check killed before it removed its folder left it there;
// the next check (or restore) removes it.
const scratchPrefix = ".backup-check-"

// scratchDir makes a private folder (0700) in dataDir for the copies
// Check verifies, locked until done is called, which removes it. It first
// removes the folders checks that were killed left there: those no
// running check holds locked (where the file system keeps no locks, all
// of them: a check running beside this one then fails, its copies gone;
// it never passes for that).
//
// A missing dataDir is an error, not made: a check writes no folder of
// the node's (run as root, it would be root's, one the node's user could
// not use). Restore makes it before it checks.
func scratchDir(dataDir string) (string, func(), error) {
	switch fi, err := os.Stat(dataDir); {
	case errors.Is(err, fs.ErrNotExist):
		return "", nil, fmt.Errorf("backup: the data folder %s does not exist: the check copies tasks.db into it to verify the copy. Give the node's settings (--config, --data-dir); on a new machine, restore the backup (the restore checks it first, and makes the folder)", dataDir)
	case err != nil:
		return "", nil, fmt.Errorf("backup: data folder: %w", err)
	case !fi.IsDir():
		return "", nil, fmt.Errorf("backup: the data folder %s is not a folder", dataDir)
	}
	RemoveCheckLeftovers(dataDir) // what stays is left for the next
	// Another check may take the new folder for a leftover between its
	// making and its lock, and remove it: then make another.
	for range 3 {
		dir, err := os.MkdirTemp(dataDir, scratchPrefix)
		if err != nil {
			return "", nil, fmt.Errorf("backup: a private folder for the copy of tasks.db: %w", err)
		}
		f, err := os.Open(dir)
		if err != nil {
			continue // removed already
		}
		if err := flock.TryExclusive(f); err != nil && !errors.Is(err, flock.ErrNoLocks) {
			f.Close()
			continue
		}
		if !sameDir(f, dir) {
			f.Close()
			continue
		}
		return dir, func() {
			os.RemoveAll(dir)
			f.Close()
		}, nil
	}
	return "", nil, fmt.Errorf("backup: a private folder for the copy of tasks.db in %s: removed as soon as made, three times", dataDir)
}

// sameDir tells whether the open folder f is still at path.
func sameDir(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Lstat(path)
	return err == nil && os.SameFile(a, b)
}

// RemoveCheckLeftovers removes from the data folder dataDir the private
// folders (.backup-check-*) checks that were killed left there, each
// holding a copy of the node's tasks.db, and returns their paths. Check
// calls it, and so Restore; a node calls it when it starts, once the
// data folder is its own. A folder a running check holds locked is left
// to it (where the file system keeps no locks, none is held: all are
// removed, and a check running meanwhile fails, its copies gone; it
// never passes for that). Only folders are removed, never a file or a
// symbolic link named like them. Those it cannot remove (a check run as
// another user, root, left them) are named in the error; the others are
// removed all the same.
func RemoveCheckLeftovers(dataDir string) (removed []string, err error) {
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return nil, fmt.Errorf("backup: %w", err)
	}
	var errs []error
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), scratchPrefix) {
			continue
		}
		path := filepath.Join(dataDir, e.Name())
		f, err := os.Open(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("backup: a killed check's folder: %w", err))
			continue
		}
		switch err := flock.TryExclusive(f); {
		case errors.Is(err, flock.ErrHeld): // a running check's
		case err == nil, errors.Is(err, flock.ErrNoLocks):
			if err := os.RemoveAll(path); err != nil {
				errs = append(errs, fmt.Errorf("backup: a killed check's folder: %w", err))
			} else {
				removed = append(removed, path)
			}
		default:
			errs = append(errs, fmt.Errorf("backup: a killed check's folder %s: %w", path, err))
		}
		f.Close()
	}
	return removed, errors.Join(errs...)
}
