//go:build linux

package sandbox

import (
	"errors"
	"os"

	"golang.org/x/sys/unix"
)

// renameNoReplace renames from to to, two names in the directory d,
// unless to exists (fs.ErrExist): renameat2 with RENAME_NOREPLACE, one
// atomic step, or linkRename where the file system cannot.
func renameNoReplace(d *os.Root, from, to string) error {
	err := renameExcl(d, from, to)
	if errors.Is(err, errors.ErrUnsupported) {
		return linkRename(d, from, to, nil)
	}
	return err
}

// renameExcl renames from to to, two names in the directory d, unless to
// exists (fs.ErrExist), in one atomic step (RENAME_NOREPLACE);
// errors.ErrUnsupported where the file system cannot.
func renameExcl(d *os.Root, from, to string) error {
	return renameat2(d, from, to, unix.RENAME_NOREPLACE)
}

// exchange swaps the files named a and b in d in one atomic step
// (RENAME_EXCHANGE); errors.ErrUnsupported where the file system cannot.
func exchange(d *os.Root, a, b string) error {
	return renameat2(d, a, b, unix.RENAME_EXCHANGE)
}

// renameat2 runs renameat2(2) on two names of d, relative to d's own
// descriptor: single names (no '/'), so nothing is resolved outside d,
// and the final names are not followed if they are links.
func renameat2(d *os.Root, from, to string, flags uint) error {
	err := atDir(d, func(fd int) error { return unix.Renameat2(fd, from, fd, to, flags) })
	switch err {
	case unix.EINVAL, unix.ENOSYS, unix.EOPNOTSUPP:
		return errors.ErrUnsupported
	}
	return err
}
