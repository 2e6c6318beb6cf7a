//go:build unix && !linux

package executor

import "syscall"

// rusageWho is whose CPU time threadCPU reads: these systems do not
// report a thread's own, so it is the whole process's. That is an upper
// bound of the action's, so an action is never let past its cap, though a
// busy node may stop one that stayed within it.
const rusageWho = syscall.RUSAGE_SELF
