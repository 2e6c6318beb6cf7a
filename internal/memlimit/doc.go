// Package memlimit holds the Go runtime's soft memory limit near a target
// while what the program keeps live leaves room for it, and lets the
// limit follow the live heap when it does not.
//
// A fixed soft limit (runtime/debug.SetMemoryLimit) bounds a burst's peak
// well, but a program whose live heap nears it has the collector run all
// the time; a node that keeps its tasks in memory ran its round trips
// with up to five times the CPU at a fixed 40 MiB. After every
// collection, Run sets the limit to the larger of the target and what
// lets the heap's goal be 1.25 times the live heap: that, plus what the
// runtime holds besides the heap's objects (stacks, its own structures,
// the unused space of its spans) and the headroom it keeps below a limit.
// The heap may always grow by a quarter of what is live before the next
// collection, so the collector runs about four times as often as Go's
// default (GOGC=100) would have it at most, never continuously.
//
//	defer memlimit.Hold(context.Background(), 32<<20)() // the limit in force before is restored on return
package memlimit
