package executor

import "syscall"

// rusageWho is whose CPU time threadCPU reads: on Linux, the calling
// thread's own. The caller pins its goroutine to the thread around what it
// measures.
const rusageWho = syscall.RUSAGE_THREAD
