package loadgen

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// ProcStat is what /proc tells of a process: its CPU time so far (user and
// system) and its resident memory now and at its peak.
type ProcStat struct {
	CPU     time.Duration
	RSS     int64 // bytes (VmRSS)
	PeakRSS int64 // bytes (VmHWM)
}

// clockTicks is USER_HZ, the unit of /proc's CPU times on Linux.
const clockTicks = 100

// ReadProc reads the CPU time and memory of the process pid from /proc
// (Linux).
func ReadProc(pid int) (ProcStat, error) {
	var st ProcStat
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return st, fmt.Errorf("loadgen: node CPU: %w", err)
	}
	st.CPU, err = parseStatCPU(string(raw))
	if err != nil {
		return st, fmt.Errorf("loadgen: /proc/%d/stat: %w", pid, err)
	}
	raw, err = os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return st, fmt.Errorf("loadgen: node memory: %w", err)
	}
	st.RSS, st.PeakRSS, err = parseStatusMemory(string(raw))
	if err != nil {
		return st, fmt.Errorf("loadgen: /proc/%d/status: %w", pid, err)
	}
	return st, nil
}

// parseStatCPU returns utime+stime of a /proc/PID/stat line. The command
// name, in parentheses, may hold spaces and parentheses: the fields are
// counted from the last ')'.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("no ')' after the command name")
	}
	f := strings.Fields(stat[i+1:])
	// After the name: state(0) … utime(11) stime(12).
	if len(f) < 13 {
		return 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("utime/stime: %w", err)
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}

// parseStatusMemory returns VmRSS and VmHWM, in bytes, of /proc/PID/status.
func parseStatusMemory(status string) (rss, peak int64, err error) {
	found := 0
	for line := range strings.Lines(status) {
		var dst *int64
		name, v, ok := strings.Cut(line, ":")
		switch {
		case !ok:
			continue
		case name == "VmRSS":
			dst = &rss
		case name == "VmHWM":
			dst = &peak
		default:
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", name, err)
		}
		*dst = kb << 10
		found++
	}
	if found < 2 {
		return 0, 0, errors.New("no VmRSS and VmHWM")
	}
	return rss, peak, nil
}
