package executor

import (
	"syscall"
	"time"
)

// threadCPU returns the CPU time (user and kernel) of the whole process,
// an upper bound of the action's (see cpu_unix.go).
func threadCPU() (time.Duration, error) {
	h, err := syscall.GetCurrentProcess()
	if err != nil {
		return 0, err
	}
	var created, exited, kernel, user syscall.Filetime
	if err := syscall.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return 0, err
	}
	// Filetime counts 100 ns; Nanoseconds would take it for a date.
	ticks := func(f syscall.Filetime) int64 { return int64(f.HighDateTime)<<32 | int64(f.LowDateTime) }
	return time.Duration((ticks(kernel) + ticks(user)) * 100), nil
}
