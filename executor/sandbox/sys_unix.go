//go:build unix

package sandbox

import (
	"io/fs"
	"syscall"
)

// openNonblock is added to read-only opens so that a FIFO swapped in for a
// file cannot block them. Regular files ignore it.
const openNonblock = syscall.O_NONBLOCK

// linkCount returns the number of hard links of a file.
func linkCount(fi fs.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true
}

// deviceOf returns the device of the file system holding a file.
func deviceOf(fi fs.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Dev), true
}
