//go:build unix

package sandbox

import (
	"os"

	"golang.org/x/sys/unix"
)

// rmdirIn removes the directory name of d, and nothing else: unlinkat(2)
// with AT_REMOVEDIR, relative to d's own descriptor. os.Root's Remove
// would unlink a file or a symbolic link put at the name since it was
// looked at (it tries unlink first); rmdir never does (ENOTDIR), nor
// follows a link at the name.
func rmdirIn(d *os.Root, name string) error {
	f, err := d.Open(".")
	if err != nil {
		return bare(err)
	}
	defer f.Close()
	c, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var errno error
	if err := c.Control(func(fd uintptr) {
		for {
			errno = unix.Unlinkat(int(fd), name, unix.AT_REMOVEDIR)
			if errno != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	if errno == unix.ENOTDIR {
		return ErrNotDir
	}
	return errno
}
