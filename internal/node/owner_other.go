//go:build !unix

package node

import "io/fs"

// owner reports no owner: the system has no uids.
func owner(fs.FileInfo) (uid int, ok bool) { return 0, false }

// ownerGroup reports no owner: the system has no uids.
func ownerGroup(fs.FileInfo) (uid, gid int, ok bool) { return 0, 0, false }
