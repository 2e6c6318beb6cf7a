package syncdir

import (
	"fmt"
	"os"
	"runtime"
)

// Sync flushes the folder dir's entries to the disk. Windows syncs no
// folder handle (its file system records names with the file): there it
// does nothing.
func Sync(dir string) error {
	if runtime.GOOS == "windows" {
		return nil
	}
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync the folder %s: %w", dir, err)
	}
	return nil
}
