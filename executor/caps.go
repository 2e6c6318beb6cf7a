package executor

import (
	"context"
	"errors"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/snapnode/snapnode/executor/proposal"
	"github.com/snapnode/snapnode/executor/sandbox"
)

// How the executor enforces an action's resources (the smaller of the
// host's caps and a peer descriptor's):
//
//   - max_duration_ms bounds every sandbox call (its context ends);
//   - max_disk_mb bounds the bytes the action writes;
//   - max_memory_mb bounds the bytes the action holds: half of it for
//     what it writes, half for what it reads (files read, and the
//     pre-images kept of the files it changes), shared equally among
//     the paths it touches, which lowers the sandbox's cap on one file;
//   - max_cpu_ms bounds the CPU time of the run (the sandbox's reads,
//     listings and staging), measured on the thread the run is pinned
//     to. The run is not cut short when it passes the cap: its result
//     is discarded before anything changes (nothing is promoted, nothing
//     read is returned), and max_duration_ms bounds how long it can take.
//
// A cap the host cannot enforce (max_cpu_ms where the system reports no
// CPU time) refuses the action before it runs.

// cpuClock reads the CPU time the calling thread has used (threadCPU).
type cpuClock func() (time.Duration, error)

// The caps of LIMIT_EXCEEDED the executor adds to the sandbox's.
const (
	limitMemory = "memory"
	limitCPU    = "cpu"
)

// unenforceableCPU refuses every action where there is no CPU clock.
func unenforceableCPU() *proposal.Error {
	return &proposal.Error{
		Code: proposal.ErrValidation, Field: "/resources/max_cpu_ms", Rule: "enforceableCap",
		Message: "This host cannot measure CPU time, so it cannot enforce max_cpu_ms.",
	}
}

// memory is the item's memory cap in bytes.
func (it *item) memory() int64 { return it.resources.MaxMemoryMB << 20 }

// readCap is the most one file read or replaced may hold: half the memory
// cap, shared among the paths the item touches.
func (it *item) readCap() int64 {
	return it.memory() / 2 / int64(max(1, len(it.paths())))
}

// limits are the sandbox caps the item's resources set.
func (it *item) limits() sandbox.Limits {
	return sandbox.Limits{
		MaxDuration: time.Duration(it.resources.MaxDurationMillis) * time.Millisecond,
		MaxFileSize: it.readCap(),
	}
}

// whole bounds all of the action's work in the sandbox before its
// promotion (its reads and listings and the staging of its changes,
// however many steps a composite has) by max_duration_ms together; each
// sandbox call has the same bound of its own (limits). When this deadline
// ends the work, the sandbox reports the duration limit.
func (it *item) whole(ctx context.Context) (context.Context, context.CancelFunc) {
	d := time.Duration(it.resources.MaxDurationMillis) * time.Millisecond
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeoutCause(ctx, d, &sandbox.LimitError{Limit: sandbox.LimitDuration, Max: d.Milliseconds(), Err: context.DeadlineExceeded})
}

// durationFailure is LIMIT_EXCEEDED for max_duration_ms when took, the
// action's work in the sandbox by the executor's clock, is over it: a run
// that finished just past its deadline is discarded before any effect,
// as one over its CPU time is.
func (it *item) durationFailure(took time.Duration) *Failure {
	max := time.Duration(it.resources.MaxDurationMillis) * time.Millisecond
	if max <= 0 || took <= max {
		return nil
	}
	return &Failure{Code: CodeLimitExceeded, Limit: string(sandbox.LimitDuration), Max: it.resources.MaxDurationMillis,
		Got: int64((took + time.Millisecond - 1) / time.Millisecond), Field: "/resources/max_duration_ms",
		Message: "The action exceeds the duration limit."}
}

// memoryFailure is LIMIT_EXCEEDED for max_memory_mb; got is what the
// action asked for, in bytes (0 when unknown).
func (it *item) memoryFailure(got int64) *Failure {
	return &Failure{Code: CodeLimitExceeded, Limit: limitMemory, Max: it.memory(), Got: got,
		Field: "/resources/max_memory_mb", Message: "The action exceeds the memory limit."}
}

// limitFailure is sandboxFailure, but a file too large for the cap the
// memory cap set (the host's own cap being larger) is the memory limit
// reached.
func (e *Executor) limitFailure(it *item, err error) *Failure {
	e.noWorkspace(err)
	f := sandboxFailure(err)
	if f.Limit == string(sandbox.LimitFileSize) && it.readCap() < e.sb.Limits().MaxFileSize {
		m := it.memoryFailure(f.Got)
		m.Paths = f.Paths
		return m
	}
	if f.Field == "" && len(f.Paths) == 1 {
		switch {
		case f.Code == CodeExecutionFailed:
			f.Field = it.argField(f.Paths[0], f.Cause)
		case f.Limit == string(sandbox.LimitFileSize):
			f.Field = it.contentField(f.Paths[0])
		}
	}
	return f
}

// contentField is the JSON pointer of the content of the write to path,
// for a file over the size bound; "" unless exactly one step writes it.
func (it *item) contentField(path string) string {
	var found []string
	for i, s := range it.steps {
		if s.p.Action.Kind == proposal.KindWriteFile && s.p.Args.Path == path {
			found = append(found, it.argsAt(i)+"/args/content")
		}
	}
	if len(found) != 1 {
		return ""
	}
	return found[0]
}

// argsAt is the JSON pointer of the parent of step i's args: "" for a
// proposal, /operation for a descriptor, /children/i/operation for a
// composite's step.
func (it *item) argsAt(i int) string {
	switch {
	case it.composite:
		return "/children/" + strconv.Itoa(i) + "/operation"
	case it.format == formatDescriptor:
		return "/operation"
	}
	return ""
}

// argField is the JSON pointer of the argument that the sandbox's refusal
// of path (with cause) concerns: the argument naming path, or a path
// below it (a folder above a file refused). A rename's target is what
// exists, its source what is missing or not a file. "" when no argument,
// or more than one, fits.
func (it *item) argField(path, cause string) string {
	var found []string
	for i, s := range it.steps {
		at := it.argsAt(i)
		a := s.p.Args
		for _, arg := range []struct{ name, value string }{
			{"path", a.Path}, {"source", a.Source}, {"destination", a.Destination},
		} {
			below := strings.HasSuffix(path, "/") && strings.HasPrefix(arg.value, path) ||
				strings.HasPrefix(arg.value, path+"/")
			if arg.value == "" || (arg.value != path && !below) {
				continue
			}
			if a.Source != "" && (cause == "exists") == (arg.name == "source") {
				continue
			}
			found = append(found, at+"/args/"+arg.name)
		}
	}
	if len(found) != 1 {
		return ""
	}
	return found[0]
}

// onThread runs f pinned to one OS thread and returns the CPU time that
// thread used meanwhile. The sandbox does its work on the calling
// goroutine, so this is the run's own CPU time (and, where only the
// process's is known, an upper bound of it).
func (e *Executor) onThread(f func()) (time.Duration, error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	start, err := e.cpu()
	if err != nil {
		return 0, err
	}
	f()
	end, err := e.cpu()
	if err != nil {
		return 0, err
	}
	return end - start, nil
}

// cpuFailure is LIMIT_EXCEEDED for max_cpu_ms when used is beyond it, nil
// otherwise.
func (it *item) cpuFailure(used time.Duration) *Failure {
	max := time.Duration(it.resources.MaxCPUMillis) * time.Millisecond
	if used <= max {
		return nil
	}
	return &Failure{Code: CodeLimitExceeded, Limit: limitCPU, Max: it.resources.MaxCPUMillis,
		Got: int64((used + time.Millisecond - 1) / time.Millisecond), Field: "/resources/max_cpu_ms",
		Message: "The action exceeds the CPU time limit."}
}

// noWorkspace logs err when it is the workspace folder missing: the
// requester is told only that (cause no_workspace), the operator which
// folder it is.
func (e *Executor) noWorkspace(err error) {
	if errors.Is(err, sandbox.ErrNoWorkspace) {
		e.logger.Error("executor: the workspace folder is missing; actions fail until it is restored", "err", err)
	}
}
