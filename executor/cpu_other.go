//go:build !unix && !windows

package executor

// threadCPU is nil: this system reports no CPU time, so no action's
// max_cpu_ms can be enforced, and every action is refused (rule
// enforceableCap).
var threadCPU cpuClock
