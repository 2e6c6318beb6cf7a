package node

import (
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/snapnode/snapnode/internal/flock"
)

// lockDataDir takes the data folder dir for this node: an exclusive lock
// (flock) on the folder, held until unlock or the process ends, a crash
// included. A folder another node holds is refused, before anything there
// is opened: that node's tasks, promotions and temporary files would look
// to this one like those a crash left. Where the system or the folder's
// file system keeps no locks, the node goes on without one (with a
// warning, unless the system has no flock at all): the admin socket still
// refuses a second node, later in its start.
func lockDataDir(dir string, logger *slog.Logger) (unlock func() error, err error) {
	if !flock.Supported {
		return func() error { return nil }, nil
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("node: data folder: %w", err)
	}
	switch err := flock.TryExclusive(f); {
	case err == nil:
	case errors.Is(err, flock.ErrHeld):
		f.Close()
		return nil, fmt.Errorf("node: another node runs with the data folder (data_dir) %s: stop it first, or give this one another --data-dir", dir)
	case errors.Is(err, flock.ErrNoLocks):
		logger.Warn("the data folder's file system keeps no lock: run one node on it at a time", "dir", dir, "err", err)
	default:
		f.Close()
		return nil, fmt.Errorf("node: lock the data folder (data_dir) %s: %w", dir, err)
	}
	return f.Close, nil
}
