package executor

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time (user and system) the calling thread has
// used. The caller pins its goroutine to the thread around what it
// measures.
func threadCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}
