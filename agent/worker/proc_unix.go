//go:build unix

package worker

import (
	"os/exec"
	"syscall"
)

// setGroup puts the worker in a process group of its own, so that
// killGroup reaches whatever it started.
func setGroup(cmd *exec.Cmd) { cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }

// killGroup kills the worker's process group.
func killGroup(cmd *exec.Cmd) {
	if cmd.Process != nil {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}
