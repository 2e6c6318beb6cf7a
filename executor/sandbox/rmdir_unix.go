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
	err := atDir(d, func(fd int) error {
		for {
			if err := unix.Unlinkat(fd, name, unix.AT_REMOVEDIR); err != unix.EINTR {
				return err
			}
		}
	})
	if err == unix.ENOTDIR {
		return ErrNotDir
	}
	return err
}

// atDir runs call with the descriptor of d's own folder, for the system
// calls os.Root does not offer (unlinkat with AT_REMOVEDIR, renameat2),
// made relative to it so that nothing is resolved outside d. An error of
// opening the folder is returned bare (see bare); call's, as it is.
func atDir(d *os.Root, call func(fd int) error) error {
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
	if err := c.Control(func(fd uintptr) { errno = call(int(fd)) }); err != nil {
		return err
	}
	return errno
}
