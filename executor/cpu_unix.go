//go:build unix && !linux

package executor

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time (user and system) of the whole process:
// these systems do not report a thread's own. It is an upper bound of the
// action's, so an action is never let past its cap, though a busy node may
// stop one that stayed within it.
func threadCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
