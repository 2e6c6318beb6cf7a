//go:build unix

package node

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"syscall"
)

// lockDataDir takes the data folder dir for this node: an exclusive lock
// (flock) on the folder, held until unlock or the process ends, a crash
// included. A folder another node holds is refused, before anything there
// is opened: that node's tasks, promotions and temporary files would look
// to this one like those a crash left.
func lockDataDir(dir string, logger *slog.Logger) (unlock func() error, err error) {
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("node: data folder: %w", err)
	}
	raw, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("node: data folder: %w", err)
	}
	var ferr error
	if err := raw.Control(func(fd uintptr) {
		for {
			if ferr = syscall.Flock(int(fd), syscall.LOCK_EX|syscall.LOCK_NB); ferr != syscall.EINTR {
				return
			}
		}
	}); err != nil {
		ferr = err
	}
	switch {
	case ferr == nil:
	case errors.Is(ferr, syscall.EWOULDBLOCK):
		f.Close()
		return nil, fmt.Errorf("node: another node runs with the data folder (data_dir) %s: stop it first, or give this one another --data-dir", dir)
	case errors.Is(ferr, syscall.ENOLCK), errors.Is(ferr, syscall.EOPNOTSUPP), errors.Is(ferr, syscall.EBADF):
		// A file system that keeps no locks (or, like NFS, none on a
		// folder opened for reading) holds the folder without one: the
		// admin socket still refuses a second node, later in its start.
		logger.Warn("the data folder's file system keeps no lock: run one node on it at a time", "dir", dir, "err", ferr)
	default:
		f.Close()
		return nil, fmt.Errorf("node: lock the data folder (data_dir) %s: %w", dir, ferr)
	}
	return f.Close, nil
}
