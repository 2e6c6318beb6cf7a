//go:build unix

package node

import (
	"io/fs"
	"syscall"
)

// owner returns the uid that owns the file fi describes.
func owner(fi fs.FileInfo) (uid int, ok bool) {
	uid, _, ok = ownerGroup(fi)
	return uid, ok
}

// ownerGroup returns the uid and gid of the file fi describes.
func ownerGroup(fi fs.FileInfo) (uid, gid int, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return int(st.Uid), int(st.Gid), true
}
