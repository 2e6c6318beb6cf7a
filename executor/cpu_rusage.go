//go:build unix

package executor

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time (user and system) that getrusage reports
// for rusageWho: the calling thread on Linux, the process elsewhere.
func threadCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageWho, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
