//go:build unix

package backup

import (
	"io/fs"
	"os"
	"syscall"
)

// chownLike gives path the owner and group of ref when this process runs
// as root and they differ; a user other than root cannot give files away
// and keeps them.
func chownLike(path string, ref fs.FileInfo) error {
	st, ok := ref.Sys().(*syscall.Stat_t)
	if !ok || os.Geteuid() != 0 || (st.Uid == 0 && st.Gid == 0) {
		return nil
	}
	return os.Chown(path, int(st.Uid), int(st.Gid))
}
