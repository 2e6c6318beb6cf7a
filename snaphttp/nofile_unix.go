//go:build unix

package snaphttp

import "syscall"

// openFileLimit returns the process's limit of open files (RLIMIT_NOFILE,
// which the Go runtime raises to its hard limit at start), or 0.
func openFileLimit() uint64 {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0
	}
	return uint64(l.Cur)
}
